package npusmi

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Usages is one chip's block of `npu-smi info -t usages -i N`. Every figure
// is a percentage except the capacities (MB = MiB); a key npu-smi did not
// print is absent from Pct.
type Usages struct {
	NPU           int
	Chip          int // "Chip ID", 0 when not printed
	HBMCapacityMB int64
	HBMOK         bool
	DDRCapacityMB int64
	DDROK         bool
	// Pct holds the "… Rate(%)" and "…(%)" lines by their name as printed,
	// e.g. "HBM Usage Rate", "Aicore Usage Rate", "NPU Utilization".
	Pct map[string]int
}

// ParseUsages parses `npu-smi info -t usages -i N`: "Key : value" lines,
// one block per chip (a block starts at "NPU ID" and is closed by "Chip ID").
func ParseUsages(b []byte) ([]Usages, error) {
	var out []Usages
	var cur *Usages
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	line := 0
	bad := func(text, msg string) error {
		t := strings.TrimSpace(text)
		if len(t) > 80 {
			t = t[:80]
		}
		return fmt.Errorf("npu-smi info -t usages: line %d: %s: %q", line, msg, t)
	}
	npu := -1
	for sc.Scan() {
		line++
		if line > MaxLines {
			return nil, bad(sc.Text(), "too many lines")
		}
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		k, v, ok := strings.Cut(text, ":")
		if !ok {
			return nil, bad(text, "want \"Key : value\"")
		}
		k, v = squeeze(k), strings.TrimSpace(v)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			if absent(v) {
				continue
			}
			return nil, bad(text, "value is not a non-negative whole number")
		}
		switch {
		case k == "NPU ID":
			npu = int(n)
			out = append(out, Usages{NPU: npu, Pct: map[string]int{}})
			cur = &out[len(out)-1]
			continue
		case cur == nil && npu >= 0:
			// a second chip's block after a Chip ID closed the first
			out = append(out, Usages{NPU: npu, Pct: map[string]int{}})
			cur = &out[len(out)-1]
		case cur == nil:
			return nil, bad(text, "a value before \"NPU ID\"")
		}
		switch {
		case k == "Chip ID":
			cur.Chip = int(n)
			cur = nil // the block is complete
		case k == "Chip Count":
		case k == "HBM Capacity(MB)":
			cur.HBMCapacityMB, cur.HBMOK = n, true
		case k == "DDR Capacity(MB)":
			cur.DDRCapacityMB, cur.DDROK = n, true
		case strings.HasSuffix(k, "(%)"):
			if n > 100 {
				return nil, bad(text, "percentage above 100")
			}
			cur.Pct[strings.TrimSpace(strings.TrimSuffix(k, "(%)"))] = int(n)
		default:
			// other figures (page counts) are not used
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("npu-smi info -t usages: line %d: %s", line+1, lineErr(err))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("npu-smi info -t usages: no \"NPU ID\" line")
	}
	return out, nil
}
