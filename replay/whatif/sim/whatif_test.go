package sim

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
)

const MiB = config.MiB

func load(t testing.TB, path string) *replay.Capture {
	t.Helper()
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func simulateFile(t *testing.T, name string, opts whatif.Options) *whatif.DeviceResult {
	t.Helper()
	res, err := Simulate(context.Background(), load(t, filepath.Join("testdata", name)), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Devices) != 1 {
		t.Fatalf("%d devices, want 1", len(res.Devices))
	}
	return &res.Devices[0]
}

// exact asserts that the baseline regenerates the recorded reserved curve.
func exact(t *testing.T, d *whatif.DeviceResult) {
	t.Helper()
	f := d.Fidelity
	t.Logf("baseline fidelity: max |Δ| %d B, mean |Δ| %.0f B over %d points", f.MaxAbsDiff, f.MeanAbsDiff, f.Points)
	if f.MaxAbsDiff != 0 || f.FinalDiff != 0 || f.PeakDiff != 0 || !f.RecordedSegmentEvents {
		t.Errorf("baseline fidelity %+v, want exact", f)
	}
	if got, want := d.Runs[0].Reserved, d.Recorded.Reserved; !reflect.DeepEqual(got, want) {
		t.Errorf("baseline curve %v, recorded %v", got, want)
	}
	if got, want := d.Runs[0].SegmentAllocs, int64(d.Recorded.SegmentAllocs); got != want {
		t.Errorf("baseline segment allocs %d, recorded %d", got, want)
	}
}

func TestFragmentationOOMsWithoutExpandableSegments(t *testing.T) {
	d := simulateFile(t, "fragmentation.pickle", whatif.Options{Confs: []string{"expandable_segments:True"}})
	if d.DeviceMem != 1024*MiB || !strings.Contains(d.DeviceMemSource, "oom entry 110") {
		t.Errorf("device mem %d (%s), want 1 GiB from the oom entry", d.DeviceMem, d.DeviceMemSource)
	}
	if d.Input.Allocs != 40 || d.Input.Frees != 30 || d.Input.OOMRequests != 1 || d.Input.Unmatched != 0 {
		t.Errorf("input %+v", d.Input)
	}
	exact(t, d)
	base, exp := d.Runs[0], d.Runs[1]
	if base.Name != "baseline" || base.Flavour != "npu" {
		t.Errorf("baseline %q flavour %s, want npu (torch_npu file)", base.Name, base.Flavour)
	}
	if base.FirstOOM == nil || base.FirstOOM.Index != 110 || base.FirstOOM.Size != 200*MiB || base.OOMs != 1 {
		t.Fatalf("baseline OOM %+v (%d), want entry 110", base.FirstOOM, base.OOMs)
	}
	if !strings.HasPrefix(base.FirstOOM.Message, "NPU out of memory. Tried to allocate 200.00 MiB") ||
		!strings.Contains(base.FirstOOM.Message, "900.00 MiB reserved in total") {
		t.Errorf("OOM message %q", base.FirstOOM.Message)
	}
	// The peak is reached by the 10th 90 MiB segment (entry 18), all of it
	// allocated; at the OOM only a third is.
	if base.PeakReserved != 900*MiB || base.PeakIndex != 18 || base.CachedFreeAtPeak != 0 {
		t.Errorf("baseline peak %d at %d, fragmentation %d", base.PeakReserved, base.PeakIndex, base.CachedFreeAtPeak)
	}
	if base.FirstOOM.Reserved != 900*MiB || base.FirstOOM.Allocated != 300*MiB {
		t.Errorf("at the OOM: reserved %d, allocated %d", base.FirstOOM.Reserved, base.FirstOOM.Allocated)
	}
	if base.AllocRetries != 1 {
		t.Errorf("baseline retries %d, want 1 (the failing request)", base.AllocRetries)
	}
	if exp.OOMs != 0 || exp.FirstOOM != nil || exp.RecordedOOMsFit != 1 {
		t.Errorf("expandable: %d OOMs (%+v), %d recorded OOMs fit; want none and 1", exp.OOMs, exp.FirstOOM, exp.RecordedOOMsFit)
	}
	if !exp.ExpandableSegments || exp.PeakReserved > 1024*MiB || exp.PeakReserved < 900*MiB {
		t.Errorf("expandable peak reserved %d", exp.PeakReserved)
	}
	t.Logf("baseline: peak %s, OOM at %d; expandable: peak %s, segments +%d/-%d, retries %d",
		bytesize.Torch(base.PeakReserved), base.FirstOOM.Index, bytesize.Torch(exp.PeakReserved),
		exp.SegmentAllocs, exp.SegmentFrees, exp.AllocRetries)
}

func TestMaxSplitSizeKeepsTheBigBlock(t *testing.T) {
	d := simulateFile(t, "max_split.pickle", whatif.Options{Confs: []string{"max_split_size_mb:100", "max_split_size_mb:300"}})
	exact(t, d)
	if d.DeviceMem != 256*MiB {
		t.Errorf("device mem %d, want 256 MiB", d.DeviceMem)
	}
	base, ms, big := d.Runs[0], d.Runs[1], d.Runs[2]
	if base.FirstOOM == nil || base.FirstOOM.Index != 5 {
		t.Fatalf("baseline OOM %+v, want entry 5", base.FirstOOM)
	}
	if ms.OOMs != 0 || ms.RecordedOOMsFit != 1 || ms.MaxSplitSize != 100*MiB {
		t.Errorf("max_split_size_mb:100: %d OOMs, %d fit, max split %d", ms.OOMs, ms.RecordedOOMsFit, ms.MaxSplitSize)
	}
	// The 12 MiB request gets a segment of its own: 200 + 12 MiB.
	if ms.PeakReserved != 212*MiB || ms.SegmentAllocs != 2 {
		t.Errorf("max_split_size_mb:100: peak %d, %d segments", ms.PeakReserved, ms.SegmentAllocs)
	}
	// A limit above the block size changes nothing.
	if big.FirstOOM == nil || big.FirstOOM.Index != 5 || !reflect.DeepEqual(big.Reserved, base.Reserved) {
		t.Errorf("max_split_size_mb:300: OOM %+v, curve %v", big.FirstOOM, big.Reserved)
	}
}

func TestDeferredFreeAndInitialAllocations(t *testing.T) {
	c := load(t, "testdata/deferred.pickle")
	res, err := Simulate(context.Background(), c, whatif.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Flavour != "cuda" || !strings.Contains(res.BaselineSource, "allocator_settings") || res.Baseline != "max_split_size_mb:200" {
		t.Errorf("flavour %s, baseline %q from %s", res.Flavour, res.Baseline, res.BaselineSource)
	}
	d := &res.Devices[0]
	if d.Input.Initial != 2 || d.Input.DeferredFrees != 1 || d.Input.Allocs != 4 || d.Input.Unmatched != 0 {
		t.Errorf("input %+v, want 2 initial, 1 deferred free, 4 allocs", d.Input)
	}
	exact(t, d)
	base := d.Runs[0]
	if base.MaxSplitSize != 200*MiB {
		t.Errorf("baseline max split %d, want 200 MiB from allocator_settings", base.MaxSplitSize)
	}
	// Had the deferred free been immediate, the second 24 MiB request would
	// have reused the first block: 2 segments instead of 3.
	if base.SegmentAllocs != 3 || base.PeakReserved != 70*MiB {
		t.Errorf("segments %d, peak %d; want 3 (Q, R, T) and 70 MiB", base.SegmentAllocs, base.PeakReserved)
	}
	if !strings.HasPrefix(d.DeviceMemSource, "guessed") || d.DeviceMem != 70*MiB+10*MiB {
		t.Errorf("device mem %d (%s)", d.DeviceMem, d.DeviceMemSource)
	}
	if !d.HasTimestamps {
		t.Error("HasTimestamps false")
	}
}

// TestInitialAllocationsFollowTimeline checks the live-before-trace set
// against replay's timeline rules on every real fixture.
func TestInitialAllocationsFollowTimeline(t *testing.T) {
	for _, path := range fixtures(t) {
		c := load(t, path)
		for _, dev := range c.Snapshot.Devices() {
			tl, err := replay.NewTimeline(c.Snapshot, dev)
			if err != nil {
				t.Fatal(err)
			}
			in := buildInput(tl, nil)
			var sum int64
			n := 0
			for _, o := range in.ops {
				if o.entry == -1 {
					sum += o.size
					n++
				}
			}
			count, bytes := tl.LiveAfter(-1)
			if n != count || sum != bytes || sum != tl.ActiveAtStart {
				t.Errorf("%s: %d initial allocations of %d B; timeline %d of %d B", filepath.Base(path), n, sum, count, bytes)
			}
		}
	}
}

func fixtures(t *testing.T) []string {
	return fixture.Glob(t, "snapshots/*.pickle")
}

// TestFixtureFidelity reports the baseline fidelity on the real snapshots.
// None of them records segment events, so the recorded curve is flat and
// only the final reserved bytes are a sharp reference.
func TestFixtureFidelity(t *testing.T) {
	for _, path := range fixtures(t) {
		c := load(t, path)
		res, err := Simulate(context.Background(), c, whatif.Options{Confs: []string{"expandable_segments:True", "max_split_size_mb:64"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Devices {
			if len(d.Runs) == 0 { // TestFixturesTrust checks why
				t.Logf("%s dev %d: %s", filepath.Base(path), d.Device, d.TrustLine())
				continue
			}
			f, b := d.Fidelity, d.Runs[0]
			t.Logf("%s dev %d: %d entries, %d initial allocs; recorded peak %s, baseline peak %s (%+.2f%%), final Δ %s; curve max |Δ| %s, mean |Δ| %s (%.1f%% of peak); segment events recorded: %v",
				filepath.Base(path), d.Device, d.Input.Entries, d.Input.Initial,
				bytesize.Torch(d.Recorded.PeakReserved), bytesize.Torch(b.PeakReserved),
				100*float64(f.PeakDiff)/float64(d.Recorded.PeakReserved), signed(f.FinalDiff),
				bytesize.Torch(f.MaxAbsDiff), bytesize.Torch(int64(f.MeanAbsDiff)), 100*f.Relative, f.RecordedSegmentEvents)
			for _, r := range d.Runs[1:] {
				t.Logf("    %-26s peak %s, fragmentation at peak %s (%.1f%%), segments +%d/-%d, OOMs %d",
					r.Name, bytesize.Torch(r.PeakReserved), bytesize.Torch(r.CachedFreeAtPeak),
					100*r.CachedFreeFraction, r.SegmentAllocs, r.SegmentFrees, r.OOMs)
			}
			// The final reserved bytes are known exactly; the baseline must
			// land within 20% of them.
			final := d.Recorded.Reserved[len(d.Recorded.Reserved)-1].Bytes
			if b.OOMs != 0 || abs(f.FinalDiff) > final/5 {
				t.Errorf("%s: baseline final Δ %d of %d, %d OOMs", filepath.Base(path), f.FinalDiff, final, b.OOMs)
			}
		}
	}
}

func signed(n int64) string {
	if n < 0 {
		return "-" + bytesize.Torch(-n)
	}
	return "+" + bytesize.Torch(n)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func TestDeviceMemGiven(t *testing.T) {
	// On 512 MiB the first segments already do not fit.
	d := simulateFile(t, "fragmentation.pickle", whatif.Options{DeviceMem: 512 * MiB})
	if d.DeviceMem != 512*MiB || d.DeviceMemSource != "given (--device-mem)" {
		t.Errorf("device mem %d (%s)", d.DeviceMem, d.DeviceMemSource)
	}
	b := d.Runs[0]
	if b.FirstOOM == nil || b.FirstOOM.Index != 11 || b.FailedAllocs == 0 {
		t.Errorf("first OOM %+v, failed %d; want the 6th 90 MiB request (entry 11)", b.FirstOOM, b.FailedAllocs)
	}
}

func TestBadConf(t *testing.T) {
	c := load(t, "testdata/max_split.pickle")
	_, err := Simulate(context.Background(), c, whatif.Options{Confs: []string{"max_split_size_mb:10"}})
	if err == nil || !strings.Contains(err.Error(), `--conf "max_split_size_mb:10"`) || !strings.Contains(err.Error(), "must be >= 20") {
		t.Errorf("err %v", err)
	}
	_, err = Simulate(context.Background(), c, whatif.Options{Confs: []string{"expandable_segments:True,max_split_size_mb:100"}})
	if err == nil {
		t.Error("NPU accepted expandable_segments with max_split_size_mb")
	}
	cuda := config.FlavourCUDA
	if _, err := Simulate(context.Background(), c, whatif.Options{Flavour: &cuda, Confs: []string{"expandable_segments:True,max_split_size_mb:100"}}); err != nil {
		t.Errorf("CUDA flavour: %v", err)
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Simulate(ctx, load(t, "testdata/fragmentation.pickle"), whatif.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestDeterministicAcrossParallelism(t *testing.T) {
	c := load(t, "testdata/fragmentation.pickle")
	confs := []string{"expandable_segments:True", "max_split_size_mb:40", "roundup_power2_divisions:4"}
	a, err := Simulate(context.Background(), c, whatif.Options{Confs: confs, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(context.Background(), c, whatif.Options{Confs: confs})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("results differ between sequential and parallel runs")
	}
}

func TestEmptyCacheInference(t *testing.T) {
	A := func(a snapshot.Action, addr uint64, size int64) snapshot.TraceEntry {
		return snapshot.TraceEntry{Action: a, Addr: addr, Size: size}
	}
	const (
		al = snapshot.ActionAlloc
		fr = snapshot.ActionFreeRequested
		fc = snapshot.ActionFreeCompleted
		sa = snapshot.ActionSegmentAlloc
		sf = snapshot.ActionSegmentFree
	)
	tr := []snapshot.TraceEntry{
		A(sa, 1, 20*MiB), A(al, 1, 20*MiB), A(fr, 1, 20*MiB), A(fc, 1, 20*MiB),
		A(sf, 1, 20*MiB), A(fr, 9, 4), A(fc, 9, 4), // 4: empty_cache, then a plain free
		A(sa, 2, 20*MiB), A(al, 2, 20*MiB), A(fr, 2, 20*MiB), A(fc, 2, 20*MiB),
		A(fc, 3, 8), A(sf, 2, 20*MiB), A(sa, 4, 40*MiB), A(al, 4, 40*MiB), // 11: sync'd free, release, new segment
		A(sf, 4, 0), A(snapshot.ActionOOM, 0, 60*MiB), // 15: release inside a failing malloc
	}
	if got := emptyCaches(tr, nil, nil); !reflect.DeepEqual(got, []span{{4, 5}}) {
		t.Errorf("without a device test: %v, want [4]", got)
	}
	reserved := func(int) int64 { return 20 * MiB }
	roomy := func(before, seg int64) bool { return before+seg > 100*MiB }
	if got := emptyCaches(tr, roomy, reserved); !reflect.DeepEqual(got, []span{{4, 5}, {11, 13}}) {
		t.Errorf("on a roomy device: %v, want [4 11]", got)
	}
	full := func(before, seg int64) bool { return before+seg > 50*MiB }
	if got := emptyCaches(tr, full, reserved); !reflect.DeepEqual(got, []span{{4, 5}}) {
		t.Errorf("on a full device: %v, want [4]", got)
	}
}

func TestDevicesSimulatedSeparately(t *testing.T) {
	c := load(t, "testdata/max_split.pickle")
	s := c.Snapshot
	// Device 1 runs the fragmentation trace.
	f := load(t, "testdata/fragmentation.pickle").Snapshot
	s.DeviceTraces = append(s.DeviceTraces, f.DeviceTraces[0])
	for _, seg := range f.Segments {
		seg.Device = 1
		s.Segments = append(s.Segments, seg)
	}
	res, err := SimulateSnapshot(context.Background(), s, config.FlavourNPU, whatif.Options{Confs: []string{"max_split_size_mb:100"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Devices) != 2 || res.Devices[0].Device != 0 || res.Devices[1].Device != 1 {
		t.Fatalf("devices %+v", res.Devices)
	}
	d0, d1 := res.Devices[0], res.Devices[1]
	if d0.DeviceMem != 256*MiB || d1.DeviceMem != 1024*MiB {
		t.Errorf("device sizes %d, %d", d0.DeviceMem, d1.DeviceMem)
	}
	if d0.Runs[1].OOMs != 0 || d1.Runs[0].FirstOOM == nil || d1.Runs[0].FirstOOM.Index != 110 {
		t.Errorf("device 0 max_split OOMs %d; device 1 baseline OOM %+v", d0.Runs[1].OOMs, d1.Runs[0].FirstOOM)
	}
	if d0.Fidelity.MaxAbsDiff != 0 || d1.Fidelity.MaxAbsDiff != 0 {
		t.Errorf("fidelity %+v %+v", d0.Fidelity, d1.Fidelity)
	}
	only, err := SimulateSnapshot(context.Background(), s, config.FlavourNPU, whatif.Options{Devices: []int{1}})
	if err != nil || len(only.Devices) != 1 || only.Devices[0].Device != 1 {
		t.Fatalf("--device 1: %v %+v", err, only)
	}
	if _, err := SimulateSnapshot(context.Background(), s, config.FlavourNPU, whatif.Options{Devices: []int{5}}); err == nil {
		t.Error("device 5 accepted")
	}
}

func TestWorkspaceBlocksAreExternal(t *testing.T) {
	d := simulateFile(t, "workspace.pickle", whatif.Options{Confs: []string{"expandable_segments:True"}})
	if d.Input.Workspace != 1 || d.Input.Allocs != 1 {
		t.Errorf("input %+v, want 1 workspace block and 1 caching-allocator alloc", d.Input)
	}
	exact(t, d)
	b := d.Runs[0]
	if b.PeakReserved != 28*MiB || b.SegmentAllocs != 1 || b.FinalReserved != 28*MiB {
		t.Errorf("baseline peak %d, final %d, %d segments; want 28 MiB (8 workspace + 20) and 1", b.PeakReserved, b.FinalReserved, b.SegmentAllocs)
	}
	if e := d.Runs[1]; e.PeakReserved != 8*MiB+20*MiB || e.FinalReserved != 28*MiB {
		t.Errorf("expandable peak %d, final %d", e.PeakReserved, e.FinalReserved)
	}
}

// TestUntil: a run told to stop after an entry ignores the rest of the
// trace: its peak is the prefix's.
func TestUntil(t *testing.T) {
	s := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{{
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 4 << 20},
		{Action: snapshot.ActionFreeRequested, Addr: 0x1000, Size: 4 << 20},
		{Action: snapshot.ActionFreeCompleted, Addr: 0x1000, Size: 4 << 20},
		{Action: snapshot.ActionAlloc, Addr: 0x2000, Size: 64 << 20},
	}}}
	full, err := SimulateSnapshot(context.Background(), s, config.FlavourCUDA, whatif.Options{DeviceMem: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	cut, err := SimulateSnapshot(context.Background(), s, config.FlavourCUDA, whatif.Options{DeviceMem: 1 << 30, Until: map[int]int{0: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if f, c := full.Devices[0].Runs[0].PeakReserved, cut.Devices[0].Runs[0].PeakReserved; c >= f || c == 0 {
		t.Errorf("peak reserved: whole trace %d, until entry 2 %d", f, c)
	}
}
