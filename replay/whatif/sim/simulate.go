// Package sim runs the what-if (replay/whatif): each device's recorded
// allocation sequence through the allocator package's caching allocator on
// a simulated device, once with the recording's own settings (the
// baseline) and once per alternative configuration.
//
// The input per device is: the allocations live before the trace starts
// (docs/timeline.md rules (a) and (b), in address order), then every
// alloc (requested size, stream), free_requested and free_completed. A
// free_completed that does not directly follow its free_requested was a
// cross-stream deferred free; it is replayed with RecordStream on a stream
// whose work ends at the entry of the recorded free_completed, so the block
// stays pending exactly as long as it did. Recorded segment events are
// outputs that the simulation regenerates and is compared against; a
// recorded oom entry is the request that failed, so it is retried (and
// freed at once when it fits, since the program never got it). empty_cache
// calls leave no entry of their own and are inferred from segment releases
// outside a malloc (emptyCaches). torch_npu's synthetic workspace triples
// (workspace_snapshot, segment_alloc, alloc) are another allocator's memory:
// it is held on the device for the whole run and counted as reserved and
// allocated, not replayed. Entries the trace cannot explain are counted in
// InputStats.Unmatched: a free of an address that is not live is skipped,
// an alloc over a live address frees the old allocation first.
package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
)

// Simulate runs the baseline and every alternative of opts over c's devices,
// all runs in parallel. Configuration errors are returned before anything
// runs; ctx cancels the runs.
func Simulate(ctx context.Context, c *replay.Capture, opts whatif.Options) (*whatif.Result, error) {
	f := whatif.FileFlavour(c)
	if opts.Flavour != nil {
		f = *opts.Flavour
	}
	return SimulateSnapshot(ctx, c.Snapshot, f, opts)
}

// SimulateSnapshot is Simulate on a decoded snapshot with a given flavour.
func SimulateSnapshot(ctx context.Context, s *snapshot.Snapshot, f config.Flavour, opts whatif.Options) (*whatif.Result, error) {
	base, src := whatif.BaselineConfig(s, f)
	cfgs := []config.Config{base}
	names := []string{"baseline"}
	for _, conf := range opts.Confs {
		cfg, err := whatif.ParseConf(conf, f)
		if err != nil {
			return nil, fmt.Errorf("--conf %q: %w", conf, err)
		}
		cfgs = append(cfgs, cfg)
		names = append(names, conf)
	}
	contiguous := f == config.FlavourNPU
	if opts.Contiguous != nil {
		contiguous = *opts.Contiguous
	}
	res := &whatif.Result{Flavour: f.String(), Placement: "paged", Baseline: base.Raw, BaselineSource: src, Confs: opts.Confs}
	if contiguous {
		res.Placement = "contiguous"
	}
	devices := opts.Devices
	if devices == nil {
		devices = s.Devices()
	}
	var inputs []*input // per device of res.Devices
	for _, d := range devices {
		dr, in, err := prepareDevice(s, d, opts.DeviceMem, base)
		if err != nil {
			return nil, err
		}
		dr.Runs = make([]*whatif.Run, len(cfgs))
		if whatif.NothingToSimulate(dr.Input) {
			dr.Runs = []*whatif.Run{} // Assess says so
		}
		if u, ok := opts.Until[d]; ok {
			in.until = int32(min(max(u, -1), 1<<31-1))
		}
		dr.Until = int(min(in.until, int32(len(in.entries)-1)))
		res.Devices = append(res.Devices, *dr)
		inputs = append(inputs, in)
	}

	par := opts.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for di := range res.Devices {
		dr := &res.Devices[di]
		in := inputs[di]
		for ci := range dr.Runs {
			crash.GoBounded(&wg, sem, func() {
				run, err := simulate(ctx, in, names[ci], cfgs[ci], dr.DeviceMem, contiguous)
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("device %d: %w", dr.Device, err); cancel() })
					return
				}
				dr.Runs[ci] = run
			})
		}
	}
	// On another device than the file's, the baseline also runs on the
	// file's own, to judge the reproduction there (whatif.Assess).
	for di := range res.Devices {
		dr := &res.Devices[di]
		if len(dr.Runs) == 0 || dr.DeviceMem == dr.FileDeviceMem {
			continue
		}
		in := inputs[di]
		crash.GoBounded(&wg, sem, func() {
			run, err := simulate(ctx, in, "baseline on the file's device", cfgs[0], dr.FileDeviceMem, contiguous)
			if err != nil {
				once.Do(func() { firstErr = fmt.Errorf("device %d: %w", dr.Device, err); cancel() })
				return
			}
			dr.Reference = run
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for di := range res.Devices {
		dr := &res.Devices[di]
		if len(dr.Runs) == 0 {
			whatif.Assess(dr)
			continue
		}
		dr.Fidelity = fidelity(dr.Recorded.Reserved, dr.Runs[0].Reserved, inputs[di], dr.Recorded.PeakReserved)
		rec := dr.Recorded.Reserved
		dr.Fidelity.PeakDiff = dr.Runs[0].PeakReserved - dr.Recorded.PeakReserved
		// The runs end at Until: the recording's reserved bytes there.
		dr.Fidelity.FinalDiff = dr.Runs[0].FinalReserved - whatif.At(rec, dr.Until)
		recEvents := int64(dr.Recorded.SegmentAllocs + dr.Recorded.SegmentFrees)
		dr.Fidelity.RecordedSegmentEvents = recEvents > 0
		dr.Fidelity.CurvePinned = curvePinned(recEvents, dr.Runs[0].SegmentAllocs+dr.Runs[0].SegmentFrees)
		whatif.Assess(dr)
	}
	return res, nil
}

// curvePinned is Fidelity.CurvePinned for recorded and simulated counts
// of segment events.
func curvePinned(recorded, simulated int64) bool {
	return recorded > 0 && 2*recorded >= simulated
}
