// Package classify decides what an input path is by its content: a memory
// snapshot (pickle or JSON), a profiler SQLite export (by its header,
// whatever its name), a profiler trace_view.json (a Chrome trace), a
// torch_npu profiler directory, a directory holding profiler directories,
// or a plain directory. Every command and the directory watcher ask it, so
// one file is read the same way wherever it is named.
package classify

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/profiler"
)

// Kind is what a path holds.
type Kind int

// Kinds of input.
const (
	Unknown        Kind = iota // a file of no known format
	SnapshotPickle             // a torch / torch_npu _dump_snapshot pickle (any protocol: the decoder names the unsupported ones)
	SnapshotJSON               // a snapshot exported as JSON
	SQLite                     // a profiler SQLite export (torch_npu's or CANN msprof's)
	TraceView                  // a profiler trace_view.json (Chrome trace events)
	ProfilerDir                // a *_ascend_pt directory, its ASCEND_PROFILER_OUTPUT or FRAMEWORK, or a directory of analysed files
	ProfilerParent             // a directory holding profiler directories
	PlainDir                   // a directory with nothing npumon reads
)

var kindNames = [...]string{"unknown", "snapshot (pickle)", "snapshot (JSON)", "profiler SQLite export",
	"profiler trace_view.json (Chrome trace)", "profiler directory", "directory of profiler directories", "plain directory"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Capture is the kind of capture k is read as: capture.Snapshot (a memory
// snapshot), capture.Profiler (profiler output, profiler.ReadDir), or ""
// for a path npumon does not read.
func (k Kind) Capture() capture.Kind {
	switch k {
	case SnapshotPickle, SnapshotJSON:
		return capture.Snapshot
	case SQLite, TraceView, ProfilerDir, ProfilerParent:
		return capture.Profiler
	}
	return ""
}

// Snapshot reports whether k is read as a memory snapshot.
func (k Kind) Snapshot() bool { return k.Capture() == capture.Snapshot }

// Profiler reports whether k is read as profiler output (profiler.ReadDir).
func (k Kind) Profiler() bool { return k.Capture() == capture.Profiler }

// Input is a classified path.
type Input struct {
	Path string
	Kind Kind
	// Why says, for Unknown and PlainDir, what was found instead.
	Why string
}

// sniffLen is how much of a file the classifier reads.
const sniffLen = 64 << 10

// Path classifies path. The error is for a path that cannot be read at all
// (missing, no permission); content npumon does not read is Unknown or
// PlainDir with Why set.
func Path(path string) (Input, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Input{}, err
	}
	in := Input{Path: path}
	if st.IsDir() {
		switch {
		case profiler.IsProfilerPath(path):
			in.Kind = ProfilerDir
		case len(profiler.FindProfilerDirs(path)) > 0:
			in.Kind = ProfilerParent
		default:
			in.Kind = PlainDir
			in.Why = "a directory, but not a profiler directory (no FRAMEWORK/, ASCEND_PROFILER_OUTPUT/, profiler_info*.json or analysed files, and none inside it)"
		}
		return in, nil
	}
	if !st.Mode().IsRegular() {
		in.Why = fmt.Sprintf("not a regular file (%v)", st.Mode().Type())
		return in, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Input{}, err
	}
	defer f.Close()
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return Input{}, err
	}
	in.Kind, in.Why = Content(head[:n])
	return in, nil
}

// Content classifies a file by its first bytes (up to 64 KiB are enough).
func Content(head []byte) (Kind, string) {
	if bytes.HasPrefix(head, []byte("SQLite format 3\x00")) {
		return SQLite, ""
	}
	b := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(b) == 0 {
		return Unknown, "the file is empty"
	}
	switch c := b[0]; {
	case c == 0x80:
		return SnapshotPickle, ""
	case bytes.IndexByte([]byte("(}]cld"), c) >= 0:
		return SnapshotPickle, "" // protocol 0 or 1: the decoder says so
	case c == '[':
		// a Chrome trace's event array or a torch 1.13 list of segments:
		// the first object tells
		if first := firstObject(b[1:]); bytes.Contains(first, []byte(`"ph"`)) && !bytes.Contains(first, []byte(`"total_size"`)) {
			return TraceView, ""
		}
		return SnapshotJSON, ""
	case c == '{':
		if bytes.Contains(b, []byte(`"traceEvents"`)) && !bytes.Contains(b, []byte(`"segments"`)) {
			return TraceView, ""
		}
		return SnapshotJSON, ""
	}
	return Unknown, fmt.Sprintf("not a memory snapshot: offset %d: starts with byte 0x%02x, neither a pickle (protocol 2–5), JSON, a Chrome trace nor an SQLite database", len(head)-len(b), b[0])
}

// firstObject returns the text of the first JSON object in b, up to its
// first closing brace (enough to see its keys), or b's sniffed part.
func firstObject(b []byte) []byte {
	if i := bytes.IndexByte(b, '}'); i >= 0 {
		return b[:i]
	}
	return b
}

// Describe is a one-line name for the input, e.g. for errors.
func (in Input) Describe() string {
	if in.Why != "" {
		return fmt.Sprintf("%s: %s", in.Path, in.Why)
	}
	return fmt.Sprintf("%s: %s", in.Path, in.Kind)
}

// SnapshotOnly returns nil for a snapshot and otherwise the error a
// snapshot-only command (check, whatif, export) reports.
func (in Input) SnapshotOnly(cmd string) error {
	switch {
	case in.Kind.Snapshot():
		return nil
	case in.Kind.Profiler():
		return fmt.Errorf("%s: a %s, not a memory snapshot: %s reads snapshot files (stats and replay read profiler data)", in.Path, in.Kind, cmd)
	}
	return fmt.Errorf("%s: not a memory snapshot: %s", in.Path, in.whyOr())
}

func (in Input) whyOr() string {
	if in.Why != "" {
		return in.Why
	}
	return in.Kind.String()
}
