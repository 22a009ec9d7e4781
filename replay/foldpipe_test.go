package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/poll"
)

// foldSizes are the pipeline sizes the parallel fold is tried with: the
// default, and sizes that make the decoder hand over (and wait for a free
// batch) every few entries.
var foldSizes = [][2]int{{16384, 4}, {1, 1}, {3, 2}, {64, 3}}

// withFoldSizes sets the pipeline's sizes for the rest of the test.
func withFoldSizes(t *testing.T, n, k int) {
	t.Helper()
	oldN, oldK := foldBatchLen, foldBatches
	foldBatchLen, foldBatches = n, k
	t.Cleanup(func() { foldBatchLen, foldBatches = oldN, oldK })
}

// statsOutcome is what `npumon stats --json` would print for path folded
// in mode: the JSON, or the one-line error.
func statsOutcome(t *testing.T, path string, mode streamMode) string {
	t.Helper()
	st, err := StatsFile(path, StatsOptions{mode: mode})
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// foldFixtures are every snapshot fixture: the real ones and replay's own
// (valid and damaged).
func foldFixtures(t *testing.T) []string {
	var paths []string
	for _, pat := range []string{"testdata/*.pickle", "testdata/*.json", filepath.Join(fixture.Root(t), "snapshots", "*")} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	if len(paths) < 20 {
		t.Fatalf("only %d fixtures found", len(paths))
	}
	return paths
}

// The parallel fold gives StatsFile's output byte for byte, errors
// included, on every fixture and at every pipeline size.
func TestStatsFileParallelSameFixtures(t *testing.T) {
	for _, path := range foldFixtures(t) {
		want := statsOutcome(t, path, streamSeq)
		for _, sz := range foldSizes {
			withFoldSizes(t, sz[0], sz[1])
			if got := statsOutcome(t, path, streamPar); got != want {
				t.Errorf("%s, batches %v: parallel fold differs\n got: %s\nwant: %s", path, sz, got, want)
			}
		}
	}
}

// A snapshot's device traces shuffled, cut, spread over devices and given
// new sizes at random (a fixture's own entries, so every action and field
// shape stays real), written back as a pickle: the parallel fold agrees
// with the sequential one on it and on cuts of it at random offsets (the
// same error text, offset included).
func TestStatsFileParallelRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 6))
	dir := t.TempDir()
	n := 0
	for _, path := range foldFixtures(t) {
		c, err := DecodeFile(path, Options{})
		if err != nil || len(c.Snapshot.DeviceTraces) == 0 {
			continue
		}
		for round := range 3 {
			s := mutateTraces(r, c.Snapshot)
			var buf bytes.Buffer
			if err := WritePickle(&buf, s, ExportDict); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out := filepath.Join(dir, "random.pickle")
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			compareFolds(t, r, out, path, round)
			for range 4 {
				cut := r.IntN(buf.Len())
				if err := os.WriteFile(out, buf.Bytes()[:cut], 0o644); err != nil {
					t.Fatal(err)
				}
				compareFolds(t, r, out, path, round)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d random snapshots", n)
	}
}

func compareFolds(t *testing.T, r *rand.Rand, path, from string, round int) {
	t.Helper()
	want := statsOutcome(t, path, streamSeq)
	withFoldSizes(t, 1+r.IntN(50), 1+r.IntN(4))
	if got := statsOutcome(t, path, streamPar); got != want {
		t.Errorf("from %s round %d, batches %d×%d: parallel fold differs\n got: %s\nwant: %s", from, round, foldBatches, foldBatchLen, got, want)
	}
}

// mutateTraces returns a copy of s whose traces are s's entries drawn at
// random (repeats allowed) over one to three devices, some with new sizes.
func mutateTraces(r *rand.Rand, s *snapshot.Snapshot) *snapshot.Snapshot {
	var all []snapshot.TraceEntry
	for _, tr := range s.DeviceTraces {
		all = append(all, tr...)
	}
	out := *s
	out.Forward = nil
	out.DeviceTraces = make([][]snapshot.TraceEntry, 1+r.IntN(3))
	if len(all) == 0 {
		return &out
	}
	for d := range out.DeviceTraces {
		n := r.IntN(2 * len(all))
		tr := make([]snapshot.TraceEntry, n)
		for i := range tr {
			tr[i] = all[r.IntN(len(all))]
			if r.IntN(4) == 0 {
				tr[i].Size = r.Int64N(1 << 30)
			}
		}
		out.DeviceTraces[d] = tr
	}
	return &out
}

// With one P the automatic mode folds in the decoding goroutine, and the
// figures are the same.
func TestStatsFileParallelOneProc(t *testing.T) {
	path := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	want := statsOutcome(t, path, streamSeq)
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	if streamAuto.parallel() {
		t.Fatal("GOMAXPROCS=1 still folds in parallel")
	}
	if got := statsOutcome(t, path, streamAuto); got != want {
		t.Errorf("GOMAXPROCS=1 differs\n got: %s\nwant: %s", got, want)
	}
	if !streamPar.parallel() || streamSeq.parallel() || noStream.parallel() {
		t.Error("forced modes do not say what they are")
	}
}

// A decode cancelled halfway through the trace stops with the
// cancellation at the same offset in both folds, and the folder is gone
// when it returns.
func TestStatsParallelCancel(t *testing.T) {
	c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	s := *c.Snapshot
	s.Forward = nil
	var tr []snapshot.TraceEntry
	for len(tr) < 200000 {
		tr = append(tr, s.DeviceTraces[0]...)
	}
	s.DeviceTraces = [][]snapshot.TraceEntry{tr}
	var buf bytes.Buffer
	if err := WritePickle(&buf, &s, ExportDict); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	at := int64(len(data) / 2)
	if at < 2*readChunk {
		t.Fatalf("pickle of %d bytes is too small", len(data))
	}
	withFoldSizes(t, 16, 2)
	var errs [2]string
	for i, mode := range []streamMode{streamSeq, streamPar} {
		before := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		rd := &cancelAfter{r: bytes.NewReader(data), at: at, cancel: cancel}
		_, _, err := decode(ctx, rd, int64(len(data)), Options{}, mode)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("mode %d: err = %v, want context.Canceled", mode, err)
		}
		errs[i] = err.Error()
		// The folder closes its done channel as its last act, so it can
		// still be counted for a moment after the decode returns: wait for
		// it to be gone (a goroutine left running fails on the minute).
		poll.Until(t, fmt.Sprintf("mode %d: the goroutines of before the decode (%d)", mode, before), func() bool {
			return runtime.NumGoroutine() <= before
		})
	}
	if errs[0] != errs[1] {
		t.Errorf("cancelled folds differ:\n par: %s\n seq: %s", errs[1], errs[0])
	}
	// Not cancelled, the two folds agree on it too.
	out := filepath.Join(t.TempDir(), "long.pickle")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := statsOutcome(t, out, streamPar), statsOutcome(t, out, streamSeq); got != want {
		t.Errorf("long trace: parallel fold differs\n got: %s\nwant: %s", got, want)
	}
}
