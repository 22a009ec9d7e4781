package explain

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/replay"
)

// The straightforward walk the running sums replaced (Note [running
// sums]): at every step end and every stop, the live allocations summed
// by key; the series dense, one map per step end.

func refKeyBytes(g *Grouper, w *Walker) (map[string]int64, map[string]replay.Alloc) {
	m := map[string]int64{}
	rep := map[string]replay.Alloc{}
	for _, wa := range w.live.All() {
		x := wa.alloc()
		a := &x
		k := g.Key(a)
		m[k] += a.Size
		if r, ok := rep[k]; !ok || cmpLargest(*a, r) < 0 {
			rep[k] = *a
		}
	}
	return m, rep
}

func refLeakSuspects(points []StepPoint, series []map[string]int64) []LeakSuspect {
	out := []LeakSuspect{}
	k := len(series)
	if k < MinLeakSteps {
		return out
	}
	for key, last := range series[k-1] {
		j := k - 1
		for j > 0 && series[j-1][key] <= series[j][key] {
			j--
		}
		run := k - j
		if run < MinLeakSteps || last <= series[j][key] {
			continue
		}
		ups := 0
		for x := j + 1; x < k; x++ {
			if series[x][key] > series[x-1][key] {
				ups++
			}
		}
		if 2*ups < run-1 {
			continue
		}
		ls := LeakSuspect{Key: key, GrowthBytesPerStep: (last - series[j][key]) / int64(run-1)}
		for x := j; x < k; x++ {
			p := points[x]
			p.Bytes = series[x][key]
			ls.Steps = append(ls.Steps, p)
		}
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b LeakSuspect) int {
		return cmp.Or(cmp.Compare(b.GrowthBytesPerStep, a.GrowthBytesPerStep), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// refExplain is (*Device).explain as it was before the running sums.
func (d *Device) refExplain(opts Options, sc traceScan) DeviceExplanation {
	tl := d.Timeline
	de := DeviceExplanation{Device: tl.Device, OOMs: []OOM{}, LeakSuspects: []LeakSuspect{}}
	kind := "oom"
	d.peakReserved = sc.maxReserved
	stops, reserved := sc.ooms, sc.oomReserved
	if len(stops) > opts.MaxOOMs {
		stops, reserved = stops[:opts.MaxOOMs], reserved[:opts.MaxOOMs]
	}
	if len(stops) == 0 {
		kind, stops, reserved = "peak", []int{sc.peak}, []int64{sc.peakReserved}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer crash.Recover()
		d.Steps()
	})
	wg.Go(func() {
		defer crash.Recover()
		d.Categories()
	})
	figs := make([]Figures, len(stops))
	for k, st := range tl.StatesAfter(stops) {
		figs[k] = StateFigures(st)
		figs[k].Reserved = reserved[k]
	}
	wg.Wait()
	steps := d.Steps()
	g := d.Grouper(opts.By)
	if opts.Library != nil {
		opts.Library(g)
	}
	points := steps.Ends
	de.Steps, de.StepSource, de.StepNote = len(points), steps.Source, steps.Note

	w := NewWalker(tl)
	gc := d.Grouper(ByCategory)
	base, _ := refKeyBytes(gc, w)
	baseIdx := -1
	var series []map[string]int64
	var rep map[string]replay.Alloc
	oi, pi := 0, 0
	for oi < len(stops) || pi < len(points) {
		next := -2
		if oi < len(stops) {
			next = stops[oi]
		}
		if pi < len(points) && (next == -2 || points[pi].Index < next) {
			w.AdvanceTo(points[pi].Index)
			var m map[string]int64
			m, rep = refKeyBytes(g, w)
			series = append(series, m)
			base, _ = refKeyBytes(gc, w)
			baseIdx = points[pi].Index
			pi++
			continue
		}
		w.AdvanceTo(next)
		o := d.explainAt(kind, next, figs[oi], g, w.Live(), opts.Top)
		for k := range tl.Entries {
			if replay.ActiveDelta(&tl.Entries[k]) != 0 {
				o.changes = true
				break
			}
		}
		now, _ := refKeyBytes(gc, w)
		o.Grew = grewMost(base, now, baseIdx)
		de.OOMs = append(de.OOMs, o)
		oi++
	}
	de.LeakSuspects = refLeakSuspects(points, series)
	for i := range de.LeakSuspects {
		ls := &de.LeakSuspects[i]
		ls.Frames = g.Frames(rep[ls.Key].Frames)
	}
	return de
}

// randomSteppedCapture is a random trace with many steps: a loop whose
// iterations allocate at random call sites (some of them in an
// optimizer's step, which ends a step; with times, Optimizer.step
// annotations and ops too), leak, free in part, free what was live before
// the trace or never allocated, allocate again at a live address, with
// zero sizes and sizes across the size classes, on two streams, some with
// a forward traceback, and now and then an oom.
func randomSteppedCapture(r *rand.Rand, timed bool) *replay.Capture {
	const base = 0x7f0000000000
	s := &snapshot.Snapshot{Stacks: []snapshot.Stack{nil}}
	stack := func(frames ...snapshot.Frame) snapshot.StackID {
		s.Stacks = append(s.Stacks, frames)
		return snapshot.StackID(len(s.Stacks) - 1)
	}
	user := func(file string, line int64) snapshot.Frame {
		return snapshot.Frame{Filename: file, Line: line, Name: "f"}
	}
	lib := snapshot.Frame{Filename: "/venv/lib/python3.11/site-packages/torch/nn/functional.py", Line: 9, Name: "linear"}
	optStep := snapshot.Frame{Filename: "/venv/lib/python3.11/site-packages/torch/optim/adam.py", Line: 220, Name: "step"}
	var sites []snapshot.StackID
	for k := range 6 {
		sites = append(sites, stack(lib, user("/job/model.py", int64(10+k%4)), user("/job/train.py", int64(k))))
	}
	sites = append(sites, snapshot.NoStack, stack(lib))
	opt := []snapshot.StackID{stack(optStep, user("/job/train.py", 50)), stack(user("/venv/lib/python3.11/site-packages/torch/optim/adam.py", 300), optStep, user("/job/train.py", 50))}
	fwd := stack(user("/job/model.py", 77))
	sizes := []int64{0, 512, 4096, 1<<20 - 512, 1 << 20, 3 << 20, 10 << 20, 12 << 20}

	var tr []snapshot.TraceEntry
	var forward map[int]snapshot.StackID
	t := int64(1_700_000_000_000_000)
	live := map[uint64]int64{}
	var addrs []uint64
	addrOf := func() uint64 { return base + uint64(r.IntN(48))*(16<<20) }
	ev := func(a snapshot.Action, addr uint64, size int64, frames snapshot.StackID) {
		t += 1 + r.Int64N(5)
		e := snapshot.TraceEntry{Action: a, Addr: addr, Size: size, Frames: frames, Stream: uint64(r.IntN(2))}
		if timed {
			e.TimeUS = t
		}
		if a == snapshot.ActionOOM {
			e.Addr, e.DeviceFree = 0, r.Int64N(1<<30)
		}
		tr = append(tr, e)
	}
	leakAddr := uint64(base + 48*(16<<20))
	allocAt := func(a uint64, frames snapshot.StackID, size int64) {
		ev(snapshot.ActionAlloc, a, size, frames)
		if r.IntN(10) == 0 {
			if forward == nil {
				forward = map[int]snapshot.StackID{}
			}
			forward[len(tr)-1] = fwd
		}
		if _, ok := live[a]; !ok && a < base+48*(16<<20) { // the leak's are not freed
			addrs = append(addrs, a)
		}
		live[a] += size
	}
	alloc := func(frames snapshot.StackID) { allocAt(addrOf(), frames, sizes[r.IntN(len(sizes))]) }
	free := func() {
		if len(addrs) == 0 || r.IntN(12) == 0 {
			// an address never allocated in the trace (live before it, or not at all)
			ev(snapshot.ActionFreeCompleted, addrOf()+uint64(r.IntN(2))*(8<<20), sizes[1+r.IntN(len(sizes)-1)], sites[r.IntN(len(sites))])
			return
		}
		k := r.IntN(len(addrs))
		a := addrs[k]
		size := live[a]
		if r.IntN(5) == 0 && size > 512 {
			size = 512 // in part
		}
		if r.IntN(4) > 0 {
			ev(snapshot.ActionFreeRequested, a, size, sites[r.IntN(len(sites))])
		}
		act := snapshot.ActionFreeCompleted
		if r.IntN(6) == 0 {
			act = snapshot.ActionFree
		}
		ev(act, a, size, sites[r.IntN(len(sites))])
		if live[a] -= size; live[a] == 0 {
			delete(live, a)
			addrs = slices.Delete(addrs, k, k+1)
		}
	}
	iters := 20 + r.IntN(60)
	// a leak from some step on, at one of the sites or one of its own, at
	// about one step in pLeak
	leak, leakFrom, pLeak := sites[r.IntN(len(sites))], max(0, r.IntN(8)-2), []int{1, 2, 2, 2, 3}[r.IntN(5)]
	if r.IntN(2) == 0 {
		leak = stack(user("/job/log.py", 5), user("/job/train.py", 99))
	}
	for n := range iters {
		if timed && r.IntN(3) > 0 {
			s.ExternalAnnotations = append(s.ExternalAnnotations, snapshot.Annotation{Name: fmt.Sprintf("aten::op%d", r.IntN(3)), Stage: "START", TimeUS: t + 1})
		}
		for range 1 + r.IntN(6) {
			if r.IntN(3) == 0 {
				free()
			} else {
				alloc(sites[r.IntN(len(sites))])
			}
		}
		if n >= leakFrom && r.IntN(pLeak) == 0 {
			allocAt(leakAddr, leak, 4096) // at an address of its own (an alloc at a live address takes it over)
			leakAddr += 16 << 20
		}
		if timed {
			s.ExternalAnnotations = append(s.ExternalAnnotations, snapshot.Annotation{Name: "aten::op0", Stage: "END", TimeUS: t + 1},
				snapshot.Annotation{Name: "Optimizer.step#Adam.step", Stage: "START", TimeUS: t + 1})
		}
		if n%max(1, iters/3) != 1 || r.IntN(2) == 0 { // now and then no optimizer step: a longer step
			for range 1 + r.IntN(2) {
				alloc(opt[r.IntN(len(opt))])
				free()
			}
		}
		if timed {
			s.ExternalAnnotations = append(s.ExternalAnnotations, snapshot.Annotation{Name: "Optimizer.step#Adam.step", Stage: "END", TimeUS: t + 1})
		}
		if r.IntN(40) == 0 {
			ev(snapshot.ActionOOM, 0, sizes[r.IntN(len(sizes))], sites[r.IntN(len(sites))])
		}
	}
	s.DeviceTraces = [][]snapshot.TraceEntry{tr}
	if forward != nil {
		s.Forward = []map[int]snapshot.StackID{forward}
	}
	// The final segments hold what is live at the end, plus two blocks
	// live since before the trace.
	seg := snapshot.Segment{Address: base, TotalSize: int64(leakAddr - base), IsLarge: true}
	ends := slices.Sorted(func(yield func(uint64) bool) {
		for a := range live {
			if !yield(a) {
				return
			}
		}
	})
	for _, a := range ends {
		if size := live[a]; size > 0 {
			seg.Blocks = append(seg.Blocks, snapshot.Block{Address: a, Size: size, RequestedSize: size, State: snapshot.StateActiveAllocated, Frames: sites[0]})
		}
	}
	for _, a := range []uint64{base + 8<<20, base + 24<<20} {
		if _, ok := live[a]; !ok {
			seg.Blocks = append(seg.Blocks, snapshot.Block{Address: a, Size: 1 << 20, RequestedSize: 1 << 20, State: snapshot.StateActiveAllocated, Frames: sites[1]})
		}
	}
	slices.SortFunc(seg.Blocks, func(a, b snapshot.Block) int { return cmp.Compare(a.Address, b.Address) })
	s.Segments = []snapshot.Segment{seg}
	return &replay.Capture{Snapshot: s}
}

// TestRunningSumsMatchReference: on random traces with many steps, every
// grouping, explain's walk on running sums gives what summing the live
// allocations at every stop gives (refExplain).
func TestRunningSumsMatchReference(t *testing.T) {
	suspects, oomsSeen, steps := 0, 0, 0
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 29))
		c := randomSteppedCapture(r, seed%2 == 0)
		for _, by := range Bys {
			opts := Options{By: by, Top: 3, MaxOOMs: 1 + int(seed%3), NoWhatIf: true}
			want, err := NewDevice(c, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewDevice(c, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := want.refExplain(opts, scanTrace(want.Timeline))
			g := got.explain(opts, scanTrace(got.Timeline))
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("seed %d by %s:\n got %+v\nwant %+v", seed, by, g, w)
			}
			suspects += len(w.LeakSuspects)
			oomsSeen += len(w.OOMs)
			steps += w.Steps
		}
	}
	// the traces exercise what they are for
	if suspects < 100 || steps < 100*6*MinLeakSteps {
		t.Fatalf("%d leak suspects, %d step ends, %d ooms over the traces: too few", suspects, steps, oomsSeen)
	}
	t.Logf("%d leak suspects, %d step ends, %d ooms", suspects, steps, oomsSeen)
}

// TestExplainManyStepsAnswers: Explain on a random stepped capture runs
// (the what-if off) and its JSON-facing parts match the reference.
func TestExplainManyStepsAnswers(t *testing.T) {
	c := randomSteppedCapture(rand.New(rand.NewPCG(1, 2)), true)
	e, err := Explain(context.Background(), c, Options{NoWhatIf: true})
	if err != nil || len(e.Devices) != 1 || e.Devices[0].Steps < MinLeakSteps {
		t.Fatalf("%v %+v", err, e)
	}
}

// TestLeakSuspectsSparseMatchesDense: leakSuspects on the changes of
// random series (short, of small values, negative and zero ones and keys
// that come and go included: the borders of every rule) gives what the
// dense series give.
func TestLeakSuspectsSparseMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	found := 0
	for trial := range 20000 {
		k := 1 + r.IntN(9)
		nkeys := 1 + r.IntN(3)
		s := newKeySums(&Grouper{By: ByStream})
		for id := range nkeys {
			s.intern(fmt.Sprint("key", id))
		}
		h := &keyHist{sums: s}
		var dense []map[string]int64
		points := make([]StepPoint, k)
		for x := range k {
			points[x] = StepPoint{Step: int64(x), Index: 3 * x}
			m := map[string]int64{}
			for id := range int32(nkeys) {
				if r.IntN(3) > 0 { // a change: presence and bytes drawn again (none without an allocation)
					n, b := int32(r.IntN(3)), int64(0)
					if n > 0 {
						b = int64(r.IntN(4)-1) * 512
					}
					s.add(id, b-s.bytes[id], n-s.count[id])
				}
				if s.count[id] > 0 {
					m[s.keys[id]] = s.bytes[id]
				}
			}
			h.record()
			dense = append(dense, m)
		}
		got, want := leakSuspects(points, h), refLeakSuspects(points, dense)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d, series %v:\n got %+v\nwant %+v", trial, dense, got, want)
		}
		found += len(want)
	}
	if found < 1000 {
		t.Fatalf("%d suspects in all: the series exercise too little", found)
	}
}
