package main

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/store"
)

// TestRetainFlag: --retain is read strictly by every live command (exit 2,
// the flag and the reason named), and a window the demo overflows is said
// in its --headless summary.
func TestRetainFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"attach", "--retain", "2M", "unix:/nonexistent.sock"}, `invalid argument "2M" for "--retain" flag: "2M": want a number of entries`},
		{[]string{"attach", "--retain", "100", "unix:/nonexistent.sock"}, "keep at least 4096 entries"},
		{[]string{"demo", "--retain", "10ms"}, "keep at least 1s"},
		{[]string{"watch", "--retain", "", "."}, "empty value"},
		{[]string{"demo", "--retain", "-1"}, "--retain"},
	} {
		code, _, errOut := captureRun(t, c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	var s replaySummaryJSON
	demoUntil(t, &s, func(st *store.Store) bool { return st.Retained(0).Thinned > 0 },
		"--rate", "200", "--layers", "2", "--device-mem", "16GiB", "--retain", "4096")
	if s.Retain == nil || *s.Retain != "4096" || s.ThinnedEntries == nil || *s.ThinnedEntries == 0 ||
		s.DetailFrom == nil || *s.DetailFrom <= s.FirstTime || *s.DetailFrom > s.LastTime || s.Entries-*s.ThinnedEntries < 4096 {
		t.Fatalf("retention in the summary: retain %v thinned %v detail_from %v, entries %d (%d…%d)", s.Retain, s.ThinnedEntries, s.DetailFrom, s.Entries, s.FirstTime, s.LastTime)
	}
	var all replaySummaryJSON
	runJSON(t, &all, "demo", "--headless", "300ms", "--rate", "20", "--layers", "2", "--device-mem", "16GiB", "--retain", "all")
	if all.Retain == nil || *all.Retain != "all" || all.ThinnedEntries == nil || *all.ThinnedEntries != 0 || all.DetailFrom != nil {
		t.Fatalf("--retain all: retain %v thinned %v detail_from %v", all.Retain, all.ThinnedEntries, all.DetailFrom)
	}
}
