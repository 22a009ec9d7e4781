package tui

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/profiler"
)

// TestAnalysedProfilerDirShowsTotals: an analysed-only profiler directory
// (CSV output, no FRAMEWORK files) shows its memory_record totals on the
// timeline and its kernels as ops, with a header line saying there is no
// block-level trace — not "waiting for data…".
func TestAnalysedProfilerDirShowsTotals(t *testing.T) {
	d, err := profiler.ReadDir(fixture.Path(t, "ascend_profiler/msinsight_rank0"))
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	if err := watch.IngestProfiler(st, d, nil); err != nil {
		t.Fatal(err)
	}
	note := watch.NoBlockTrace(d)
	if !strings.Contains(note, "no block-level trace") {
		t.Fatalf("note %q", note)
	}
	o := testOptions(st)
	o.SourceName = "msinsight_rank0"
	o.Note = func() string { return note }
	m := newSized(t, o, 160, 48)
	press(m, "end")
	v := m.View()
	if strings.Contains(v, "waiting for data") {
		t.Fatalf("the view waits for data:\n%s", v)
	}
	for _, want := range []string{"no block-level trace", "reserved 8.46 GiB", "allocated 4.49 GiB", "free frag —"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	press(m, "4")
	if v := m.View(); !strings.Contains(v, "ZerosLike") {
		t.Errorf("the ops pane lacks the kernels:\n%s", v)
	}
}
