package replay

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/poll"
)

// withParDecode sets the parallel decode's chunks for the rest of the
// test: chunk bytes apart (each from the first batch boundary past its
// step), and with sync the decoder waits for a helper to claim each
// helper chunk, so every chunk a helper can take is taken.
func withParDecode(t testing.TB, chunk int64, sync bool) {
	t.Helper()
	oldC, oldS := parChunkBytes, parSync
	parChunkBytes, parSync = chunk, sync
	t.Cleanup(func() { parChunkBytes, parSync = oldC, oldS })
}

// longTrace is a fixture's trace repeated to n entries, as a pickle: many
// batches of a trace list, with every real entry shape.
func longTrace(t testing.TB, n int) []byte {
	t.Helper()
	c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	s := *c.Snapshot
	s.Forward = nil
	var tr []snapshot.TraceEntry
	for len(tr) < n {
		tr = append(tr, s.DeviceTraces[0]...)
	}
	s.DeviceTraces = [][]snapshot.TraceEntry{tr[:n]}
	var buf bytes.Buffer
	if err := WritePickle(&buf, &s, ExportDict); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// comparePar checks that the parallel decode gives path's stats byte for
// byte as the sequential one, errors included.
func comparePar(t *testing.T, path, what string) {
	t.Helper()
	want := statsOutcome(t, path, streamSeq)
	if got := statsOutcome(t, path, streamParDecode); got != want {
		t.Errorf("%s: parallel decode differs (chunks of %d bytes, sync %v)\n got: %s\nwant: %s",
			what, parChunkBytes, parSync, got, want)
	}
}

// On every fixture, the real ones and replay's own (damaged ones
// included), the parallel decode gives `stats --json` byte for byte, or
// the same error line; and on a long trace made of a fixture's entries,
// the helper's runs are taken over.
func TestParDecodeSameFixtures(t *testing.T) {
	for _, cfg := range []struct {
		chunk int64
		sync  bool
	}{{1, true}, {4 << 10, true}, {1, false}, {64 << 10, true}} {
		withParDecode(t, cfg.chunk, cfg.sync)
		for _, path := range foldFixtures(t) {
			comparePar(t, path, path)
		}
	}
	// Chunks of about a batch: most are taken over.
	withParDecode(t, 1, true)
	out := filepath.Join(t.TempDir(), "long.pickle")
	if err := os.WriteFile(out, longTrace(t, 60000), 0o644); err != nil {
		t.Fatal(err)
	}
	before := parMerged.Load()
	comparePar(t, out, "long trace")
	if n := parMerged.Load() - before; n < 10 {
		t.Errorf("long trace: %d of 59 chunks taken over by the decoder", n)
	}
}

// Random traces (a fixture's entries redrawn over devices, new sizes),
// whole and cut at random offsets, at random run sizes: the parallel
// decode agrees with the sequential one, errors (text and offset)
// included, and leaves no goroutine behind.
func TestParDecodeRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 7))
	dir := t.TempDir()
	out := filepath.Join(dir, "random.pickle")
	before := runtime.NumGoroutine()
	n := 0
	for _, path := range foldFixtures(t) {
		c, err := DecodeFile(path, Options{})
		if err != nil || len(c.Snapshot.DeviceTraces) == 0 {
			continue
		}
		for round := range 2 {
			s := mutateTraces(r, c.Snapshot)
			var buf bytes.Buffer
			if err := WritePickle(&buf, s, ExportDict); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for cut := range 4 {
				data := buf.Bytes()
				if cut > 0 {
					data = data[:r.IntN(len(data))]
				}
				if err := os.WriteFile(out, data, 0o644); err != nil {
					t.Fatal(err)
				}
				withParDecode(t, 1+r.Int64N(int64(len(data))/4+1), r.IntN(2) == 0)
				comparePar(t, out, fmt.Sprintf("from %s round %d cut %d", filepath.Base(path), round, cut))
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d random snapshots", n)
	}
	poll.Until(t, fmt.Sprintf("the goroutines of before the decodes (%d)", before), func() bool {
		return runtime.NumGoroutine() <= before
	})
}

// A long trace in chunks of 256 KiB, no waiting: the chunks are claimed
// and taken as in a big file, and the figures are the same. Cut at random
// offsets, the errors are.
func TestParDecodeLong(t *testing.T) {
	withParDecode(t, 256<<10, false)
	data := longTrace(t, 200000)
	out := filepath.Join(t.TempDir(), "long.pickle")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	comparePar(t, out, "long trace")
	r := rand.New(rand.NewPCG(29, 8))
	for range 3 {
		if err := os.WriteFile(out, data[:len(data)/2+r.IntN(len(data)/2)], 0o644); err != nil {
			t.Fatal(err)
		}
		comparePar(t, out, "long trace, cut")
	}
}

// A decoder that will not wait for the helpers (it decodes every chunk
// still in progress itself and stops them) gives the same figures.
func TestParDecodeNoWait(t *testing.T) {
	withParDecode(t, 64<<10, false)
	old := parAwait
	parAwait = 1e-9
	defer func() { parAwait = old }()
	out := filepath.Join(t.TempDir(), "long.pickle")
	if err := os.WriteFile(out, longTrace(t, 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		comparePar(t, out, "long trace, no waiting")
	}
}

// The parallel decode starts only for the stats fold with more than one P,
// a file big enough, read at offsets; never for a context, a sink, a
// progress callback.
func TestParDecodeWhen(t *testing.T) {
	f, err := os.Open(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	oldFree := parCoreFree
	defer func() { parCoreFree = oldFree }()
	parCoreFree = func() bool { return true }
	if parInputOf(f, 1<<30, streamAuto) == nil && runtime.GOMAXPROCS(0) > 1 {
		t.Error("a big file with more than one P: no parallel decode")
	}
	parCoreFree = func() bool { return false }
	if parInputOf(f, 1<<30, streamAuto) != nil {
		t.Error("no core free: parallel decode")
	}
	if parInputOf(f, 1<<30, streamParDecode) == nil {
		t.Error("no core free, parallel decode asked for: none")
	}
	coreFree() // reads /proc/loadavg without failing
	parCoreFree = func() bool { return true }
	if parInputOf(f, parMinSize-1, streamAuto) != nil {
		t.Error("a small file: parallel decode")
	}
	if parInputOf(f, 1<<30, streamSeq) != nil || parInputOf(f, 1<<30, streamPar) != nil || parInputOf(f, 1<<30, noStream) != nil {
		t.Error("a mode that does not ask for it: parallel decode")
	}
	if parInputOf(bytes.NewBuffer(nil), 1<<30, streamParDecode) != nil {
		t.Error("an input that cannot be read at offsets: parallel decode")
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if parInputOf(f, 1<<30, streamAuto) != nil {
		t.Error("GOMAXPROCS=1: parallel decode")
	}
}

// FuzzParDecode: on arbitrary bytes the parallel decode (chunks of about
// a batch, the decoder waiting for each) gives what the sequential one
// gives, errors included.
func FuzzParDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.pickle")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Add(longTrace(f, 3000))
	f.Fuzz(func(t *testing.T, data []byte) {
		withParDecode(t, 1, true)
		out := filepath.Join(t.TempDir(), "f.pickle")
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
		comparePar(t, out, "fuzz input")
	})
}

// Python's pickles of the benchmark generator's shapes (every entry dict
// and frames list memoized; a free shares its request's list, an entry a
// list of the segments; an oom entry halfway), in chunks of about a
// batch, with one helper and with three: the chunks are taken over, their
// placeholders resolved, and the figures are the sequential decode's;
// cut at random offsets, so are the errors.
func TestParDecodePythonShapes(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	r := rand.New(rand.NewPCG(29, 9))
	shapes := [][]string{{"distinct"}, {"shared"}, {"distinct", "--oom"}}
	procsList := []int{2, 4}
	if testing.Short() { // the race pass runs them all
		shapes, procsList = shapes[:1], procsList[:1]
	}
	for _, shape := range shapes {
		path := filepath.Join(t.TempDir(), shape[0]+".pickle")
		args := append([]string{"testdata/gen_bench.py", path, "30000"}, shape...)
		if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
			t.Fatalf("gen_bench.py: %v\n%s", err, out)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, procs := range procsList {
			old := runtime.GOMAXPROCS(procs)
			for _, sync := range []bool{true, false} {
				withParDecode(t, 64<<10, sync)
				before := parMerged.Load()
				comparePar(t, path, fmt.Sprintf("%v, GOMAXPROCS %d, sync %v", shape, procs, sync))
				if n := parMerged.Load() - before; sync && n < 10 {
					t.Errorf("%v, GOMAXPROCS %d: %d chunks taken over", shape, procs, n)
				}
			}
			cut := filepath.Join(t.TempDir(), "cut.pickle")
			if err := os.WriteFile(cut, data[:len(data)/3+r.IntN(len(data)*2/3)], 0o644); err != nil {
				t.Fatal(err)
			}
			comparePar(t, cut, fmt.Sprintf("%v cut, GOMAXPROCS %d", shape, procs))
			runtime.GOMAXPROCS(old)
		}
	}
}

// pk builds a pickle's raw opcodes (protocol 4, dicts memoized as Python
// memoizes them).
type pk struct {
	bytes.Buffer
	ascii bool               // strings as BINUNICODE: opcodes that are valid UTF-8
	extra func(p *pk, k int) // writes more of entry k's keys and values, if set
}

func (p *pk) str(s string) {
	if len(s) < 256 && !p.ascii {
		p.WriteByte(opShortBinUni)
		p.WriteByte(byte(len(s)))
	} else {
		p.WriteByte(opBinUnicode)
		p.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	}
	p.WriteString(s)
}

func (p *pk) int(v uint32) {
	p.WriteByte(opBinInt)
	p.Write(binary.LittleEndian.AppendUint32(nil, v))
}

// entry writes one trace entry dict; meta is its user_metadata.
func (p *pk) entry(k int, meta string) {
	p.Write([]byte{opEmptyDict, opMemoize, opMark})
	p.str("action")
	p.str([]string{"alloc", "free_requested", "free_completed"}[k%3])
	p.str("addr")
	p.int(uint32(0x10000 + k/3*512))
	p.str("size")
	p.int(512)
	p.str("stream")
	p.int(0)
	p.str("time_us")
	p.int(uint32(1000 + k))
	p.str("user_metadata")
	p.str(meta)
	if p.extra != nil {
		p.extra(p, k)
	}
	p.str("frames")
	p.Write([]byte{opEmptyList, opMemoize, opSetItems})
}

// traceWithMeta is a snapshot of one trace of n entries, batches of 10,
// entry k's user_metadata meta(k).
func traceWithMeta(n int, meta func(k int) string) []byte {
	return traceOf(&pk{}, n, meta)
}

func traceOf(p *pk, n int, meta func(k int) string) []byte {
	p.Write([]byte{opProto, 4, opEmptyDict, opMemoize, opMark})
	p.str("segments")
	p.Write([]byte{opEmptyList, opMemoize})
	p.str("device_traces")
	p.Write([]byte{opEmptyList, opMemoize, opEmptyList, opMemoize})
	for k := 0; k < n; k += 10 {
		p.WriteByte(opMark)
		for j := k; j < min(n, k+10); j++ {
			p.entry(j, meta(j))
		}
		p.WriteByte(opAppends)
	}
	p.Write([]byte{opAppend, opSetItems, opStop})
	return p.Bytes()
}

// A string that holds what looks like a batch of entries (a false batch
// boundary a helper decodes without fault): the decoder goes by the
// chunk, and its result is let go of, not held to the decode's end.
func TestParDecodeFalseSyncDropped(t *testing.T) {
	var fake pk
	// Valid UTF-8 throughout: no MEMOIZE (a boundary may lack it), strings
	// as BINUNICODE, ints of ASCII bytes.
	fake.ascii = true
	fake.Write([]byte{opAppends, opMark, opEmptyDict, opMark})
	fake.str("action")
	fake.str("alloc")
	fake.str("addr")
	fake.int(0x41424344)
	fake.str("size")
	fake.int(0x1000)
	fake.str("frames")
	fake.Write([]byte{opEmptyList, opSetItems, opAppends, 'z'})
	data := traceWithMeta(400, func(k int) string {
		if k%50 == 25 {
			return fake.String()
		}
		return ""
	})
	out := filepath.Join(t.TempDir(), "fake.pickle")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var held, seen int
	parClosed = func(p *parDecode) {
		seen++
		for _, c := range p.chunks {
			if c.res != nil {
				held++
			}
		}
	}
	defer func() { parClosed = nil }()
	old := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(old)
	withParDecode(t, 1, true)
	comparePar(t, out, "false batch boundaries in strings")
	if seen == 0 {
		t.Fatal("no parallel decode")
	}
	if held != 0 {
		t.Errorf("%d results of chunks the decoder went by held to the decode's end", held)
	}
}

// A helper begins a chunk with only its list on the stack and no MARK,
// the decoder with what encloses the list too: an entry nested up to the
// helper's limits but past the decoder's is the decoder's error, not
// figures.
func TestParDecodeDepthLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a million-value stack, decoded many times; the race pass (make test-unit) runs it")
	}
	nest := func(marks, values int) func(p *pk, k int) {
		return func(p *pk, k int) {
			if k != 255 {
				return
			}
			p.str("nested")
			// A batch's MARK and the entry's are below these.
			p.Write(bytes.Repeat([]byte{opMark}, marks))
			p.Write(bytes.Repeat([]byte{opTuple}, marks))
			if values > 0 {
				p.WriteByte(opMark)
				p.Write(bytes.Repeat([]byte{opNone}, values))
				p.WriteByte(opTuple)
			}
		}
	}
	old := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(old)
	withParDecode(t, 1, true)
	for _, c := range []struct {
		what          string
		marks, values int
	}{
		{"MARKs", maxMarkDepth - 2, 0},
		// The helper's stack: its list, the batch's entries before, the
		// entry's dict, MARK, keys and values before, the key, the MARK.
		{"values", 0, maxStackDepth - 1 - 5 - 1 - 2*8 - 1},
	} {
		data := traceOf(&pk{extra: nest(c.marks, c.values)}, 400, func(int) string { return "" })
		out := filepath.Join(t.TempDir(), "deep.pickle")
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
		comparePar(t, out, c.what+" nested to the helper's limit")
	}
}
