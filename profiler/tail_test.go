package profiler

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestTailOddChunks: a writer appends the Python-produced FRAMEWORK files in
// odd-sized chunks (cutting records anywhere) while a Tailer follows; every
// record arrives exactly once, a cut trailing record is held back without
// error, a second cycle directory is noticed, and profiler_info / analyse.done
// are reported when they appear.
func TestTailOddChunks(t *testing.T) {
	parent := t.TempDir()
	name := filepath.Base(genDir)
	dir := filepath.Join(parent, name)
	fw := filepath.Join(dir, FrameworkDir)
	if err := os.MkdirAll(fw, 0o750); err != nil {
		t.Fatal(err)
	}
	files := []string{FileOpRange, FileOpMark, FileMemory}
	src := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(genDir, FrameworkDir, f))
		if err != nil {
			t.Fatal(err)
		}
		src[f] = b
	}
	tl, err := NewTailer(dir)
	if err != nil {
		t.Fatal(err)
	}

	var got TailBatch
	collect := func() {
		b, err := tl.Poll()
		if err != nil {
			t.Fatal(err)
		}
		got.Ops = append(got.Ops, b.Ops...)
		got.Steps = append(got.Steps, b.Steps...)
		got.Memory = append(got.Memory, b.Memory...)
		got.Queue = append(got.Queue, b.Queue...)
		got.NewDirs = append(got.NewDirs, b.NewDirs...)
		got.Finalized = append(got.Finalized, b.Finalized...)
		got.Analysed = append(got.Analysed, b.Analysed...)
	}

	done := make(chan error)
	go func() {
		sizes := []int{1, 7, 13, 83, 4096, 5, 250, 2}
		handles := map[string]*os.File{}
		for _, f := range files {
			h, err := os.OpenFile(filepath.Join(fw, f), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
			if err != nil {
				done <- err
				return
			}
			defer h.Close()
			handles[f] = h
		}
		offs := map[string]int{}
		for k := 0; ; k++ {
			progressed := false
			for _, f := range files {
				n := min(sizes[(k+len(f))%len(sizes)], len(src[f])-offs[f])
				if n > 0 {
					handles[f].Write(src[f][offs[f] : offs[f]+n])
					offs[f] += n
					progressed = true
				}
			}
			if !progressed {
				break
			}
			if k%8 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
		// a record cut short at the end of the file (the writer died)
		handles[FileOpRange].Write(src[FileOpRange][:10])
		done <- nil
	}()
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
			collect()
		}
	}
	collect()

	want := readAll(t, genDir)
	if len(got.Ops) != len(want.OpRanges) || len(got.Memory) != countNPU(want.Memory) || len(got.Queue) != len(want.OpMarks)/2 {
		t.Fatalf("tail got %d ops %d mem %d queue; want %d %d %d", len(got.Ops), len(got.Memory), len(got.Queue),
			len(want.OpRanges), countNPU(want.Memory), len(want.OpMarks)/2)
	}
	if len(got.Steps) != 3 {
		t.Fatalf("steps %+v", got.Steps)
	}
	key := func(name string, seq int64, tid uint64, dur int64) string { return fmt.Sprint(name, seq, tid, dur) }
	var a, b []string
	for _, o := range got.Ops {
		a = append(a, key(o.Name, o.Seq, o.TID, 0))
	}
	for _, o := range want.OpRanges {
		b = append(b, key(o.Name, o.Seq, o.StartTID, 0))
	}
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("op multiset differs at %d: %s vs %s", i, a[i], b[i])
		}
	}
	a, b = a[:0], b[:0]
	for _, m := range got.Memory {
		a = append(a, key("", int64(m.Ptr), uint64(m.Allocated), m.AllocSize))
	}
	for _, m := range want.Memory {
		if m.DeviceType == DeviceTypeNPU {
			b = append(b, key("", m.Ptr, uint64(m.TotalAllocated), m.AllocSize))
		}
	}
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("memory multiset differs at %d: %s vs %s", i, a[i], b[i])
		}
	}
	// the producer's short envelope is complete (skipped); our 10 cut bytes wait
	if p := tl.Pending()[filepath.Join(fw, FileOpRange)]; p != 10 {
		t.Fatalf("pending %v", tl.Pending())
	}

	// finalisation, analysis and a new cycle of the same worker
	cp(t, filepath.Join(genDir, "profiler_info.json"), filepath.Join(dir, "profiler_info.json"))
	os.MkdirAll(filepath.Join(dir, OutputDir), 0o750)
	os.WriteFile(filepath.Join(dir, OutputDir, AnalyseDone), nil, 0o640)
	next := filepath.Join(parent, "gen_4242_20261129120000999_ascend_pt")
	os.MkdirAll(filepath.Join(next, FrameworkDir), 0o750)
	cp(t, filepath.Join(genDir, FrameworkDir, FileOpRange), filepath.Join(next, FrameworkDir, FileOpRange))
	os.MkdirAll(filepath.Join(parent, "other_1_20261129120000999_ascend_pt"), 0o750) // another worker
	n := len(got.Ops)
	collect()
	if len(got.Finalized) != 1 || len(got.Analysed) != 1 || len(got.NewDirs) != 1 || got.NewDirs[0] != next {
		t.Fatalf("finalized %v analysed %v new %v", got.Finalized, got.Analysed, got.NewDirs)
	}
	if len(got.Ops)-n != len(want.OpRanges) {
		t.Fatalf("new cycle: %d ops, want %d", len(got.Ops)-n, len(want.OpRanges))
	}
	collect()
	if len(got.Ops)-n != len(want.OpRanges) {
		t.Fatal("records delivered twice")
	}
}

func countNPU(m []MemoryUsageRecord) int {
	n := 0
	for _, r := range m {
		if r.DeviceType == DeviceTypeNPU {
			n++
		}
	}
	return n
}

func cp(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o640); err != nil {
		t.Fatal(err)
	}
}
