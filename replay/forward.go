package replay

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
)

// A trace entry's "forward_frames" (torch 2.8+) is the forward pass's
// Python traceback of an allocation made in backward: strings in the form
// of traceback.format_stack, outermost call first, each usually one frame
// with its source line ("  File \"/job/model.py\", line 58, in forward\n
// y = self.attn(x)\n"). The decoder turns them into a stack, innermost
// first like every stack; source lines are not kept.

var (
	tracebackLine = regexp.MustCompile(`^\s*File "(.*)", line (\d+), in (.*?)\s*$`)
	bareFrame     = regexp.MustCompile(`^\s*(\S.*?):(\d+):(.*?)\s*$`)
)

// parseForwardFrames reads forward traceback strings (outermost first) as
// a stack (innermost first). A string may hold one frame, several, or a
// bare "path:line:function"; one in no known shape becomes a frame named
// by the whole string, with no file.
func parseForwardFrames(strs []string) []snapshot.Frame {
	var out []snapshot.Frame
	for _, s := range strs {
		n := len(out)
		for ln := range strings.SplitSeq(s, "\n") {
			if m := tracebackLine.FindStringSubmatch(ln); m != nil {
				line, _ := strconv.ParseInt(m[2], 10, 64)
				out = append(out, snapshot.Frame{Filename: m[1], Line: line, Name: m[3]})
			}
			// Other lines are the source lines under a frame.
		}
		if len(out) > n {
			continue
		}
		if m := bareFrame.FindStringSubmatch(s); m != nil && !strings.Contains(s, "\n") {
			line, _ := strconv.ParseInt(m[2], 10, 64)
			out = append(out, snapshot.Frame{Filename: m[1], Line: line, Name: m[3]})
			continue
		}
		if s != "" {
			out = append(out, snapshot.Frame{Name: s})
		}
	}
	slices.Reverse(out)
	return out
}

// forwardStrings writes a forward traceback (innermost first) back as
// torch does: traceback.format_list lines, outermost first; a frame with
// no file and line is its name as it was read.
func forwardStrings(st snapshot.Stack) []string {
	out := make([]string, 0, len(st))
	for i := len(st) - 1; i >= 0; i-- {
		f := st[i]
		if f.Filename == "" && f.Line == 0 {
			out = append(out, f.Name)
			continue
		}
		out = append(out, "  File \""+f.Filename+"\", line "+strconv.FormatInt(f.Line, 10)+", in "+f.Name+"\n")
	}
	return out
}
