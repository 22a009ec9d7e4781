package sim

import (
	"fmt"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
)

// Headroom is the share of the recorded peak reserved bytes added on top
// of it when the device size has to be guessed.
const Headroom = 0.125

// prepareDevice builds device's input sequence, the recorded figures and
// the simulated device size.
func prepareDevice(s *snapshot.Snapshot, device int, deviceMem int64, base config.Config) (*whatif.DeviceResult, *input, error) {
	tl, err := replay.NewTimelineWithoutInitial(s, device)
	if err != nil {
		return nil, nil, err
	}
	dr := &whatif.DeviceResult{Device: device, HasTimestamps: s.HasTimestamps()}

	rec := &dr.Recorded
	reserved := tl.ReservedAtStart
	rec.Reserved = []whatif.Point{{Index: -1, Bytes: reserved}}
	rec.PeakReserved, rec.PeakIndex = reserved, -1
	active := tl.ActiveAtStart
	rec.PeakActive = active
	var oomReserved, oomFree int64
	for i := range tl.Entries {
		e := &tl.Entries[i]
		active += replay.ActiveDelta(e)
		rec.PeakActive = max(rec.PeakActive, active)
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			if i == 0 || tl.Entries[i-1].Action != snapshot.ActionWorkspaceSnapshot || tl.Entries[i-1].Addr != e.Addr {
				rec.SegmentAllocs++ // a workspace block's segment is not the caching allocator's
			}
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			rec.SegmentFrees++
		case snapshot.ActionOOM:
			rec.OOMs++
			if rec.FirstOOM == nil {
				rec.FirstOOM = &whatif.OOM{Index: i, TimeUS: e.TimeUS, Size: e.Size}
				oomReserved, oomFree = reserved, e.DeviceFree
			}
		}
		if d := replay.ReservedDelta(e); d != 0 {
			reserved += d
			rec.Reserved = append(rec.Reserved, whatif.Point{Index: i, Bytes: reserved})
			if reserved > rec.PeakReserved {
				rec.PeakReserved, rec.PeakIndex = reserved, i
			}
		}
	}

	switch {
	// A device_free of 0 is a reading too: the device was full.
	case rec.FirstOOM != nil && oomFree >= 0 && oomReserved >= 0 && oomReserved+oomFree > 0:
		dr.DeviceMem = oomReserved + oomFree
		dr.DeviceMemSource = fmt.Sprintf("from the oom entry %d: %s reserved + %s free on the device",
			rec.FirstOOM.Index, bytesize.Torch(oomReserved), bytesize.Torch(oomFree))
	default:
		peak := max(rec.PeakReserved, rec.PeakActive)
		head := config.RoundUp(int64(float64(peak)*Headroom), 2*config.MiB)
		dr.DeviceMem = max(peak+head, 2*config.MiB)
		why := "no oom entry"
		if rec.FirstOOM != nil {
			why = "the oom entry reports no free device bytes"
		}
		dr.DeviceMemSource = fmt.Sprintf("guessed: recorded peak reserved %s + %g%% headroom (no --device-mem, %s)",
			bytesize.Torch(peak), Headroom*100, why)
	}

	// acl's devices hold at least one 2 MiB page.
	dr.DeviceMem = max(dr.DeviceMem, 2*config.MiB)
	dr.FileDeviceMem, dr.FileDeviceMemSource = dr.DeviceMem, dr.DeviceMemSource
	if deviceMem > 0 {
		dr.DeviceMem, dr.DeviceMemSource = max(deviceMem, 2*config.MiB), "given (--device-mem)"
	}

	// Only a device without room forces a release inside a malloc when the
	// baseline has neither max_split_size nor garbage collection.
	var forced func(before, seg int64) bool
	if base.MaxSplitSize == config.Unlimited && base.GCThreshold == 0 {
		forced = func(before, seg int64) bool { return before+seg > dr.DeviceMem }
	}
	empties := emptyCaches(tl.Entries, forced, func(i int) int64 { return whatif.At(rec.Reserved, i) })
	in := buildInput(tl, empties)
	dr.Input = in.stats
	return dr, in, nil
}

// fidelity compares two reserved curves at the start and after every entry
// that is not inside a malloc (see input.inside).
func fidelity(rec, sim []whatif.Point, in *input, peak int64) whatif.Fidelity {
	var f whatif.Fidelity
	var sum float64
	ri, si := 0, 0
	var rv, sv int64
	for i := -1; i < len(in.entries); i++ {
		for ri < len(rec) && rec[ri].Index <= i {
			rv = rec[ri].Bytes
			ri++
		}
		for si < len(sim) && sim[si].Index <= i {
			sv = sim[si].Bytes
			si++
		}
		if i >= 0 && in.inside[i] {
			continue
		}
		d := rv - sv
		if d < 0 {
			d = -d
		}
		f.Points++
		f.MaxAbsDiff = max(f.MaxAbsDiff, d)
		sum += float64(d)
	}
	f.MeanAbsDiff = sum / float64(f.Points)
	if peak > 0 {
		f.Relative = f.MeanAbsDiff / float64(peak)
	}
	return f
}
