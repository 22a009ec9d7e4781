package replay

import (
	"fmt"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
)

// MaxPlausibleSize is the largest segment or block size taken as real
// (1 PiB, thousands of times any device's memory): a 2^63 size is a
// corrupt file, not a device.
const MaxPlausibleSize = 1 << 50

// Implausible lists the values of a decoded snapshot no allocator can
// produce: a negative or impossibly large size, a block outside its
// segment or overlapping another, segments of one device overlapping, a
// segment whose blocks do not add up to it. First names the first
// offender (by segment index, device and address); Count is how many
// were found. Every figure computed from such a snapshot is suspect.
type Implausible struct {
	First string
	Count int
}

func (p *Implausible) Error() string {
	if p.Count > 1 {
		return fmt.Sprintf("%s (and %d more implausible values)", p.First, p.Count-1)
	}
	return p.First
}

// Sanity checks s; nil means nothing implausible was found.
func Sanity(s *snapshot.Snapshot) *Implausible {
	var p *Implausible
	bad := func(format string, a ...any) {
		if p == nil {
			p = &Implausible{First: fmt.Sprintf(format, a...)}
		}
		p.Count++
	}
	type span struct {
		start, end uint64
		seg        int
	}
	perDevice := map[int][]span{}
	for i := range s.Segments {
		g := &s.Segments[i]
		name := fmt.Sprintf("segment %d (device %d, address 0x%x)", i, g.Device, g.Address)
		if g.TotalSize < 0 || g.TotalSize > MaxPlausibleSize {
			bad("%s: total_size %d is impossible", name, g.TotalSize)
			continue
		}
		if g.Address+uint64(g.TotalSize) < g.Address {
			bad("%s: address + total_size %d passes 2^64", name, g.TotalSize)
			continue
		}
		perDevice[g.Device] = append(perDevice[g.Device], span{g.Address, g.End(), i})
		var sum, allocated, active int64
		blocks := make([]span, 0, len(g.Blocks))
		for j := range g.Blocks {
			b := &g.Blocks[j]
			if b.Size < 0 || b.Size > MaxPlausibleSize {
				bad("%s: block %d size %d is impossible", name, j, b.Size)
				continue
			}
			end := b.Address + uint64(b.Size)
			if b.Address < g.Address || end > g.End() || end < b.Address {
				bad("%s: block %d [0x%x, +%d) lies outside its segment [0x%x, +%d)", name, j, b.Address, b.Size, g.Address, g.TotalSize)
				continue
			}
			blocks = append(blocks, span{b.Address, end, j})
			sum += b.Size
			switch b.State {
			case snapshot.StateActiveAllocated:
				allocated += b.Size
				active += b.Size
			case snapshot.StateActivePendingFree:
				active += b.Size
			}
		}
		sort.Slice(blocks, func(a, b int) bool { return blocks[a].start < blocks[b].start })
		for k := 1; k < len(blocks); k++ {
			if blocks[k].start < blocks[k-1].end {
				bad("%s: blocks %d and %d overlap at 0x%x", name, blocks[k-1].seg, blocks[k].seg, blocks[k].start)
			}
		}
		if len(g.Blocks) > 0 && sum > g.TotalSize {
			bad("%s: its blocks add up to %d bytes, more than its total_size %d", name, sum, g.TotalSize)
		}
		if g.AllocatedSize > g.TotalSize || g.ActiveSize > g.TotalSize || g.AllocatedSize < 0 || g.ActiveSize < 0 {
			bad("%s: allocated_size %d / active_size %d do not fit its total_size %d", name, g.AllocatedSize, g.ActiveSize, g.TotalSize)
		}
	}
	devs := make([]int, 0, len(perDevice))
	for d := range perDevice {
		devs = append(devs, d)
	}
	sort.Ints(devs)
	for _, d := range devs {
		sp := perDevice[d]
		sort.Slice(sp, func(a, b int) bool { return sp[a].start < sp[b].start })
		for k := 1; k < len(sp); k++ {
			if sp[k].start < sp[k-1].end {
				bad("segments %d and %d of device %d overlap at 0x%x", sp[k-1].seg, sp[k].seg, d, sp[k].start)
			}
		}
	}
	return p
}
