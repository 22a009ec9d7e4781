package tui

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/store"
)

// filter is a parsed `/` expression: space-separated terms, all of which
// must hold. size>N / size<N / size>=N / size<=N (N with KiB/MiB/GiB),
// stream=N (the full id, decimal or 0x hex) or stream=sK (the events pane's
// label), anything else is a regular expression on op name, action and
// stack frames.
type filter struct {
	text      string
	re        *regexp.Regexp
	minSize   int64  // inclusive, 0 = none
	maxSize   int64  // inclusive, -1 = none
	stream    int64  // -1 = any (or by label)
	streamLbl string // "s1": the stream labelled so
}

func parseFilter(s string) (*filter, error) {
	f := &filter{text: strings.TrimSpace(s), maxSize: -1, stream: -1}
	if f.text == "" {
		return nil, nil
	}
	var words []string
	for _, t := range strings.Fields(f.text) {
		lt := strings.ToLower(t)
		switch {
		case strings.HasPrefix(lt, "size>=") || strings.HasPrefix(lt, "size>"):
			v, err := bytesize.Parse(strings.TrimLeft(lt[4:], ">="))
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(lt, "size>=") {
				v++
			}
			f.minSize = v
		case strings.HasPrefix(lt, "size<=") || strings.HasPrefix(lt, "size<"):
			v, err := bytesize.Parse(strings.TrimLeft(lt[4:], "<="))
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(lt, "size<=") {
				v--
			}
			f.maxSize = v
		case strings.HasPrefix(lt, "stream="):
			if n, err := strconv.Atoi(strings.TrimPrefix(lt[7:], "s")); err == nil && n >= 0 && strings.HasPrefix(lt[7:], "s") {
				f.streamLbl = lt[7:]
				break
			}
			v, err := strconv.ParseUint(lt[7:], 0, 64)
			if err != nil {
				return nil, fmt.Errorf("bad stream in %q (a label such as s1, or the full id)", t)
			}
			f.stream = int64(v)
		default:
			words = append(words, t)
		}
	}
	if len(words) > 0 {
		re, err := regexp.Compile(strings.Join(words, " "))
		if err != nil {
			return nil, fmt.Errorf("bad regular expression: %v", err)
		}
		f.re = re
	}
	return f, nil
}

func (f *filter) sizeOK(n int64) bool {
	if n < 0 {
		n = -n
	}
	return n >= f.minSize && (f.maxSize < 0 || n <= f.maxSize)
}

// matchEvent tests an event; text returns the op name and stack text lazily,
// labels names its stream.
func (f *filter) matchEvent(e *store.Event, labels *streamLabels, text func() string) bool {
	if f == nil {
		return true
	}
	if !f.sizeOK(e.Size) {
		return false
	}
	if f.stream >= 0 && e.Stream != uint64(f.stream) || f.streamLbl != "" && labels.label(e.Stream) != f.streamLbl {
		return false
	}
	return f.re == nil || f.re.MatchString(actionName(e)) || f.re.MatchString(text())
}

// matchOp tests an op: regex on the name, size on the memory delta.
func (f *filter) matchOp(o *store.Op) bool {
	if f == nil {
		return true
	}
	if !f.sizeOK(o.MemDelta) {
		return false
	}
	return f.re == nil || f.re.MatchString(o.Name)
}

// actionName is the event's action as its source named it (sources that
// do not name actions: the known action's name).
func actionName(e *store.Event) string {
	if e.ActionName != "" {
		return e.ActionName
	}
	return e.Action.String()
}
