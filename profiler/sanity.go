package profiler

import (
	"fmt"
	"strings"
	"time"
)

// MaxPlausibleSpan is the longest time one profiler session's ops and
// memory records plausibly cover: three days. A profiled run is minutes to
// hours; a database whose rows span months mixes sessions (or carries a
// corrupt time), and every per-time figure across it is suspect.
const MaxPlausibleSpan = 72 * time.Hour

// Sanity lists what is implausible in profiler data, one line each, as
// replay.Sanity does for a snapshot: a time span longer than
// MaxPlausibleSpan, and op names that are dtype lists ("DT_BF16;DT_BF16",
// what a row names when its string ids point into another table or
// session). Reading still succeeds; ReadDir adds the lines to Warnings.
func Sanity(d *Data) []string {
	var out []string
	var lo, hi int64
	seen := false
	span := func(a, b int64) {
		if a == 0 && b == 0 {
			return
		}
		if !seen || a < lo {
			lo = a
		}
		if !seen || b > hi {
			hi = b
		}
		seen = true
	}
	for i := range d.Ops {
		span(d.Ops[i].StartNS, d.Ops[i].EndNS)
	}
	for i := range d.Memory {
		span(d.Memory[i].TimeNS, d.Memory[i].TimeNS)
	}
	if seen && time.Duration(hi-lo) > MaxPlausibleSpan {
		out = append(out, fmt.Sprintf("%s: implausible: its ops and memory records span %.0f hours (%s → %s), more than %.0f hours: sessions mixed? figures across it are suspect",
			d.Path, time.Duration(hi-lo).Hours(), time.Unix(0, lo).UTC().Format(time.DateTime), time.Unix(0, hi).UTC().Format(time.DateTime), MaxPlausibleSpan.Hours()))
	}
	n, first := 0, ""
	for i := range d.Ops {
		if IsValueName(d.Ops[i].Name) {
			if n == 0 {
				first = d.Ops[i].Name
			}
			n++
		}
	}
	if n > 0 {
		if len(first) > 40 {
			first = first[:40] + "…"
		}
		out = append(out, fmt.Sprintf("%s: implausible: %d of %d op names are dtype or shape lists or numbers (%q), not op names: string ids of another table or session?",
			d.Path, n, len(d.Ops), first))
	}
	return out
}

// dtypeWords are the dtype names CANN and torch_npu list without the DT_
// prefix.
var dtypeWords = map[string]bool{"FLOAT": true, "FLOAT16": true, "FLOAT32": true, "FLOAT64": true, "DOUBLE": true,
	"BF16": true, "BFLOAT16": true, "HALF": true, "BOOL": true, "INT4": true, "INT8": true, "INT16": true, "INT32": true,
	"INT64": true, "UINT8": true, "UINT16": true, "UINT32": true, "UINT64": true, "COMPLEX64": true, "COMPLEX128": true,
	"STRING": true, "UNDEFINED": true}

// IsValueName reports whether an op name is a value rather than a name: a
// list of dtypes ("DT_BF16;FLOAT;INT64", "INT64;INT64"), a shape list
// ("1,1,2048,2048;") or a number ("\"1676480000\""), what a row names when
// its string id points at another column's strings.
func IsValueName(name string) bool {
	name = strings.TrimSpace(name)
	if name == "" {
		return false
	}
	if v := strings.Trim(name, `"`); v != "" && strings.Trim(v, "0123456789,; ") == "" && strings.ContainsAny(v, "0123456789") {
		return true // a number or a shape list
	}
	parts := strings.Split(strings.TrimSuffix(name, ";"), ";")
	if len(parts) < 2 && !strings.HasPrefix(name, "DT_") {
		return false // one word: a name unless it is DT_…
	}
	for _, p := range parts {
		w := strings.TrimPrefix(p, "DT_")
		if !dtypeWords[w] && (w == p || !isUpperWord(w)) {
			return false
		}
	}
	return true
}

func isUpperWord(w string) bool {
	for _, c := range w {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return w != ""
}
