// Package capture names what one capture is — a memory snapshot file or a
// profiler directory — and the row a list of captures shows: the one form
// of both that the directory watcher (monitor/watch), the job-directory
// finder (monitor/ranks/jobdir) and the terminal UI's capture picker share.
// It is a leaf: the TUI uses it without linking the watcher.
package capture

import "time"

// Kind is what a capture is. Its text is the "kind" of `npumon watch
// --list` and of a job directory's ranks in JSON.
type Kind string

// Kinds of capture.
const (
	Snapshot Kind = "snapshot" // a snapshot pickle or its JSON export
	Profiler Kind = "profiler" // a torch_npu profiler directory (or its SQLite export)
)

// Entry is one snapshot file or profiler directory of a watched (or job)
// directory. The JSON form is what `npumon watch --list` prints; the
// capture picker shows the same rows.
type Entry struct {
	// Index is the capture's number in arrival order, the one `watch
	// --list` prints and `--open N` takes (watch.Number); 0 once removed.
	Index    int       `json:"index"`
	Kind     Kind      `json:"kind"`
	Path     string    `json:"path"`
	Existing bool      `json:"existing"`          // there before the watch started
	Arrived  time.Time `json:"arrived"`           // its modification time (watch.Number orders by it)
	Size     int64     `json:"size"`              // bytes (a profiler directory: all its files)
	Error    string    `json:"error,omitempty"`   // why it cannot be opened; "" when it can
	Writing  bool      `json:"writing,omitempty"` // a snapshot not complete yet (Error says so)
	Removed  bool      `json:"removed,omitempty"` // gone from the directory (DirSource.List only)
	Open     bool      `json:"-"`                 // the capture shown (set by the lister)
}
