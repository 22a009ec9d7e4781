package replay

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func fixtures(t testing.TB) []string {
	t.Helper()
	return fixture.Glob(t, "snapshots/*.pickle")
}

func mustDecode(t testing.TB, path string) *Capture {
	t.Helper()
	c, err := DecodeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRoundTripFixtures: decode → export (pickle and JSON) → decode gives an equal model.
func TestRoundTripFixtures(t *testing.T) {
	for _, f := range fixtures(t) {
		c := mustDecode(t, f)
		for name, write := range map[string]func(*bytes.Buffer) error{
			"pickle": func(b *bytes.Buffer) error { return WritePickle(b, c.Snapshot, ExportDict) },
			"json":   func(b *bytes.Buffer) error { return WriteJSON(b, c.Snapshot, ExportDict) },
		} {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			c2, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
			if err != nil {
				t.Fatalf("%s: re-decode %s: %v", filepath.Base(f), name, err)
			}
			if c2.Format != name || c2.Schema != c.Schema {
				t.Errorf("%s via %s: format %s schema %s, want %s %s", filepath.Base(f), name, c2.Format, c2.Schema, name, c.Schema)
			}
			if !reflect.DeepEqual(c.Snapshot, c2.Snapshot) {
				t.Errorf("%s: round trip through %s changed the model", filepath.Base(f), name)
			}
		}
	}
}
