package profiler

import (
	"strings"
	"testing"
)

// TestSanityMixedSessions: a database mixing two sessions (rows 15,336
// hours apart, op names that are dtype lists) reads, with one warning line
// for each; the well-formed fixture gets neither.
func TestSanityMixedSessions(t *testing.T) {
	d, err := ReadDir("testdata/db/mixed_sessions.db")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(d.Warnings, "\n")
	for _, w := range []string{
		"testdata/db/mixed_sessions.db: implausible: its ops and memory records span 15336 hours (2023-11-14 22:13:20 → ",
		"more than 72 hours",
		`implausible: 2 of 4 op names are dtype or shape lists or numbers ("DT_BF16;DT_BF16;DT_FLOAT"), not op names`,
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
	for _, w := range d.Warnings {
		if strings.Contains(w, "\n") {
			t.Errorf("a warning of more than one line: %q", w)
		}
	}
	ok, err := ReadDir("testdata/db/ascend_pytorch_profiler_0.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ok.Warnings {
		if strings.Contains(w, "implausible") {
			t.Errorf("a well-formed database: %q", w)
		}
	}
}

func TestIsValueName(t *testing.T) {
	for name, want := range map[string]bool{"DT_BF16": true, "DT_BF16;DT_FLOAT;": true, "DT_BF16;DT_INT64": true,
		"DT_BF16;DT_BF16;DT_BF16;FLOAT;FLOAT;FLOAT;BOOL;INT64": true, "INT64;INT64": true, `"1676480000"`: true,
		`"1,1,2048,2048;"`: true, "INT64": false, "Cast": false, "GatherV2": false, "ProfilerStep#1": false,
		"aten::add": false, "DT_": false, "DT_bf16": false, "DT_BF16;aten::add": false, "": false, "MatMul;Add": false} {
		if IsValueName(name) != want {
			t.Errorf("IsValueName(%q) = %v", name, !want)
		}
	}
}
