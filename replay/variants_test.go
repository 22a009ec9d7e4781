package replay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestProtocolsAndJSONAgree: the same snapshot pickled by Python at
// protocols 2, 3, 4, 5, in TorchScript's protocol-2 opcode style, and dumped
// as JSON decodes to one model.
func TestProtocolsAndJSONAgree(t *testing.T) {
	ref := mustDecode(t, "testdata/cuda21_p4.pickle")
	for _, f := range []string{"cuda21_p2.pickle", "cuda21_p3.pickle", "cuda21_p5.pickle", "cuda21_torchscript.pickle", "cuda21.json"} {
		c := mustDecode(t, filepath.Join("testdata", f))
		if !reflect.DeepEqual(ref.Snapshot, c.Snapshot) {
			t.Errorf("%s decodes differently from cuda21_p4.pickle", f)
		}
		if c.Schema != SchemaTorch21 {
			t.Errorf("%s: schema %s", f, c.Schema)
		}
	}
	if ref.Format != FormatPickle || mustDecode(t, "testdata/cuda21.json").Format != FormatJSON {
		t.Error("format detection")
	}
}

// TestCUDA21Content checks decoded fields against what gen_snapshots.py wrote.
func TestCUDA21Content(t *testing.T) {
	s := mustDecode(t, "testdata/cuda21_p4.pickle").Snapshot
	if len(s.DeviceTraces) != 2 || len(s.DeviceTraces[0]) != 16 || len(s.DeviceTraces[1]) != 0 {
		t.Fatalf("traces: %d devices", len(s.DeviceTraces))
	}
	tr := s.DeviceTraces[0]
	if tr[0].Action != snapshot.ActionSegmentAlloc || tr[0].Addr != 0x7F0000000000 || tr[0].Size != 20<<20 || tr[0].TimeUS != 1_700_000_000_000_007 {
		t.Errorf("entry 0 = %+v", tr[0])
	}
	if tr[3].Action != snapshot.ActionUserDefined || s.Stack(tr[3].Frames)[0].Name != "START" {
		t.Errorf("user_defined entry = %+v", tr[3])
	}
	if tr[8].Action != snapshot.ActionAnnotate || s.Text(tr[8].UserMetadata) != "kv-cache" || s.Text(tr[7].UserMetadata) != "tagged" || s.Text(tr[7].CompileContext) != "N/A" {
		t.Errorf("annotate / metadata = %+v / %+v", tr[8], tr[7])
	}
	if tr[9].Action.Known() || s.ActionName(tr[9].Action) != "mystery_action" {
		t.Errorf("unknown action not kept: %v", tr[9].Action)
	}
	if tr[14].Action != snapshot.ActionOOM || tr[14].DeviceFree != 1234 || tr[14].Size != 64<<20 || tr[14].Addr != 0 {
		t.Errorf("oom = %+v", tr[14])
	}
	// Shared frame lists are interned once: STACK_A and STACK_B, nothing else
	// but the START marker.
	if len(s.Stacks) != 4 {
		t.Errorf("%d stacks, want 4 (empty, A, B, START)", len(s.Stacks))
	}
	if tr[1].Frames != tr[0].Frames || s.Segments[0].Blocks[0].Frames != tr[0].Frames {
		t.Error("the same frame list got different stack ids")
	}
	seg := s.Segments[2]
	if seg.Device != 1 || !seg.IsExpandable || !seg.HasPoolID || seg.PoolID != (snapshot.PoolID{1, 3}) || seg.IsLarge {
		t.Errorf("segment 2 = %+v", seg)
	}
	st := s.Settings
	if st == nil || st.ConfKey != "PYTORCH_CUDA_ALLOC_CONF" || st.Conf != "expandable_segments:True" || st.GarbageCollectionThreshold != 0.6 ||
		!st.ExpandableSegments || st.MaxSplitSize != -1 || st.RoundupPower2Divisions[8] != 4 || len(st.RoundupPower2Divisions) != 16 {
		t.Errorf("settings = %+v", st)
	}
	if len(s.ExternalAnnotations) != 2 || s.ExternalAnnotations[1] != (snapshot.Annotation{Name: "ProfilerStep#1", Stage: "END", Device: 0, TimeUS: 1_700_000_000_000_090}) {
		t.Errorf("annotations = %+v", s.ExternalAnnotations)
	}
}

func TestNPUAndLegacyShapes(t *testing.T) {
	c := mustDecode(t, "testdata/npu_workspace.pickle")
	s := c.Snapshot
	if c.Schema != SchemaTorchNPU || s.HasTimestamps() {
		t.Errorf("npu: schema %s, timestamps %v", c.Schema, s.HasTimestamps())
	}
	e := s.DeviceTraces[0][0]
	if e.Action != snapshot.ActionWorkspaceSnapshot || e.Stream != 0xAAAAE3C01230 || !e.HasPoolID {
		t.Errorf("npu entry 0 = %+v", e)
	}

	w := mustDecode(t, "testdata/wide_addr.pickle").Snapshot
	if a := w.Segments[0].Address; a != 1<<63+0x1000 {
		t.Errorf("wide address = %#x, want 2^63+0x1000", a)
	}
	if a := w.DeviceTraces[0][0].Addr; a != 1<<63+0x1000 {
		t.Errorf("wide trace addr = %#x", a)
	}

	for _, f := range []string{"torch113_list.pickle", "torch113_list.json"} {
		c := mustDecode(t, filepath.Join("testdata", f))
		if c.Schema != SchemaTorch113 || len(c.Snapshot.Segments) != 2 || c.Snapshot.DeviceTraces != nil {
			t.Fatalf("%s: schema %s, %d segments", f, c.Schema, len(c.Snapshot.Segments))
		}
		b := c.Snapshot.Segments[0].Blocks
		// No "address" in 1.13: running sum from the segment base.
		if b[1].Address != 0x7F5500000000+8<<20 || b[2].Address != 0x7F5500000000+12<<20 {
			t.Errorf("%s: block addresses %#x %#x", f, b[1].Address, b[2].Address)
		}
		// No requested_size: the history's real_size.
		if b[0].RequestedSize != 8<<20-10 || len(b[0].History) != 1 || c.Snapshot.Stack(b[0].History[0].Frames)[0].Name != "matmul" {
			t.Errorf("%s: block 0 = %+v", f, b[0])
		}
	}
	if c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2.0-flexgen-1.3b_snapshot.pickle")); c.Schema != SchemaTorch20 {
		t.Errorf("flexgen schema %s", c.Schema)
	}
}

// TestBadInput: every hostile or broken file gets one error line naming the
// file and where it went wrong — no panic, no hang.
func TestBadInput(t *testing.T) {
	cases := map[string]string{
		"bad_global.pickle":       "offset 59: not a memory snapshot: the pickle references Python class collections.OrderedDict",
		"bad_reduce.pickle":       "offset 11: not a memory snapshot: the pickle builds Python objects",
		"bad_huge_string.pickle":  "offset 2: string of 1099511627776 bytes exceeds",
		"bad_huge_frame.pickle":   `top-level dict has no "segments"`,
		"bad_odd_setitems.pickle": "offset 14: dict items come in pairs",
		"bad_memo_missing.pickle": "offset 14: memo index 7 was never stored",
		"bad_too_wide.pickle":     "offset 27: integer of 9 bytes does not fit 64 bits",
		"bad_protocol1.pickle":    "offset 0: a pickle of protocol 0 or 1",
		"bad_deep.pickle":         "more than 65536 nested MARKs",
		"bad_not_snapshot.pickle": `not a memory snapshot: top-level dict has no "segments"`,
		"bad_wrong_type.pickle":   `offset 82: segment key "total_size": want int, got str`,
		"bad_empty.pickle":        "not a memory snapshot: the file is empty",
		"bad_truncated.pickle":    "offset 720: unexpected end of file (truncated?)",
	}
	for f, want := range cases {
		path := filepath.Join("testdata", f)
		_, err := DecodeFile(path, Options{})
		if err == nil {
			t.Errorf("%s: decoded without error", f)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line %q…%q", f, msg, path+": ", want)
		}
	}
	js, _ := os.ReadFile("testdata/cuda21.json")
	for _, cut := range []int{1, len(js) / 3, len(js) - 3} {
		_, err := Decode(bytes.NewReader(js[:cut]), int64(cut), Options{})
		if err == nil || !strings.Contains(err.Error(), "offset ") {
			t.Errorf("JSON cut at %d: %v", cut, err)
		}
	}
	_, err := Decode(strings.NewReader(`{"segments": [{"device": 0, "total_size": "x"}]}`), -1, Options{})
	if err == nil || !strings.Contains(err.Error(), `segment key "total_size": want int, got str`) {
		t.Errorf("JSON wrong type: %v", err)
	}
	_, err = DecodeFile("testdata/bad_global.pickle", Options{})
	if !errors.Is(err, ErrNotSnapshot) {
		t.Errorf("class refusal does not wrap ErrNotSnapshot: %v", err)
	}
	if _, err := DecodeFile("testdata/no-such-file.pickle", Options{}); err == nil || !strings.Contains(err.Error(), "no-such-file.pickle") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDeviceOrdinalRange: a segment's or annotation's device outside
// 0…maxDevices-1 is refused with the dict and key named.
func TestDeviceOrdinalRange(t *testing.T) {
	for in, want := range map[string]string{
		`{"segments": [{"device": -1, "total_size": 0}]}`:                                                           `segment key "device": -1 is not a device ordinal`,
		`{"segments": [], "external_annotations": [{"name": "x", "stage": "START", "device": 4096, "time_us": 1}]}`: `annotation key "device": 4096 is not a device ordinal`,
		`{"segments": [{"device": "0", "total_size": 0}]}`:                                                          `segment key "device": want int, got str`,
	} {
		_, err := Decode(strings.NewReader(in), -1, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	c, err := Decode(strings.NewReader(`{"segments": [{"device": 4095, "total_size": 0}]}`), -1, Options{})
	if err != nil || c.Snapshot.Segments[0].Device != 4095 {
		t.Errorf("device 4095: %v", err)
	}
}

// TestTruncatedEverywhere cuts a real fixture at many offsets: each prefix
// must fail cleanly (never panic, never succeed silently with garbage).
func TestTruncatedEverywhere(t *testing.T) {
	data, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data)-1; n += len(data)/41 + 7 {
		if _, err := Decode(bytes.NewReader(data[:n]), int64(n), Options{}); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", n)
		}
	}
}

// TestTrailingBytesIgnored: the viewer's HTML export pads pickles with NULs.
func TestTrailingBytesIgnored(t *testing.T) {
	data, _ := os.ReadFile("testdata/npu_workspace.pickle")
	padded := append(append([]byte{}, data...), 0, 0, 0xff)
	c, err := Decode(bytes.NewReader(padded), int64(len(padded)), Options{})
	if err != nil || len(c.Snapshot.Segments) != 2 {
		t.Fatalf("padded pickle: %v", err)
	}
}

// TestProgress: the loading bar gets monotone progress ending at the size.
func TestProgress(t *testing.T) {
	path := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	var last, total int64
	calls := 0
	_, err := DecodeFile(path, Options{Progress: func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back: %d after %d", done, last)
		}
		last, total = done, tot
		calls++
	}})
	fi, _ := os.Stat(path)
	if err != nil || calls == 0 || total != fi.Size() || last != fi.Size() {
		t.Errorf("progress: %d calls, last %d/%d, size %d, err %v", calls, last, total, fi.Size(), err)
	}
}

// TestExport113ReadsBack: the 1.13 list export keeps the final-state figures.
func TestExport113ReadsBack(t *testing.T) {
	for _, f := range fixtures(t) {
		c := mustDecode(t, f)
		var b bytes.Buffer
		if err := WritePickle(&b, c.Snapshot, ExportList113); err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(&b, int64(b.Len()), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c2.Schema != SchemaTorch113 {
			t.Errorf("schema %s", c2.Schema)
		}
		s1, _ := ComputeStats(c, StatsOptions{})
		s2, _ := ComputeStats(c2, StatsOptions{})
		for i := range s1.Devices {
			a, b := s1.Devices[i], s2.Devices[i]
			if a.Segments != b.Segments || a.Blocks != b.Blocks || a.ReservedBytes != b.ReservedBytes || a.AllocatedBytes != b.AllocatedBytes ||
				a.ActiveBytes != b.ActiveBytes || a.RequestedBytes != b.RequestedBytes || a.InactiveBytes != b.InactiveBytes {
				t.Errorf("%s: 1.13 export changes final figures:\n%+v\n%+v", filepath.Base(f), a, b)
			}
		}
	}
}

// TestMemoryBudget: input built to multiply memory (a million memoized empty
// dicts, each a few bytes) is refused once it needs far more than the file
// size, instead of growing without bound.
func TestMemoryBudget(t *testing.T) {
	data := []byte{0x80, 4, ']'}
	for i := 0; i < 1_000_000; i++ {
		data = append(data, '}', 0x94, 'a') // EMPTY_DICT MEMOIZE APPEND
	}
	data = append(data, '.')
	for _, size := range []int64{int64(len(data)), -1} { // known and unknown size
		_, err := Decode(bytes.NewReader(data), size, Options{})
		if err == nil || !strings.Contains(err.Error(), "decoding would need more than") {
			t.Fatalf("size %d: err = %v", size, err)
		}
	}
}
