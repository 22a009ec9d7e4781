package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/tui/theme"
)

// rateWindow is how far back the loading rate looks: a moving average over
// the last few seconds, steady enough to read, quick to follow a change.
const rateWindow = 5 * time.Second

// loadSample is the loader's progress at one tick.
type loadSample struct {
	t              time.Time
	entries, bytes int64
}

// sample records the progress at now (the UI's clock, Options.Now, so a
// test's rate and ETA are exact); the oldest sample kept is the newest one
// at least rateWindow old, the base of the rate.
func (l *loader) sample(now time.Time) {
	p := l.progress()
	s := loadSample{t: now, entries: p.Entries, bytes: p.BytesDone}
	if n := len(l.samples); n > 0 && !now.After(l.samples[n-1].t) {
		l.samples[n-1].entries, l.samples[n-1].bytes = s.entries, s.bytes // same instant: the newer figures
		return
	}
	l.samples = append(l.samples, s)
	drop := 0
	for drop+1 < len(l.samples) && now.Sub(l.samples[drop+1].t) >= rateWindow {
		drop++
	}
	l.samples = append(l.samples[:0], l.samples[drop:]...)
}

// rate is entries and bytes per second over the samples kept; ok is false
// until two samples are apart in time.
func (l *loader) rate() (entries, bytes float64, ok bool) {
	if len(l.samples) < 2 {
		return 0, 0, false
	}
	a, b := l.samples[0], l.samples[len(l.samples)-1]
	dt := b.t.Sub(a.t).Seconds()
	if dt <= 0 {
		return 0, 0, false
	}
	return float64(b.entries-a.entries) / dt, float64(b.bytes-a.bytes) / dt, true
}

// eta is the time left at the current rate: by bytes when the total is
// known, else by entries; ok is false when neither can say.
func (l *loader) eta(p Progress) (time.Duration, bool) {
	re, rb, ok := l.rate()
	if !ok {
		return 0, false
	}
	var left float64
	switch {
	case p.BytesTotal > 0 && rb > 0:
		left = float64(max(0, p.BytesTotal-p.BytesDone)) / rb
	case p.EntriesTotal > 0 && re > 0:
		left = float64(max(0, p.EntriesTotal-p.Entries)) / re
	default:
		return 0, false
	}
	return time.Duration(left * float64(time.Second)), true
}

// progressLine is the loader's progress in w columns (after its stage
// when labelled): a bar of the bytes
// done, the percentage, bytes, entries, rate and ETA. What does not fit
// goes, least useful first; the bar shrinks to 10 cells, then goes too.
func (m *Model) progressLine(w int, labelled bool) string {
	th := m.th
	p := m.ld.progress()
	frac, known := p.Fraction()
	pct := ""
	if known {
		pct = fmt.Sprintf("%.0f%%", 100*frac)
	}
	bytesText := ""
	if p.BytesTotal > 0 {
		bytesText = bytesize.Format(p.BytesDone) + " of " + bytesize.Format(p.BytesTotal)
	} else if p.BytesDone > 0 {
		bytesText = bytesize.Format(p.BytesDone) + " read"
	}
	ent := countText(float64(p.Entries)) + " entries"
	if p.EntriesTotal > 0 {
		ent = countText(float64(p.Entries)) + " of " + countText(float64(p.EntriesTotal)) + " entries"
	}
	if re, _, ok := m.ld.rate(); ok {
		ent += " at " + countText(re) + "/s"
	}
	eta := ""
	if d, ok := m.ld.eta(p); ok {
		eta = "ETA " + etaText(d)
	}
	label := "loading"
	switch {
	case !labelled:
		label = ""
	case p.Stage != "":
		label = p.Stage
	}
	// When narrow, the label goes first, then the bytes, then the bar.
	for {
		var parts []string
		for _, s := range []string{pct, bytesText, ent, eta} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		rest := strings.Join(parts, "  ")
		head := ""
		if label != "" {
			head = th.Mode.Render(label) + " "
		}
		bar := 0
		if known {
			bar = min(30, w-theme.Width(head)-theme.Width(rest)-3) // "[", "]" and a space
		}
		switch {
		case !known:
			return head + rest
		case bar >= 10:
			n := int(frac*float64(bar) + 0.5)
			done, todo := "", ""
			if n > 0 {
				done = th.Allocated.Render(strings.Repeat(string(th.G.Allocated), n))
			}
			if n < bar {
				todo = th.Dim.Render(strings.Repeat(string(th.G.Free), bar-n))
			}
			return head + "[" + done + todo + "] " + rest
		case label != "":
			label = ""
		case bytesText != "":
			bytesText = ""
		default:
			known = false // the percentage stays
		}
	}
}

// etaText is a duration to the second: 42s, 3m05s, 1h02m.
func etaText(d time.Duration) string {
	s := int64((d + time.Second/2) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
}
