package profiler

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// opRangeCorpus is ~8 MiB of op_range records shaped like a record_shapes run.
func opRangeCorpus() []byte {
	var b []byte
	names := []string{"aten::add", "aten::mul", "aten::matmul", "aten::empty_strided", "aten::copy_", "ProfilerStep#1"}
	for i := 0; len(b) < 8<<20; i++ {
		r := OpRangeRecord{StartNS: int64(i) * 1000, EndNS: int64(i)*1000 + 700, Seq: int64(i), PID: 42,
			StartTID: 42, EndTID: 42, Name: names[i%len(names)], InputDtypes: "float;float", InputShapes: "128,1024;1024,1024"}
		b = AppendOpRange(b, &r)
	}
	return b
}

func memoryCorpus() []byte {
	var b []byte
	for i := 0; len(b) < 8<<20; i++ {
		r := MemoryUsageRecord{Ptr: int64(i) << 12, TimeNS: int64(i), AllocSize: 4096, TotalAllocated: int64(i),
			TotalReserved: 1 << 30, TotalActive: int64(i), StreamPtr: 2, DeviceType: DeviceTypeNPU}
		b = AppendMemoryUsage(b, &r)
	}
	return b
}

func benchDecode(b *testing.B, k FileKind, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var recs Records
	for b.Loop() {
		recs.OpRanges, recs.Memory = recs.OpRanges[:0], recs.Memory[:0]
		d := NewDecoder(k)
		// feed in 1 MiB reads, as ReadFrameworkFile does
		for off := 0; off < len(data); off += 1 << 20 {
			if err := d.Feed(data[off:min(off+1<<20, len(data))], &recs); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkDecodeOpRange(b *testing.B) { benchDecode(b, KindOpRange, opRangeCorpus()) }
func BenchmarkDecodeMemory(b *testing.B)  { benchDecode(b, KindMemory, memoryCorpus()) }

// BenchmarkDecodeOpRangeBinaryRead is the baseline: the standard library's
// encoding/binary.Read of the fixed block plus the name field.
func BenchmarkDecodeOpRangeBinaryRead(b *testing.B) {
	data := opRangeCorpus()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	type fixed struct {
		Start, End, Seq       int64
		PID, STID, ETID, FTID uint64
		Scope, Async          uint8
	}
	var out []OpRangeRecord
	for b.Loop() {
		out = out[:0]
		r := bytes.NewReader(data)
		for r.Len() > 0 {
			var hdr struct {
				T uint16
				L uint32
			}
			binary.Read(r, binary.LittleEndian, &hdr)
			var f fixed
			binary.Read(r, binary.LittleEndian, &f)
			rest := make([]byte, hdr.L-58)
			io.ReadFull(r, rest)
			out = append(out, OpRangeRecord{StartNS: f.Start, EndNS: f.End, Seq: f.Seq, Name: string(rest[6 : 6+binary.LittleEndian.Uint32(rest[2:])])})
		}
	}
}

var traceOnce sync.Once
var tracePath string

// bigTrace writes a ~100 MB trace_view.json once per run into a temp dir.
func bigTrace(b *testing.B) string {
	traceOnce.Do(func() {
		dir, err := os.MkdirTemp("", "npumon-bench-trace")
		if err != nil {
			b.Fatal(err)
		}
		d := &Data{}
		names := []string{"aten::add", "aten::mul", "aten::matmul", "aten::empty_strided", "aten::copy_"}
		for i := 0; i < 460000; i++ {
			s := int64(1764000000000000000) + int64(i)*1500
			d.Ops = append(d.Ops, Op{Name: names[i%5], StartNS: s, EndNS: s + 1234, DurNS: 1234, PID: 4242, TID: 4242 + uint64(i%3),
				Seq: int64(i), InputShapes: "128,1024;1024,1024", InputDtypes: "float;float",
				Stack: "train.py(20): forward;torch/nn/modules/module.py(1501): _call_impl"})
		}
		tracePath = filepath.Join(dir, "trace_view.json")
		f, err := os.Create(tracePath)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteTraceView(f, d); err != nil {
			b.Fatal(err)
		}
		f.Close()
	})
	return tracePath
}

// BenchmarkReadTraceView100MB reads the ops of a ~100 MB trace (target ≤ 2 s/op).
func BenchmarkReadTraceView100MB(b *testing.B) {
	p := bigTrace(b)
	st, _ := os.Stat(p)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		d := &Data{}
		if err := readTraceViewOps(p, d); err != nil {
			b.Fatal(err)
		}
		if len(d.Ops) != 460000 {
			b.Fatalf("%d ops", len(d.Ops))
		}
	}
}

// BenchmarkReadTraceView100MBEncodingJSON is the baseline: encoding/json's
// streaming Decoder into a struct per event.
func BenchmarkReadTraceView100MBEncodingJSON(b *testing.B) {
	p := bigTrace(b)
	st, _ := os.Stat(p)
	b.SetBytes(st.Size())
	b.ReportAllocs()
	type ev struct {
		Ph, Name, Cat string
		PID, TID      int64
		Ts            json.Number
		Dur           float64
		Args          map[string]any
	}
	for b.Loop() {
		f, _ := os.Open(p)
		dec := json.NewDecoder(f)
		dec.Token()
		n := 0
		for dec.More() {
			var e ev
			if err := dec.Decode(&e); err != nil {
				b.Fatal(err)
			}
			if e.Cat == "cpu_op" {
				n++
			}
		}
		f.Close()
		if n != 460000 {
			b.Fatalf("%d ops", n)
		}
	}
}

// BenchmarkRecorderOp is the cost of recording one op range while the
// dumper drains and writes in the background (target ≤ 300 ns).
func BenchmarkRecorderOp(b *testing.B) {
	r, err := New(Config{Dir: b.TempDir(), RingSize: 1 << 16, NoAnalyse: true})
	if err != nil {
		b.Fatal(err)
	}
	r.Start()
	op := OpRangeRecord{Seq: 1, PID: 1, StartTID: 1, EndTID: 1, Name: "aten::add", InputShapes: "2,3;2,3", InputDtypes: "float;float"}
	b.ReportAllocs()
	for b.Loop() {
		op.StartNS = r.Now()
		op.EndNS = op.StartNS + 100
		r.RecordOp(&op)
	}
	b.StopTimer()
	r.Stop()
	b.ReportMetric(float64(r.Dropped()), "dropped")
}

// BenchmarkRecorderOpChannelBaseline is the baseline: the same record sent
// on a buffered channel to a consumer goroutine.
func BenchmarkRecorderOpChannelBaseline(b *testing.B) {
	ch := make(chan OpRangeRecord, 1<<16)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	op := OpRangeRecord{Seq: 1, PID: 1, StartTID: 1, EndTID: 1, Name: "aten::add", InputShapes: "2,3;2,3", InputDtypes: "float;float"}
	b.ReportAllocs()
	for b.Loop() {
		op.StartNS = SystemClock.Raw()
		op.EndNS = op.StartNS + 100
		ch <- op
	}
	close(ch)
	<-done
}
