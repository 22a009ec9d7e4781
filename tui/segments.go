package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/npumon/npumon/allocator/snapshot"
)

// allocAtCmd finds, off the UI goroutine, when the selected block was
// allocated (allocAt).
func (p *segmentsPanel) allocAtCmd(c *paneCtx) tea.Cmd {
	b := p.seg.Block()
	if b == nil || !b.State.Active() {
		return nil
	}
	src, dev, cur, addr, tf := c.src, c.dev, c.cursor, b.Address, c.tf
	applied := c.applied // the cursor may stand inside a microsecond
	return func() tea.Msg {
		return allocAtMsg{dev: dev, addr: addr, cursor: cur, text: allocAt(src, dev, cur, applied, addr, tf)}
	}
}

// allocAt describes the newest alloc of addr among the first applied
// entries at or before cur, searching back at most 64Ki entries.
func allocAt(src Source, dev int, cur, applied int64, addr uint64, tf timeFmt) string {
	c := cur
	for scanned := 0; scanned < 1<<16; {
		evs := src.EventsAround(dev, c, 4096, 0)
		for i := len(evs) - 1; i >= 0; i-- {
			e := &evs[i]
			if e.Time <= cur && e.Seq < applied && e.Action == snapshot.ActionAlloc && e.Addr == addr {
				return fmt.Sprintf("at %s (entry %d)", tf.full(e.Time), e.Seq)
			}
		}
		if len(evs) == 0 {
			break
		}
		scanned += len(evs)
		nc := evs[0].Time - 1
		if nc >= c || evs[0].Seq == 0 {
			break
		}
		c = nc
	}
	return "before the first recorded entry (or out of the searched range)"
}

// setAllocAt keeps when the block at addr was allocated (allocAtMsg);
// clearAllocAt drops it (the state moved).
func (p *segmentsPanel) setAllocAt(addr uint64, text string) { p.allocAt, p.allocK = text, addr }
func (p *segmentsPanel) clearAllocAt()                       { p.allocAt = "" }

// allocAtText is the selected block's allocation time, once looked up.
func (p *segmentsPanel) allocAtText() string {
	if b := p.seg.Block(); b != nil && b.Address == p.allocK {
		return p.allocAt
	}
	return ""
}
