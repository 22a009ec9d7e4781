package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/safefile"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// compactInputs are the real fixtures and the generated variants (pool
// ids, wide addresses, histories, forward tracebacks, unknown actions).
func compactInputs(t *testing.T) []string {
	files, _ := filepath.Glob("testdata/*.pickle")
	js, _ := filepath.Glob("testdata/*.json")
	var out []string
	for _, f := range append(append(files, js...), fixtures(t)...) {
		if !strings.HasPrefix(filepath.Base(f), "bad_") {
			out = append(out, f)
		}
	}
	return out
}

// TestCompactJSONRoundTrip: a snapshot decoded, written as compact JSON and
// decoded again is the model the original decode gave, stack ids and all
// (the decoder interns each table row when a record first names it, in
// the order the inline form would have); the inline (--pretty) form too.
func TestCompactJSONRoundTrip(t *testing.T) {
	for _, f := range compactInputs(t) {
		c := mustDecode(t, f)
		decoded := map[string]*Capture{}
		for name, write := range map[string]func(*bytes.Buffer) error{
			"compact": func(b *bytes.Buffer) error { return WriteCompactJSON(b, c.Snapshot, ExportDict) },
			"pretty":  func(b *bytes.Buffer) error { return WriteJSON(b, c.Snapshot, ExportDict) },
		} {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			if got := bytes.HasPrefix(b.Bytes(), []byte(`{"npumon_compact":1,"frame_table":[`)); got != (name == "compact") {
				t.Errorf("%s %s: starts %.40q", filepath.Base(f), name, b.Bytes())
			}
			c2, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
			if err != nil {
				t.Fatalf("%s: re-decode %s: %v", filepath.Base(f), name, err)
			}
			if c2.Format != "json" {
				t.Errorf("%s via %s: format %s", filepath.Base(f), name, c2.Format)
			}
			if c.Schema != SchemaTorch113 && c2.Schema != c.Schema {
				t.Errorf("%s via %s: schema %s, want %s", filepath.Base(f), name, c2.Schema, c.Schema)
			}
			decoded[name] = c2
		}
		// Compact and inline read back as one model, stack ids and all; the
		// model the file itself gave, up to stack numbering (SameModel),
		// and exactly (stack ids too) for every real fixture.
		if !reflect.DeepEqual(decoded["compact"].Snapshot, decoded["pretty"].Snapshot) {
			t.Errorf("%s: compact and inline JSON read back differently", filepath.Base(f))
		}
		if !SameModel(c.Snapshot, decoded["compact"].Snapshot) {
			t.Errorf("%s: round trip through compact JSON changed the model", filepath.Base(f))
		}
		if strings.Contains(f, "fixtures") && !reflect.DeepEqual(c.Snapshot, decoded["compact"].Snapshot) {
			t.Errorf("%s: round trip through compact JSON renumbered the stacks", filepath.Base(f))
		}
	}
}

// TestCompactJSONSize: the compact form is within 3× the pickle npumon
// writes of the same model (which shares stacks and strings through its
// memo; JSON repeats every key of every record), where the inline form is
// 7–21× it on the real fixtures.
func TestCompactJSONSize(t *testing.T) {
	for _, f := range fixtures(t) {
		c := mustDecode(t, f)
		var pk, compact, pretty bytes.Buffer
		WritePickle(&pk, c.Snapshot, ExportDict)
		WriteCompactJSON(&compact, c.Snapshot, ExportDict)
		WriteJSON(&pretty, c.Snapshot, ExportDict)
		t.Logf("%s: pickle %d, compact JSON %d (%.2f×), inline JSON %d (%.1f×)", filepath.Base(f), pk.Len(),
			compact.Len(), float64(compact.Len())/float64(pk.Len()), pretty.Len(), float64(pretty.Len())/float64(pk.Len()))
		if compact.Len() > 3*pk.Len() {
			t.Errorf("%s: compact JSON %d bytes, over 3× the pickle's %d", filepath.Base(f), compact.Len(), pk.Len())
		}
	}
}

// TestPrettyJSONUnchanged: WriteJSON (export --to json --pretty) writes, byte
// for byte, what export --to json wrote before the compact form existed
// (the digests were taken from that version's output).
func TestPrettyJSONUnchanged(t *testing.T) {
	for _, c := range []struct {
		file   string
		schema ExportSchema
		sha256 string
	}{
		{"snapshots/npu-2.6-msinsight-snapshot_1768383987920985470.pkl", ExportDict, "1e9280857887b25513eb1ddb28781e0e3fcc9dd221619974c226f679e31348a7"},
		{"snapshots/cuda-2026-assignment2-memory_snapshot.pickle", ExportDict, "44ca054a12c995bda4368e29aba5b18dcb04fe1aa3a423f128fdfb656228d9ce"},
		{"snapshots/cuda-2026-assignment2-memory_snapshot.pickle", ExportList113, "1fa2015544f255dfd98ceba726277b3b5ef5ebacd2bd857b953e737dd16e0d7d"},
	} {
		s := mustDecode(t, fixture.Path(t, c.file)).Snapshot
		var b bytes.Buffer
		if err := WriteJSON(&b, s, c.schema); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b.Bytes())
		if got := hex.EncodeToString(sum[:]); got != c.sha256 {
			t.Errorf("%s schema %d: sha256 %s, want %s", c.file, c.schema, got, c.sha256)
		}
		// --schema 1.13 has no place for the tables: compact writes the same.
		if c.schema == ExportList113 {
			var cb bytes.Buffer
			WriteCompactJSON(&cb, s, c.schema)
			if !bytes.Equal(cb.Bytes(), b.Bytes()) {
				t.Errorf("%s: compact 1.13 export differs from the inline one", c.file)
			}
		}
	}
}

// TestCompactJSONBadInput: a compact file whose tables or references are
// wrong fails with one line naming the field (safefile.OffsetError.Field),
// never a panic and never a model with a stack silently dropped.
func TestCompactJSONBadInput(t *testing.T) {
	const frames = `"frame_table":[{"filename":"a.py","line":1,"name":"f"},{"filename":"b.py","line":2,"name":"g"}]`
	const stacks = `"stack_table":[[0,1],[1],[]]`
	entry := func(ref string) string {
		return `{"npumon_compact":1,` + frames + `,` + stacks + `,"segments":[],"device_traces":[[{"action":"alloc","addr":1,"size":2,"stream":0,"stack":` + ref + `}]]}`
	}
	for _, c := range []struct{ name, in, field, text string }{
		{"index past the table", entry("3"), "trace entry.stack", "stack 3 is not in stack_table (3 stacks)"},
		{"negative index", entry("-1"), "trace entry.stack", "stack -1 is not in stack_table"},
		{"string index", entry(`"0"`), "trace entry.stack", "want a stack_table index, got str"},
		{"float index", entry("1.5"), "trace entry.stack", "want a stack_table index, got float"},
		{"list for index", entry("[0]"), "trace entry.stack", "want a stack_table index, got list"},
		{"huge index", entry("18446744073709551615"), "trace entry.stack", "want a stack_table index"},
		{"block index", `{"npumon_compact":1,` + frames + `,` + stacks + `,"segments":[{"device":0,"address":0,"total_size":4,"blocks":[{"address":0,"size":4,"state":"active_allocated","stack":9}]}]}`,
			"block.stack", "stack 9 is not in stack_table (3 stacks)"},
		{"frame index past the table", `{"npumon_compact":1,` + frames + `,"stack_table":[[0],[1,2]],"segments":[]}`,
			"snapshot.stack_table", "stack 1, item 1: frame 2 is not in frame_table (2 frames)"},
		{"row of strings", `{"npumon_compact":1,` + frames + `,"stack_table":[["a.py"]],"segments":[]}`,
			"snapshot.stack_table", "stack 0, item 0: want a frame_table index, got str"},
		{"row of objects", `{"npumon_compact":1,` + frames + `,"stack_table":[[{"filename":"a.py"}]],"segments":[]}`,
			"snapshot.stack_table", "stack 0, item 0: want a frame_table index, got an object"},
		{"table of ints", `{"npumon_compact":1,` + frames + `,"stack_table":[0,1],"segments":[]}`,
			"snapshot.stack_table", "stack 0: want a list of frame_table indices, got int"},
		{"table not a list", `{"npumon_compact":1,` + frames + `,"stack_table":{},"segments":[]}`,
			"snapshot.stack_table", "want a list of stacks"},
		{"stack table twice", `{"npumon_compact":1,` + frames + `,` + stacks + `,` + stacks + `,"segments":[]}`,
			"snapshot.stack_table", "given twice"},
		{"frame table of ints", `{"npumon_compact":1,"frame_table":[1,2,3],"segments":[]}`,
			"snapshot.frame_table", `want a list of frame dicts ({"filename", "line", "name"})`},
		{"reference before the table", `{"npumon_compact":1,"segments":[{"device":0,"address":0,"total_size":4,"stack":0,"blocks":[]}],` + frames + `,` + stacks + `}`,
			"segment.stack", "stack 0 is not in stack_table (0 stacks)"},
		{"newer version", `{"npumon_compact":2,"segments":[]}`, "snapshot.npumon_compact", "version 2; this npumon reads compact JSON up to version 1"},
		{"marker not first", `{"segments":[],"npumon_compact":1}`, "snapshot.npumon_compact", "must be the first key"},
		{"marker not an int", `{"npumon_compact":"1","segments":[]}`, "snapshot.npumon_compact", "want the version, an int, got str"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(c.in), int64(len(c.in)), Options{})
			var oe *safefile.OffsetError
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v, want an OffsetError", err)
			}
			if oe.Field != c.field || !strings.Contains(err.Error(), c.text) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %q (field %q), want field %q and %q on one line", err, oe.Field, c.field, c.text)
			}
		})
	}
	// Without the marker the keys are unknown keys, ignored as before.
	in := `{"stack_table":[[5]],"segments":[],"device_traces":[[{"action":"alloc","addr":1,"size":2,"stream":0,"stack":7}]]}`
	if _, err := Decode(strings.NewReader(in), int64(len(in)), Options{}); err != nil {
		t.Errorf("a plain JSON snapshot with a stack_table key: %v", err)
	}
}

// FuzzDecodeCompactJSON: arbitrary changes to compact JSON — indices out
// of range, tables cut short or nested wrong — never panic or hang the
// decoder, and fail with one line; whatever decodes, written as compact
// JSON, reads back exactly as its torch-shape (--pretty) JSON does.
// (Whether an export keeps every odd model, e.g. a device_free on an entry
// that is not an oom, is FuzzDecode's question, not this one's.)
func FuzzDecodeCompactJSON(f *testing.F) {
	for _, p := range []string{"testdata/forward_frames.pickle", "testdata/cuda21.json", "testdata/wide_addr.pickle", "testdata/npu_workspace.pickle"} {
		c, err := DecodeFile(p, Options{})
		if err != nil {
			f.Fatal(err)
		}
		var b bytes.Buffer
		WriteCompactJSON(&b, c.Snapshot, ExportDict)
		if b.Len() < 64<<10 {
			f.Add(b.Bytes())
		}
	}
	f.Add([]byte(`{"npumon_compact":1,"frame_table":[{"filename":"a.py","line":1,"name":"f"}],"stack_table":[[0],[]],"segments":[],"device_traces":[[{"action":"alloc","addr":1,"size":2,"stream":0,"stack":1}]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		var compact, pretty bytes.Buffer
		if err := WriteCompactJSON(&compact, c.Snapshot, ExportDict); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&pretty, c.Snapshot, ExportDict); err != nil {
			t.Fatal(err)
		}
		a, err := Decode(bytes.NewReader(compact.Bytes()), int64(compact.Len()), Options{})
		if err != nil {
			t.Fatalf("re-decode of our own compact export: %v", err)
		}
		b, err := Decode(bytes.NewReader(pretty.Bytes()), int64(pretty.Len()), Options{})
		if err != nil {
			t.Fatalf("re-decode of our own torch-shape export: %v", err)
		}
		if !reflect.DeepEqual(a.Snapshot, b.Snapshot) {
			t.Fatalf("compact and torch-shape JSON of one model read back differently")
		}
	})
}
