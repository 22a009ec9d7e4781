package profiler

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/safefile"
)

// maxSeedRecords is how many records of each generated FRAMEWORK file a
// fuzz seed keeps. The fuzzer minimizes every input that finds new coverage
// by trying to remove each byte and each run of bytes — quadratic in its
// length — so whole 3 KB files as seeds kept each worker minimizing for the
// full minimize time (60 s) instead of fuzzing: 9–14 execs a minute.
const maxSeedRecords = 2

// frameworkSeed is the first maxSeedRecords whole records of b, a FRAMEWORK
// file of kind k.
func frameworkSeed(k FileKind, b []byte) []byte {
	switch k {
	case KindPythonTracerFunc:
		return b[:min(len(b)/pyFuncSize, maxSeedRecords)*pyFuncSize]
	case KindGC:
		return b[:min(len(b)/gcSize, maxSeedRecords)*gcSize]
	}
	i := 0
	for range maxSeedRecords {
		if len(b)-i < envHeaderLen {
			break
		}
		end := i + envHeaderLen + int(binary.LittleEndian.Uint32(b[i+2:]))
		if end > len(b) {
			break
		}
		i = end
	}
	return b[:i]
}

type fuzzSeed struct {
	kind FileKind
	data []byte
}

func frameworkSeeds(tb testing.TB) []fuzzSeed {
	var out []fuzzSeed
	for _, name := range []string{FileOpRange, FileOpMark, FileMemory, FilePythonTracerHash, FileParamTensor, FileGC} {
		b, err := os.ReadFile(filepath.Join(genDir, FrameworkDir, name))
		if err != nil {
			tb.Fatal(err)
		}
		k := KindOf(name)
		out = append(out, fuzzSeed{k, frameworkSeed(k, b)})
	}
	return out
}

func addFrameworkSeeds(f *testing.F) {
	for _, s := range frameworkSeeds(f) {
		f.Add(uint8(s.kind), s.data, uint16(len(s.data)/3))
	}
}

// The seeds stay small enough to minimize in well under a second, and
// each still holds whole records that decode.
func TestFrameworkFuzzSeedsSmall(t *testing.T) {
	for _, s := range frameworkSeeds(t) {
		if len(s.data) > 512 {
			t.Errorf("%v seed: %d bytes; minimizing it would stall the fuzzer", s.kind, len(s.data))
		}
		var recs Records
		d := NewDecoder(s.kind)
		if err := d.Feed(s.data, &recs); err != nil || d.Pending() != 0 || d.Offset() == 0 {
			t.Errorf("%v seed: %v, offset %d, pending %d", s.kind, err, d.Offset(), d.Pending())
		}
	}
}

// FuzzFrameworkDecoder: any bytes decode without panic; feeding them in two
// chunks gives exactly the records of one feed (the tail invariant).
func FuzzFrameworkDecoder(f *testing.F) {
	addFrameworkSeeds(f)
	f.Fuzz(func(t *testing.T, kind uint8, data []byte, cut uint16) {
		k := FileKind(kind%uint8(KindGC)) + 1
		var whole Records
		d1 := NewDecoder(k)
		err1 := d1.Feed(data, &whole)
		var split Records
		d2 := NewDecoder(k)
		c := int(cut) % (len(data) + 1)
		err2 := d2.Feed(data[:c], &split)
		if err2 == nil {
			err2 = d2.Feed(data[c:], &split)
		}
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("whole err %v, split err %v", err1, err2)
		}
		if err1 == nil {
			if !reflect.DeepEqual(whole, split) || d1.Offset() != d2.Offset() || d1.Pending() != d2.Pending() {
				t.Fatalf("split decode differs: %d/%d ops, off %d/%d", len(whole.OpRanges), len(split.OpRanges), d1.Offset(), d2.Offset())
			}
			if d1.Offset()+int64(d1.Pending()) != int64(len(data)) {
				t.Fatalf("bytes unaccounted: offset %d pending %d len %d", d1.Offset(), d1.Pending(), len(data))
			}
		} else if oe := (*safefile.OffsetError)(nil); !strings.HasPrefix(err1.Error(), "offset ") ||
			!errors.As(err1, &oe) || oe.Offset < 0 || oe.Offset > int64(len(data)) {
			t.Fatalf("error %q lacks an offset inside the input (%d bytes)", err1, len(data))
		}
	})
}

// FuzzCSVReaders: every CSV decoder survives any input and errors name the file.
func FuzzCSVReaders(f *testing.F) {
	for _, p := range []string{
		"msinsight_rank0/ASCEND_PROFILER_OUTPUT/memory_record.csv",
		"msinsight_rank1/ASCEND_PROFILER_OUTPUT/memory_record.csv",
		"msinsight_rank1/ASCEND_PROFILER_OUTPUT/operator_memory.csv",
		"msinsight_rank0/ASCEND_PROFILER_OUTPUT/operator_details.csv",
		"msinsight_rank0/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
		"msinsight_rank0/ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
		"msinsight_rank0/ASCEND_PROFILER_OUTPUT/npu_module_mem.csv",
	} {
		b, err := os.ReadFile(filepath.Join(fixtures(f), p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "x.csv"
		check := func(err error) {
			if err != nil && (!strings.HasPrefix(err.Error(), name+": ") || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("error %q does not name the file on one line", err)
			}
		}
		_, err := DecodeMemoryRecordCSV(bytes.NewReader(data), name)
		check(err)
		_, err = DecodeOperatorMemoryCSV(bytes.NewReader(data), name)
		check(err)
		_, err = DecodeOperatorDetailsCSV(bytes.NewReader(data), name)
		check(err)
		_, err = DecodeKernelDetailsCSV(bytes.NewReader(data), name)
		check(err)
		_, err = DecodeStepTraceTimeCSV(bytes.NewReader(data), name)
		check(err)
		_, err = DecodeNPUModuleMemCSV(bytes.NewReader(data), name)
		check(err)
	})
}

// FuzzTraceView: the streaming reader survives any input; errors carry an offset.
func FuzzTraceView(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(fixtures(f), "mstt", "trace_view.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:4000])
	f.Add([]byte(`{"traceEvents":[{"ph":"X","name":"a\u00e9\ud83d\ude00","ts":1.5,"dur":2,"args":{"Sequence number":3}}]}`))
	f.Add([]byte(`[{"ph":"M","name":"process_name","pid":"x","args":{"name":"Python"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		err := ReadTraceView(bytes.NewReader(data), "t.json", func(ev *TraceEvent) error { n++; return nil })
		if err != nil && (!strings.HasPrefix(err.Error(), "t.json: offset ") || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("error %q lacks file and offset", err)
		}
		var oe *safefile.OffsetError
		if err != nil && (!errors.As(err, &oe) || oe.File != "t.json" || oe.Offset < 0 || oe.Offset > int64(len(data))) {
			t.Fatalf("error %v: OffsetError %+v (input of %d bytes)", err, oe, len(data))
		}
	})
}
