package replay

import (
	"fmt"

	"github.com/npumon/npumon/allocator/bytesize"
)

// CheckGrowth compares the peaks of st with those of a baseline capture of
// the same job, device by device, and returns one line per peak (active,
// reserved) that grew by more than maxPct percent. Devices the baseline
// lacks are not compared.
func CheckGrowth(st, base *Stats, maxPct float64) []string {
	old := map[int]*DeviceStats{}
	for i := range base.Devices {
		old[base.Devices[i].Device] = &base.Devices[i]
	}
	var out []string
	for i := range st.Devices {
		d := &st.Devices[i]
		b := old[d.Device]
		if b == nil {
			continue
		}
		for _, p := range []struct {
			name     string
			now, was int64
		}{{"peak active", d.PeakActiveBytes, b.PeakActiveBytes}, {"peak reserved", d.PeakReservedBytes, b.PeakReservedBytes}} {
			if g, grew := growth(p.now, p.was); grew && g > maxPct {
				out = append(out, fmt.Sprintf("device %d: %s %s grew %.1f%% over the baseline's %s (--max-growth %g%%)",
					d.Device, p.name, bytesize.Exact(p.now), g, bytesize.Exact(p.was), maxPct))
			}
		}
	}
	return out
}

// growth is the percentage now exceeds was by; a growth from 0 counts as
// infinite.
func growth(now, was int64) (float64, bool) {
	if now <= was {
		return 0, false
	}
	if was <= 0 {
		return float64(1 << 62), true
	}
	return 100 * float64(now-was) / float64(was), true
}
