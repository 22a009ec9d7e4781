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
	clock := acl.NewManualClock(simEpoch)
	// Paged: the driver maps device memory page by page, so a request
	// fails only when the bytes run out: give the device ample address
	// space and cap its usable bytes. Contiguous: acl's own placement.
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
	a, err := allocator.New(dev, cfg, allocator.WithClock(clock))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	streams := make(map[uint64]acl.Stream, len(in.streams))
	for _, s := range in.streams { // ascending, so best-fit order matches the recording
		if s == 0 {
			streams[s] = acl.DefaultStream
			continue
		}
		if streams[s], err = dev.CreateStream(); err != nil {
			return nil, err
		}
	}
	var helpers helperStreams

	run := &whatif.Run{Name: name, Conf: cfg.Raw, Flavour: cfg.Flavour.String(), ExpandableSegments: cfg.ExpandableSegments}
	if cfg.MaxSplitSize != config.Unlimited {
		run.MaxSplitSize = cfg.MaxSplitSize
	}
	ptrs := make([]uint64, in.ids)
	var reserved, allocated int64
	var external int64 // workspace blocks: reserved and allocated outside the allocator
	run.Reserved = append(run.Reserved, whatif.Point{Index: -1})
	observe := func(entry int32) {
		st := a.Stats()
		r := st.ReservedBytes[allocator.StatAll].Current + external
		allocated = st.AllocatedBytes[allocator.StatAll].Current + external
		if r > run.PeakReserved {
			run.PeakReserved, run.PeakIndex = r, int(entry)
			run.CachedFreeAtPeak = r - allocated
		}
		if r == reserved {
			return
		}
		reserved = r
		c := &run.Reserved
		if last := &(*c)[len(*c)-1]; last.Index == int(entry) {
			last.Bytes = r
		} else {
			*c = append(*c, whatif.Point{Index: int(entry), Bytes: r})
		}
	}
	oom := func(o *op, err error) error {
		var oe *allocator.OOMError
		if !errors.As(err, &oe) {
			return fmt.Errorf("%s: entry %d: %w", name, o.entry, err)
		}
		run.OOMs++
		if run.FirstOOM == nil {
			run.FirstOOM = &whatif.OOM{Index: int(o.entry), Size: o.size, Message: oe.Error(), Reserved: oe.Reserved + external, Allocated: oe.Allocated + external}
			if o.entry >= 0 {
				run.FirstOOM.TimeUS = in.entries[o.entry].TimeUS
			}
		}
		return nil
	}
	pad := int64(0)
	if cfg.Pad32 {
		pad = 32
	}

	var initAllocs, initFrees int64
	started := false
	for k := range in.ops {
		if k&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		o := &in.ops[k]
		if o.entry > in.until {
			break
		}
		if o.entry >= 0 && !started {
			st := a.Stats()
			initAllocs, initFrees, started = st.NumDeviceAlloc, st.NumDeviceFree, true
		}
		clock.Set(entryTime(o.entry))
		switch o.kind {
		case opAlloc:
			ptr, err := a.Malloc(o.size, streams[o.stream])
			if err != nil {
				if err := oom(o, err); err != nil {
					return nil, err
				}
				run.FailedAllocs++
			}
			ptrs[o.id] = ptr
			observe(o.at)
		case opFree:
			ptr := ptrs[o.id]
			if ptr == 0 {
				continue // its allocation failed in this run
			}
			ptrs[o.id] = 0
			if o.doneAt > o.entry+1 {
				if err := deferFree(dev, a, &helpers, ptr, o); err != nil {
					return nil, fmt.Errorf("%s: entry %d: %w", name, o.entry, err)
				}
			}
			if err := a.Free(ptr); err != nil {
				return nil, fmt.Errorf("%s: entry %d: %w", name, o.entry, err)
			}
		case opExternal:
			// The workspace allocator's block takes device memory for good;
			// a device too small for it shows in the runs' OOMs.
			if _, err := dev.MallocAlign32(o.size, acl.HugeFirst); err != nil {
				run.OOMs++
				if run.FirstOOM == nil {
					run.FirstOOM = &whatif.OOM{Index: int(o.entry), Size: o.size, Message: "workspace block: " + err.Error()}
				}
			}
			external += o.size
			observe(o.at)
		case opEmptyCache:
			if err := a.EmptyCache(); err != nil {
				return nil, fmt.Errorf("%s: entry %d: %w", name, o.entry, err)
			}
			observe(o.at)
		case opOOM:
			// The oom entry's size is the rounded request (pad included).
			size := o.size
			if size > pad {
				size -= pad
			}
			ptr, err := a.Malloc(size, streams[o.stream])
			if err != nil {
				if err := oom(o, err); err != nil {
					return nil, err
				}
			} else {
				run.RecordedOOMsFit++
				observe(o.at)
				if err := a.Free(ptr); err != nil {
					return nil, fmt.Errorf("%s: entry %d: %w", name, o.entry, err)
				}
				continue
			}
			observe(o.at)
		}
	}
	st := a.Stats()
	if !started { // the trace added nothing to the initial state
		initAllocs, initFrees = st.NumDeviceAlloc, st.NumDeviceFree
	}
	run.SegmentAllocs = st.NumDeviceAlloc - initAllocs
	run.SegmentFrees = st.NumDeviceFree - initFrees
	run.PeakAllocated = st.AllocatedBytes[allocator.StatAll].Peak + external
	run.AllocRetries = st.NumAllocRetries
	run.FinalReserved = st.ReservedBytes[allocator.StatAll].Current + external
	if run.PeakReserved > 0 {
		run.CachedFreeFraction = float64(run.CachedFreeAtPeak) / float64(run.PeakReserved)
	}
	return run, nil
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
