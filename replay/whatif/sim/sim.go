package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/replay/whatif"
)

// simEpoch is the simulated clock's origin; entry i happens at
// simEpoch + (i+1) µs, so stream work can end exactly at a later entry.
var simEpoch = time.Unix(1_000_000_000, 0)

func entryTime(entry int32) time.Time {
	return simEpoch.Add(time.Duration(int64(entry)+1) * time.Microsecond)
}

// helperStreams hands out streams whose queued work has finished, so that
// every deferred free gets a stream of its own that completes exactly when
// the recorded free_completed did.
type helperStreams []helper

type helper struct {
	s      acl.Stream
	doneAt int32
}

func (h helperStreams) Len() int           { return len(h) }
func (h helperStreams) Less(i, j int) bool { return h[i].doneAt < h[j].doneAt }
func (h helperStreams) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *helperStreams) Push(x any)        { *h = append(*h, x.(helper)) }
func (h *helperStreams) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate replays in under cfg on a device of devMem bytes (see
// Options.Contiguous).
func simulate(ctx context.Context, in *input, name string, cfg config.Config, devMem int64, contiguous bool) (*whatif.Run, error) {
	r, err := newRunner(in, name, cfg, devMem, contiguous)
	if err != nil {
		return nil, err
	}
	if err := r.replay(ctx); err != nil {
		return nil, err
	}
	r.finish()
	return r.run, nil
}

// runner is one simulation in progress: the simulated device and its
// allocator, and the run's figures as the operations change them.
type runner struct {
	in      *input
	name    string
	run     *whatif.Run
	clock   *acl.ManualClock
	dev     *acl.Device
	a       *allocator.Allocator
	streams map[uint64]acl.Stream // the recording's streams on dev
	helpers helperStreams
	ptrs    []uint64 // per allocation id: its pointer in this run, 0 when not live
	pad     int64    // the allocator's request padding (Pad32)

	reserved int64 // the bytes of the curve's last point
	external int64 // workspace blocks: reserved and allocated outside the allocator

	// The allocator's segment counters when the trace's first entry
	// is replayed, so that the run counts only the trace's own.
	initAllocs, initFrees int64
	started               bool
}

// newRunner sets up the simulated device, its allocator under cfg and the
// recording's streams.
func newRunner(in *input, name string, cfg config.Config, devMem int64, contiguous bool) (*runner, error) {
	clock := acl.NewManualClock(simEpoch)
	dev, err := newDevice(clock, devMem, contiguous)
	if err != nil {
		return nil, err
	}
	a, err := allocator.New(dev, cfg, allocator.WithClock(clock))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	streams, err := createStreams(dev, in.streams)
	if err != nil {
		return nil, err
	}
	r := &runner{in: in, name: name, clock: clock, dev: dev, a: a, streams: streams, ptrs: make([]uint64, in.ids)}
	r.run = &whatif.Run{Name: name, Conf: cfg.Raw, Flavour: cfg.Flavour.String(), ExpandableSegments: cfg.ExpandableSegments}
	if cfg.MaxSplitSize != config.Unlimited {
		r.run.MaxSplitSize = cfg.MaxSplitSize
	}
	r.run.Reserved = append(r.run.Reserved, whatif.Point{Index: -1})
	if cfg.Pad32 {
		r.pad = 32
	}
	return r, nil
}

// newDevice makes the simulated device of devMem bytes. Paged: the driver
// maps device memory page by page, so a request fails only when the bytes
// run out: give the device ample address space and cap its usable bytes.
// Contiguous: acl's own placement.
func newDevice(clock *acl.ManualClock, devMem int64, contiguous bool) (*acl.Device, error) {
	spec := acl.DeviceSpec{Name: "whatif", HBMBytes: devMem, SystemReserved: -1}
	if !contiguous {
		spec.HBMBytes = 4*devMem + 64*config.GiB
	}
	rt := acl.NewRuntime(acl.Config{Devices: []acl.DeviceSpec{spec}, Clock: clock})
	dev, err := rt.Device(0)
	if err != nil {
		return nil, err
	}
	if !contiguous {
		dev.SetHBMLimit(devMem)
	}
	return dev, nil
}

// createStreams makes a stream on dev for each recorded stream; ids must be
// ascending, so that best-fit order matches the recording.
func createStreams(dev *acl.Device, ids []uint64) (map[uint64]acl.Stream, error) {
	streams := make(map[uint64]acl.Stream, len(ids))
	for _, s := range ids {
		if s == 0 {
			streams[s] = acl.DefaultStream
			continue
		}
		var err error
		if streams[s], err = dev.CreateStream(); err != nil {
			return nil, err
		}
	}
	return streams, nil
}

// replay runs the input's operations up to in.until.
func (r *runner) replay(ctx context.Context) error {
	in := r.in
	for k := range in.ops {
		if k&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		o := &in.ops[k]
		if o.entry > in.until {
			break
		}
		if o.entry >= 0 && !r.started {
			st := r.a.Stats()
			r.initAllocs, r.initFrees, r.started = st.NumDeviceAlloc, st.NumDeviceFree, true
		}
		r.clock.Set(entryTime(o.entry))
		var err error
		switch o.kind {
		case opAlloc:
			err = r.alloc(o)
		case opFree:
			err = r.free(o)
		case opExternal:
			r.workspace(o)
		case opEmptyCache:
			err = r.emptyCache(o)
		case opOOM:
			err = r.retryOOM(o)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// alloc replays an allocation; one that fails is the run's OOM.
func (r *runner) alloc(o *op) error {
	ptr, err := r.a.Malloc(o.size, r.streams[o.stream])
	if err != nil {
		if err := r.oom(o, err); err != nil {
			return err
		}
		r.run.FailedAllocs++
	}
	r.ptrs[o.id] = ptr
	r.observe(o.at)
	return nil
}

// free replays a free, deferred until the recorded free_completed when
// that came later.
func (r *runner) free(o *op) error {
	ptr := r.ptrs[o.id]
	if ptr == 0 {
		return nil // its allocation failed in this run
	}
	r.ptrs[o.id] = 0
	if o.doneAt > o.entry+1 {
		if err := deferFree(r.dev, r.a, &r.helpers, ptr, o); err != nil {
			return r.entryErr(o, err)
		}
	}
	if err := r.a.Free(ptr); err != nil {
		return r.entryErr(o, err)
	}
	return nil
}

// workspace takes a workspace block: the workspace allocator's block takes
// device memory for good; a device too small for it shows in the runs'
// OOMs.
func (r *runner) workspace(o *op) {
	run := r.run
	if _, err := r.dev.MallocAlign32(o.size, acl.HugeFirst); err != nil {
		run.OOMs++
		if run.FirstOOM == nil {
			run.FirstOOM = &whatif.OOM{Index: int(o.entry), Size: o.size, Message: "workspace block: " + err.Error()}
		}
	}
	r.external += o.size
	r.observe(o.at)
}

// emptyCache replays an inferred empty_cache call.
func (r *runner) emptyCache(o *op) error {
	if err := r.a.EmptyCache(); err != nil {
		return r.entryErr(o, err)
	}
	r.observe(o.at)
	return nil
}

// retryOOM tries the request a recorded oom entry failed, and frees it at
// once when it fits, since the program never got it.
func (r *runner) retryOOM(o *op) error {
	// The oom entry's size is the rounded request (pad included).
	size := o.size
	if size > r.pad {
		size -= r.pad
	}
	ptr, err := r.a.Malloc(size, r.streams[o.stream])
	if err != nil {
		if err := r.oom(o, err); err != nil {
			return err
		}
		r.observe(o.at)
		return nil
	}
	r.run.RecordedOOMsFit++
	r.observe(o.at)
	if err := r.a.Free(ptr); err != nil {
		return r.entryErr(o, err)
	}
	return nil
}

// observe records the reserved and allocated bytes after the operation
// whose reserved change the recording shows at entry: the peak, and a
// point of the curve when reserved changed.
func (r *runner) observe(entry int32) {
	run := r.run
	st := r.a.Stats()
	res := st.ReservedBytes[allocator.StatAll].Current + r.external
	if res > run.PeakReserved {
		run.PeakReserved, run.PeakIndex = res, int(entry)
		run.CachedFreeAtPeak = res - (st.AllocatedBytes[allocator.StatAll].Current + r.external)
	}
	if res == r.reserved {
		return
	}
	r.reserved = res
	c := &run.Reserved
	if last := &(*c)[len(*c)-1]; last.Index == int(entry) {
		last.Bytes = res
	} else {
		*c = append(*c, whatif.Point{Index: int(entry), Bytes: res})
	}
}

// oom counts an allocator OOM error as the run's (the first one described
// in FirstOOM); any other error is returned, naming the entry.
func (r *runner) oom(o *op, err error) error {
	var oe *allocator.OOMError
	if !errors.As(err, &oe) {
		return r.entryErr(o, err)
	}
	run := r.run
	run.OOMs++
	if run.FirstOOM == nil {
		run.FirstOOM = &whatif.OOM{Index: int(o.entry), Size: o.size, Message: oe.Error(), Reserved: oe.Reserved + r.external, Allocated: oe.Allocated + r.external}
		if o.entry >= 0 {
			run.FirstOOM.TimeUS = r.in.entries[o.entry].TimeUS
		}
	}
	return nil
}

// entryErr names the run and o's entry in err.
func (r *runner) entryErr(o *op, err error) error {
	return fmt.Errorf("%s: entry %d: %w", r.name, o.entry, err)
}

// finish fills in the run's totals from the allocator's statistics.
func (r *runner) finish() {
	run := r.run
	st := r.a.Stats()
	if !r.started { // the trace added nothing to the initial state
		r.initAllocs, r.initFrees = st.NumDeviceAlloc, st.NumDeviceFree
	}
	run.SegmentAllocs = st.NumDeviceAlloc - r.initAllocs
	run.SegmentFrees = st.NumDeviceFree - r.initFrees
	run.PeakAllocated = st.AllocatedBytes[allocator.StatAll].Peak + r.external
	run.AllocRetries = st.NumAllocRetries
	run.FinalReserved = st.ReservedBytes[allocator.StatAll].Current + r.external
	if run.PeakReserved > 0 {
		run.CachedFreeFraction = float64(run.CachedFreeAtPeak) / float64(run.PeakReserved)
	}
}

// deferFree makes ptr's free wait, the way record_stream does, for work on a
// stream of its own that ends at the entry of the recorded free_completed.
func deferFree(dev *acl.Device, a *allocator.Allocator, h *helperStreams, ptr uint64, o *op) error {
	var s acl.Stream
	if h.Len() > 0 && (*h)[0].doneAt <= o.entry {
		s = heap.Pop(h).(helper).s
	} else {
		var err error
		if s, err = dev.CreateStream(); err != nil {
			return err
		}
	}
	heap.Push(h, helper{s, o.doneAt})
	if err := dev.Launch(s, entryTime(o.doneAt).Sub(entryTime(o.entry))); err != nil {
		return err
	}
	return a.RecordStream(ptr, s)
}
