package profiler

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/npumon/npumon/internal/safefile"
)

// TimeBase converts raw FRAMEWORK clock values to epoch nanoseconds
// (docs/reference/profiler-format.md §3).
type TimeBase struct {
	SyscntEnable   bool    // raw values are system-counter ticks, else CLOCK_MONOTONIC_RAW ns
	FreqMHz        float64 // counter frequency when SyscntEnable
	StartCnt       int64   // counter value at start_trace
	StartMonotonic int64   // CLOCK_MONOTONIC_RAW ns at start_trace
	DiffNS         int64   // epoch ns − monotonic ns
	Source         string  // where the parameters came from
	Approximate    bool    // derived from this host's clocks while the run is live (LiveTimeBase)
}

// EpochNS converts a raw clock value exactly as torch_npu's analyser does:
// int((raw − start_cnt)·1000/freq) + start_monotonic + diff, or raw + diff.
func (tb *TimeBase) EpochNS(raw int64) int64 {
	mono := raw
	if tb.SyscntEnable {
		mono = int64(float64(raw-tb.StartCnt)*1000/tb.FreqMHz) + tb.StartMonotonic
	}
	return mono + tb.DiffNS
}

// RawFromEpochNS is the inverse for a monotonic-ns time base (used by the
// Recorder to place epoch-stamped allocator events on its raw clock).
func (tb *TimeBase) RawFromEpochNS(epoch int64) int64 {
	mono := epoch - tb.DiffNS
	if tb.SyscntEnable {
		return tb.StartCnt + int64(float64(mono-tb.StartMonotonic)*tb.FreqMHz/1000)
	}
	return mono
}

// ProfilerInfo is the part of profiler_info*.json npumon uses
// (docs/reference/profiler-format.md §4).
type ProfilerInfo struct {
	Config struct {
		CommonConfig struct {
			Activities []string `json:"activities"`
		} `json:"common_config"`
	} `json:"config"`
	StartInfo *struct {
		SyscntEnable   bool    `json:"syscnt_enable"`
		Freq           float64 `json:"freq"`
		StartCnt       int64   `json:"start_cnt"`
		StartMonotonic int64   `json:"start_monotonic"`
	} `json:"start_info"`
	EndInfo *struct {
		CollectionTimeEnd int64 `json:"collectionTimeEnd"`
		MonotonicTimeEnd  int64 `json:"MonotonicTimeEnd"`
	} `json:"end_info"`
	RankID *int `json:"rank_id"`
}

var profilerInfoRe = regexp.MustCompile(`^profiler_info(_\d+)?\.json$`)

// IsProfilerInfo reports whether a file named name in a profiler
// directory is its profiler_info*.json, the file torch_npu writes last
// when it finalises a run's FRAMEWORK data.
func IsProfilerInfo(name string) bool { return profilerInfoRe.MatchString(name) }

// findProfilerInfo returns the profiler_info[_rank].json of dir, or "".
func findProfilerInfo(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.IsDir() && profilerInfoRe.MatchString(e.Name()) {
			return filepath.Join(dir, e.Name())
		}
	}
	return ""
}

// ReadProfilerInfo parses a profiler_info*.json file.
func ReadProfilerInfo(path string) (*ProfilerInfo, error) {
	b, err := safefile.ReadFile(path, maxSmallFile)
	if err != nil {
		return nil, err
	}
	var pi ProfilerInfo
	if err := json.Unmarshal(b, &pi); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &pi, nil
}

// LoadTimeBase derives the time base of a finished *_ascend_pt directory from
// profiler_info and the CANN PROF_*/host files, in torch_npu's priority order
// (docs/reference/profiler-format.md §3.2). ok is false when the directory has
// no profiler_info yet (live run).
func LoadTimeBase(dir string) (tb TimeBase, ok bool, err error) {
	p := findProfilerInfo(dir)
	if p == "" {
		return tb, false, nil
	}
	pi, err := ReadProfilerInfo(p)
	if err != nil {
		return tb, false, err
	}
	tb.Source = filepath.Base(p)
	tb.FreqMHz = 100
	if si := pi.StartInfo; si != nil {
		tb.SyscntEnable = si.SyscntEnable
		if si.Freq > 0 {
			tb.FreqMHz = si.Freq
		}
		tb.StartCnt, tb.StartMonotonic = si.StartCnt, si.StartMonotonic
	}
	host := findHostDir(dir)
	if host != "" {
		if f, ok := readHostFreq(filepath.Join(host, "info.json")); ok {
			tb.FreqMHz = f
		}
		if cnt, mono, ok := readHostStartLog(filepath.Join(host, "host_start.log")); ok {
			tb.StartCnt, tb.StartMonotonic = cnt, mono
		}
		if d, ok := readStartInfoDiff(filepath.Join(host, "start_info")); ok && d != 0 {
			tb.DiffNS = d
			tb.Source += "+" + filepath.Base(filepath.Dir(host)) + "/host/start_info"
			return tb, true, nil
		}
	}
	if ei := pi.EndInfo; ei != nil {
		tb.DiffNS = ei.CollectionTimeEnd - ei.MonotonicTimeEnd
		return tb, true, nil
	}
	return tb, false, fmt.Errorf("%s: no end_info and no PROF_*/host/start_info: cannot place raw times in epoch", p)
}

var profDirRe = regexp.MustCompile(`^PROF_\d+_\d+_[0-9a-zA-Z]+`)

// findHostDir returns PROF_*/host of dir, or "".
func findHostDir(dir string) string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && profDirRe.MatchString(e.Name()) {
			h := filepath.Join(dir, e.Name(), "host")
			if st, err := os.Stat(h); err == nil && st.IsDir() {
				return h
			}
		}
	}
	return ""
}

// readHostFreq reads CPU[0].Frequency (MHz) from PROF_*/host/info.json.
func readHostFreq(path string) (float64, bool) {
	b, err := safefile.ReadFile(path, maxSmallFile)
	if err != nil {
		return 0, false
	}
	var v struct {
		CPU []struct {
			Frequency json.RawMessage `json:"Frequency"`
		} `json:"CPU"`
	}
	if json.Unmarshal(b, &v) != nil || len(v.CPU) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.Trim(string(v.CPU[0].Frequency), `" `), 64)
	return f, err == nil && f > 0
}

// readHostStartLog reads [Host] cntvct and clock_monotonic_raw.
func readHostStartLog(path string) (cnt, mono int64, ok bool) {
	f, err := safefile.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	var haveCnt, haveMono bool
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		if section != "Host" {
			continue
		}
		k, v, found := strings.Cut(line, ":")
		if !found {
			k, v, found = strings.Cut(line, "=")
		}
		if !found {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(k) {
		case "cntvct":
			cnt, haveCnt = n, true
		case "clock_monotonic_raw":
			mono, haveMono = n, true
		}
	}
	return cnt, mono, haveCnt && haveMono
}

// readStartInfoDiff reads collectionTimeBegin (epoch µs) and clockMonotonicRaw
// (ns) from a CANN start_info file and returns their difference in ns.
func readStartInfoDiff(path string) (int64, bool) {
	b, err := safefile.ReadFile(path, maxSmallFile)
	if err != nil {
		return 0, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return 0, false
	}
	get := func(k string) (int64, bool) {
		raw, ok := m[k]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.Trim(string(raw), `" `), 10, 64)
		return n, err == nil
	}
	beginUS, ok1 := get("collectionTimeBegin")
	mono, ok2 := get("clockMonotonicRaw")
	if !ok1 || !ok2 {
		return 0, false
	}
	return beginUS*1000 - mono, true
}

// LiveTimeBase pairs this host's clocks for a run whose info files do not exist
// yet (docs/reference/profiler-format.md §3.4). sample is any recent raw value
// from the files; it tells a CLOCK_MONOTONIC_RAW ns clock from a system counter
// by magnitude. For a counter, the frequency comes from PROF_*/host/info.json
// when present, else it is estimated from the ratio counter/monotonic (both
// count from boot).
func LiveTimeBase(dir string, sample int64) TimeBase {
	epoch, mono := clockPair()
	tb := TimeBase{DiffNS: epoch - mono, Source: "live clock pairing", Approximate: true, FreqMHz: 100}
	// A live run's latest record is seconds old: a monotonic-ns sample lies
	// close to now; a counter at f MHz lies near now·f/1000 (far from it).
	const day = int64(24 * 3600 * 1e9)
	if d := mono - sample; sample == 0 || (d < min(day, mono/2) && d > -min(day, mono/2)) {
		return tb
	}
	tb.SyscntEnable = true
	if host := findHostDir(dir); host != "" {
		if f, ok := readHostFreq(filepath.Join(host, "info.json")); ok {
			tb.FreqMHz = f
			return tb
		}
	}
	if mono > 0 && sample > 0 {
		tb.FreqMHz = float64(sample) * 1000 / float64(mono)
	}
	return tb
}

// maxSmallFile caps the JSON side files (profiler_info, host info,
// start_info) read whole: real ones are a few KiB.
const maxSmallFile = 64 << 20
