package explain

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/frames"
)

// MaxJobGap is the longest time between the ends of two files still taken
// for one job: a week (a long training run dumps over days, not months).
const MaxJobGap = 7 * 24 * time.Hour

// DiffWarnings says, one line each, why two files compared by DiffDevices
// (a as from, b as to) do not look like one job, and whether the diff runs
// backwards. A snapshot carries no job id, so "not one job" is decided from
// what it does carry (docs/explain.md, diff):
//
//   - the process: both file names carry a pid (pidOf, classify.PID) and
//     they differ;
//   - the device compared differs;
//   - the allocator: one is torch_npu's and the other PyTorch's CUDA
//     allocator, or both record their settings and those differ;
//   - time: both traces have times and their ends lie more than MaxJobGap
//     apart;
//   - nothing shared: no segment address of one device is an address of the
//     other, and no user frame (outside lib, the library frames) of one
//     file's stacks is in the other's (or neither has one).
//
// It runs backwards when both have times and b's trace ends before a's.
// nil when nothing is wrong.
func DiffWarnings(a, b *Device, pidOf func(string) (int, bool), lib *regexp.Regexp) []string {
	an, bn := filepath.Base(a.Capture.Path), filepath.Base(b.Capture.Path)
	var why []string
	if pa, ok := pidOf(a.Capture.Path); ok {
		if pb, ok := pidOf(b.Capture.Path); ok && pa != pb {
			why = append(why, fmt.Sprintf("pid %d vs %d", pa, pb))
		}
	}
	if a.Timeline.Device != b.Timeline.Device {
		why = append(why, fmt.Sprintf("device %d vs %d", a.Timeline.Device, b.Timeline.Device))
	}
	sa, sb := a.Capture.Snapshot, b.Capture.Snapshot
	switch {
	case sa.TorchNPU != sb.TorchNPU:
		why = append(why, fmt.Sprintf("allocator %s vs %s", flavour(sa), flavour(sb)))
	case sa.Settings != nil && sb.Settings != nil && settingsKey(sa.Settings) != settingsKey(sb.Settings):
		why = append(why, fmt.Sprintf("allocator settings %q vs %q", settingsKey(sa.Settings), settingsKey(sb.Settings)))
	}
	ea, oka := lastTime(a.Timeline.Entries)
	eb, okb := lastTime(b.Timeline.Entries)
	gap := time.Duration(eb-ea) * time.Microsecond
	if oka && okb && (gap > MaxJobGap || -gap > MaxJobGap) {
		why = append(why, fmt.Sprintf("their ends %s apart", Span(max(gap, -gap))))
	}
	if !sharesAddress(a, b) && !sharesUserFrame(sa, sb, lib) {
		why = append(why, "no segment address and no user frame in common")
	}
	var out []string
	if len(why) > 0 {
		out = append(out, fmt.Sprintf("%s and %s do not look like one job (%s): the diff compares unrelated allocations",
			an, bn, strings.Join(why, ", ")))
	}
	if oka && okb && eb < ea {
		out = append(out, fmt.Sprintf("%s (to) ends %s before %s (from): the diff runs backwards, born and freed are swapped (give the older file first)",
			bn, Span(-gap), an))
	}
	return out
}

// MomentsWarning is the line for a diff of one file whose --to moment comes
// before its --from moment; "" when it does not.
func MomentsWarning(d *Diff) string {
	if d.To.At.Index >= d.From.At.Index {
		return ""
	}
	return fmt.Sprintf("--to %s (after entry %d) comes before --from %s (after entry %d): the diff runs backwards, born and freed are swapped",
		d.To.At.Spec, d.To.At.Index, d.From.At.Spec, d.From.At.Index)
}

func flavour(s *snapshot.Snapshot) string {
	if s.TorchNPU {
		return "torch_npu"
	}
	return "PyTorch CUDA"
}

// settingsKey is what of an allocator's settings a job keeps from one dump
// to the next: its configuration string, else the values it sets.
func settingsKey(s *snapshot.Settings) string {
	if s.Conf != "" {
		return s.Conf
	}
	return fmt.Sprintf("max_split_size %d, expandable_segments %v, garbage_collection_threshold %g",
		s.MaxSplitSize, s.ExpandableSegments, s.GarbageCollectionThreshold)
}

// lastTime is the time of the last entry with one.
func lastTime(es []snapshot.TraceEntry) (int64, bool) {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].TimeUS != 0 {
			return es[i].TimeUS, true
		}
	}
	return 0, false
}

// sharesAddress reports whether a segment address of a's device (at the
// start of its trace or in it) is one of b's.
func sharesAddress(a, b *Device) bool {
	addrs := map[uint64]bool{}
	for _, s := range segmentAddrs(a) {
		addrs[s] = true
	}
	for _, s := range segmentAddrs(b) {
		if addrs[s] {
			return true
		}
	}
	return false
}

func segmentAddrs(d *Device) []uint64 {
	var out []uint64
	for i := range d.Timeline.Initial {
		out = append(out, d.Timeline.Initial[i].Address)
	}
	for i := range d.Capture.Snapshot.Segments {
		if s := &d.Capture.Snapshot.Segments[i]; s.Device == d.Timeline.Device {
			out = append(out, s.Address)
		}
	}
	for i := range d.Timeline.Entries {
		if e := &d.Timeline.Entries[i]; e.Action == snapshot.ActionSegmentAlloc || e.Action == snapshot.ActionSegmentMap {
			out = append(out, e.Addr)
		}
	}
	return out
}

// sharesUserFrame reports whether a user frame (frames.User by the library
// paths lib, nil: the default) of a's stacks is in b's; false when either
// has none.
func sharesUserFrame(a, b *snapshot.Snapshot, lib *regexp.Regexp) bool {
	rules := &frames.Rules{Library: lib}
	user := map[snapshot.Frame]bool{}
	for _, st := range a.Stacks {
		for _, f := range st {
			if rules.Class(f) == frames.User {
				user[f] = true
			}
		}
	}
	for _, st := range b.Stacks {
		for _, f := range st {
			if user[f] {
				return true
			}
		}
	}
	return false
}

// Span is a duration as a person reads a gap between dumps: "10 months",
// "3 days", "5 h", "40 min", "12 s".
func Span(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d >= 60*day:
		return fmt.Sprintf("%d months", int(d/(30*day)))
	case d >= 2*day:
		return fmt.Sprintf("%d days", int(d/day))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d h", int(d/time.Hour))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d s", int(d/time.Second))
}
