package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/npumon/npumon/acl"
)

// maxDevices bounds --devices; real hosts carry at most 16 NPUs.
const maxDevices = 64

// simDevices lists the devices of a fresh simulated runtime (devices --sim).
func simDevices(n int) ([]acl.DeviceInfo, error) {
	if n < 1 || n > maxDevices {
		return nil, usageError{fmt.Errorf("--devices must be between 1 and %d, got %d", maxDevices, n)}
	}
	rt := acl.NewRuntime(acl.Config{Devices: make([]acl.DeviceSpec, n)})
	infos := make([]acl.DeviceInfo, 0, n)
	for id := range rt.GetDeviceCount() {
		d, err := rt.Device(id)
		if err != nil {
			return nil, err
		}
		infos = append(infos, d.Info())
	}
	return infos, nil
}

// deviceJSON is the --json shape of one simulated device (devices --sim).
type deviceJSON struct {
	ID            int    `json:"id"`
	Name          string `json:"name"`
	HBMTotalBytes int64  `json:"hbm_total_bytes"`
	HBMUsedBytes  int64  `json:"hbm_used_bytes"`
	Streams       int    `json:"streams"`
}

func writeDevicesJSON(w io.Writer, infos []acl.DeviceInfo) error {
	out := make([]deviceJSON, len(infos))
	for i, in := range infos {
		out[i] = deviceJSON{in.ID, in.Name, in.HBMTotal, in.HBMUsed, in.Streams}
	}
	return writeJSON(w, out)
}

// writeDevicesTable draws the npu-smi style box table. HBM figures are in
// MiB, rounded up for used (so any use shows) and down for total.
func writeDevicesTable(w io.Writer, infos []acl.DeviceInfo) {
	header := []string{"NPU", "Name", "Health", "HBM-Usage(MB)", "Streams"}
	rows := make([][]string, len(infos))
	for i, in := range infos {
		used := (in.HBMUsed + acl.MiB - 1) / acl.MiB
		rows[i] = []string{
			fmt.Sprint(in.ID), in.Name, "OK",
			fmt.Sprintf("%d / %d", used, in.HBMTotal/acl.MiB),
			fmt.Sprint(in.Streams),
		}
	}
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, cell := range r {
			width[i] = max(width[i], len(cell))
		}
	}
	title := fmt.Sprintf("npumon %s    simulated ACL runtime, %d device(s)", version, len(infos))
	inner := -3 // the table's inner width: cells, their padding and the bars between
	for _, wd := range width {
		inner += wd + 3
	}
	if inner < len(title) {
		width[1] += len(title) - inner // widen Name so the title fits
		inner = len(title)
	}
	rule := func(fill string) string {
		var b strings.Builder
		b.WriteString("+")
		for _, wd := range width {
			b.WriteString(strings.Repeat(fill, wd+2) + "+")
		}
		return b.String()
	}
	line := func(cells []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, cell := range cells {
			fmt.Fprintf(&b, " %-*s |", width[i], cell)
		}
		return b.String()
	}
	top := "+" + strings.Repeat("-", inner+2) + "+"
	fmt.Fprintln(w, top)
	fmt.Fprintf(w, "| %-*s |\n", inner, title)
	fmt.Fprintln(w, rule("-"))
	fmt.Fprintln(w, line(header))
	fmt.Fprintln(w, rule("="))
	for _, r := range rows {
		fmt.Fprintln(w, line(r))
		fmt.Fprintln(w, rule("-"))
	}
}
