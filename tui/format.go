package tui

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/store"
)

// fmtDelta formats a signed byte change with an explicit sign.
func fmtDelta(n int64) string {
	if n > 0 {
		return "+" + bytesize.Format(n)
	}
	if n == 0 {
		return "0 B"
	}
	return bytesize.Format(n)
}

// fmtDurUS formats a duration given in microseconds compactly.
func fmtDurUS(us int64) string {
	neg := us < 0
	if neg {
		us = -us
	}
	var s string
	switch {
	case us < 1000:
		s = fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		s = fmt.Sprintf("%.2fms", float64(us)/1e3)
	case us < 60_000_000:
		s = fmt.Sprintf("%.3fs", float64(us)/1e6)
	case us < 3600_000_000:
		s = fmt.Sprintf("%dm%06.3fs", us/60_000_000, float64(us%60_000_000)/1e6)
	default:
		s = fmt.Sprintf("%dh%02dm%02ds", us/3600_000_000, us/60_000_000%60, us/1_000_000%60)
	}
	if neg {
		return "-" + s
	}
	return s
}

// timeFmt turns cursor values into text for one device's time base.
type timeFmt struct {
	base     store.TimeBase
	first    int64
	relative bool
	loc      *time.Location
	span     int64 // timeline window span, for axis label precision
}

// clock formats t as local wall-clock time with milliseconds (epoch base),
// as an offset from the first entry (relative), or as a sequence number.
func (f timeFmt) clock(t int64) string {
	if f.base == store.TimeSequence {
		return "#" + strconv.FormatInt(t, 10)
	}
	if f.relative {
		return relText(t - f.first)
	}
	return time.UnixMicro(t).In(f.loc).Format("15:04:05.000")
}

// full formats t with the date as well (header only).
func (f timeFmt) full(t int64) string {
	if f.base == store.TimeSequence || f.relative {
		return f.clock(t)
	}
	return time.UnixMicro(t).In(f.loc).Format("2006-01-02 15:04:05.000")
}

// axis formats a timeline axis value: x is seconds (epoch base) or entries
// (sequence base) since the first entry.
func (f timeFmt) axis(x float64) string {
	if f.base == store.TimeSequence {
		return "#" + strconv.FormatInt(int64(x+0.5)+f.first, 10)
	}
	t := f.first + int64(math.Round(x*1e6))
	if f.relative || f.span > 0 && f.span < 100_000 {
		// offsets as the header writes them (sub-100 ms windows too: clock
		// labels would all read the same millisecond)
		return relText(t - f.first)
	}
	layout := "15:04:05"
	if f.span > 0 && f.span < 60_000_000 {
		layout = "04:05.000"
	}
	return time.UnixMicro(t).In(f.loc).Format(layout)
}

// relText is an offset from the first entry with its sign: "+1.24ms", and
// "-1µs" for the initial state just before it.
func relText(us int64) string {
	if us < 0 {
		return fmtDurUS(us)
	}
	return "+" + fmtDurUS(us)
}
