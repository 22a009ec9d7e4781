package allocator

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
)

// Stat is one torch memory statistic
// (docs/reference/allocator-semantics.md §5).
type Stat struct {
	Current, Peak, Allocated, Freed int64
}

func (s *Stat) increase(n int64) {
	s.Current += n
	s.Allocated += n
	s.Peak = max(s.Peak, s.Current)
}

func (s *Stat) decrease(n int64) {
	s.Current -= n
	s.Freed += n
}

// inc adds n ≥ 0 to the "all" entry and entry k.
func (arr *StatArray) inc(k int, n int64) {
	arr[StatAll].increase(n)
	arr[k].increase(n)
}

// dec takes n ≥ 0 from the "all" entry and entry k.
func (arr *StatArray) dec(k int, n int64) {
	arr[StatAll].decrease(n)
	arr[k].decrease(n)
}

// add applies n of either sign to the "all" entry and entry k.
func (arr *StatArray) add(k int, n int64) {
	if n >= 0 {
		arr.inc(k, n)
	} else {
		arr.dec(k, -n)
	}
}

// allocated counts a block handed out, in one batch: an allocation and an
// active block of size bytes, requested bytes asked for.
func (s *Stats) allocated(k int, size, requested int64) {
	s.Allocation.inc(k, 1)
	s.AllocatedBytes.inc(k, size)
	s.Active.inc(k, 1)
	s.ActiveBytes.inc(k, size)
	s.RequestedBytes.inc(k, requested)
}

// Pool indices of a StatArray.
const (
	StatAll   = 0 // "all"
	StatSmall = 1 // "small_pool"
	StatLarge = 2 // "large_pool"
)

// StatArray is a Stat per pool type: all, small_pool, large_pool.
type StatArray [3]Stat

var statTypeNames = [3]string{"all", "small_pool", "large_pool"}

// Stats mirrors torch's memory_stats() key families.
type Stats struct {
	Allocation         StatArray // "allocation.*"
	Segment            StatArray
	Active             StatArray
	InactiveSplit      StatArray
	AllocatedBytes     StatArray
	ReservedBytes      StatArray
	ActiveBytes        StatArray
	InactiveSplitBytes StatArray
	RequestedBytes     StatArray

	OversizeAllocations Stat
	OversizeSegments    Stat

	NumAllocRetries   int64
	NumOOMs           int64
	NumSyncAllStreams int64
	NumDeviceAlloc    int64
	NumDeviceFree     int64
	NumOOMRejections  int64 // torch_npu only
	MaxSplitSize      int64 // -1 = unlimited
}

func (s *Stats) arrays() []struct {
	name string
	a    *StatArray
} {
	return []struct {
		name string
		a    *StatArray
	}{
		{"allocation", &s.Allocation}, {"segment", &s.Segment}, {"active", &s.Active},
		{"inactive_split", &s.InactiveSplit}, {"allocated_bytes", &s.AllocatedBytes},
		{"reserved_bytes", &s.ReservedBytes}, {"active_bytes", &s.ActiveBytes},
		{"inactive_split_bytes", &s.InactiveSplitBytes}, {"requested_bytes", &s.RequestedBytes},
	}
}

// Map flattens the stats into torch's dotted keys
// ("allocated_bytes.all.current", "num_ooms", …).
func (s Stats) Map() map[string]int64 {
	m := make(map[string]int64, 128)
	put := func(prefix string, st Stat) {
		m[prefix+".current"] = st.Current
		m[prefix+".peak"] = st.Peak
		m[prefix+".allocated"] = st.Allocated
		m[prefix+".freed"] = st.Freed
	}
	for _, a := range s.arrays() {
		for i, n := range statTypeNames {
			put(a.name+"."+n, a.a[i])
		}
	}
	put("oversize_allocations", s.OversizeAllocations)
	put("oversize_segments", s.OversizeSegments)
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["num_oom_rejections"] = s.NumOOMRejections
	m["max_split_size"] = s.MaxSplitSize
	return m
}

// Get returns one flattened key, e.g. Get("reserved_bytes.all.peak"),
// without building the map.
func (s Stats) Get(key string) (int64, bool) {
	switch key {
	case "num_alloc_retries":
		return s.NumAllocRetries, true
	case "num_ooms":
		return s.NumOOMs, true
	case "num_sync_all_streams":
		return s.NumSyncAllStreams, true
	case "num_device_alloc":
		return s.NumDeviceAlloc, true
	case "num_device_free":
		return s.NumDeviceFree, true
	case "num_oom_rejections":
		return s.NumOOMRejections, true
	case "max_split_size":
		return s.MaxSplitSize, true
	}
	name, rest, _ := strings.Cut(key, ".")
	var st *Stat
	switch name {
	case "oversize_allocations":
		st = &s.OversizeAllocations
	case "oversize_segments":
		st = &s.OversizeSegments
	default:
		pool, field, ok := strings.Cut(rest, ".")
		if !ok {
			return 0, false
		}
		idx := slices.Index(statTypeNames[:], pool)
		if idx < 0 {
			return 0, false
		}
		for _, a := range s.arrays() {
			if a.name == name {
				st = &a.a[idx]
			}
		}
		rest = field
	}
	if st == nil {
		return 0, false
	}
	switch rest {
	case "current":
		return st.Current, true
	case "peak":
		return st.Peak, true
	case "allocated":
		return st.Allocated, true
	case "freed":
		return st.Freed, true
	}
	return 0, false
}

// Keys returns the flattened keys sorted, as memory_stats() orders them.
func (s Stats) Keys() []string {
	m := s.Map()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *Stats) resetPeak() {
	for _, a := range s.arrays() {
		for i := range a.a {
			a.a[i].Peak = a.a[i].Current
		}
	}
	s.OversizeAllocations.Peak = s.OversizeAllocations.Current
	s.OversizeSegments.Peak = s.OversizeSegments.Current
}

func (s *Stats) resetAccumulated() {
	for _, a := range s.arrays() {
		for i := range a.a {
			a.a[i].Allocated, a.a[i].Freed = 0, 0
		}
	}
	s.OversizeAllocations.Allocated, s.OversizeAllocations.Freed = 0, 0
	s.OversizeSegments.Allocated, s.OversizeSegments.Freed = 0, 0
	s.NumAllocRetries, s.NumOOMs, s.NumSyncAllStreams = 0, 0, 0
	s.NumDeviceAlloc, s.NumDeviceFree, s.NumOOMRejections = 0, 0, 0
}

func summaryCount(n int64) string {
	units := []string{" ", "K", "M"}
	v, i := n, 0
	for i < len(units)-1 && (v > 768*1000 || v < -768*1000) {
		v /= 1000
		i++
	}
	return fmt.Sprintf("%8d %s", v, units[i])
}

// summaryText renders stats in the spirit of torch.cuda.memory_summary().
func summaryText(s Stats, device int, flavour config.Flavour) string {
	var b strings.Builder
	line := strings.Repeat("=", 75) + "\n"
	thin := strings.Repeat("-", 75) + "\n"
	kind := "NPU"
	if flavour == config.FlavourCUDA {
		kind = "CUDA"
	}
	b.WriteString(line)
	fmt.Fprintf(&b, "|%s|\n", center(fmt.Sprintf("PyTorch %s memory summary, device ID %d", kind, device), 73))
	b.WriteString(thin)
	fmt.Fprintf(&b, "|%s|\n", center(fmt.Sprintf("%s OOMs: %-13d|        %sMalloc retries: %-9d", kind, s.NumOOMs, strings.ToLower(kind), s.NumAllocRetries), 73))
	b.WriteString(line)
	fmt.Fprintf(&b, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n")
	row := func(name string, st Stat, f func(int64) string) {
		fmt.Fprintf(&b, "%-23s| %s | %s | %s | %s |\n", name, f(st.Current), f(st.Peak), f(st.Allocated), f(st.Freed))
	}
	rows := []struct {
		title string
		a     StatArray
		bytes bool
	}{
		{"Allocated memory", s.AllocatedBytes, true},
		{"Active memory", s.ActiveBytes, true},
		{"Requested memory", s.RequestedBytes, true},
		{"GPU reserved memory", s.ReservedBytes, true},
		{"Non-releasable memory", s.InactiveSplitBytes, true},
		{"Allocations", s.Allocation, false},
		{"Active allocs", s.Active, false},
		{"GPU reserved segments", s.Segment, false},
		{"Non-releasable allocs", s.InactiveSplit, false},
	}
	subTitle := [3]string{"", "      from large pool", "      from small pool"}
	for _, r := range rows {
		title := strings.Replace(r.title, "GPU", kind, 1)
		b.WriteString(thin)
		for j, idx := range []int{StatAll, StatLarge, StatSmall} {
			name := title
			if j > 0 {
				name = subTitle[j]
			}
			f := summaryCount
			if r.bytes {
				f = bytesize.Summary
			}
			row(name, r.a[idx], f)
		}
	}
	b.WriteString(line)
	row("Oversize allocations", s.OversizeAllocations, summaryCount)
	row("Oversize "+kind+" segments", s.OversizeSegments, summaryCount)
	b.WriteString(line)
	return b.String()
}

func center(s string, w int) string {
	if len(s) >= w {
		return s
	}
	l := (w - len(s)) / 2
	return strings.Repeat(" ", l) + s + strings.Repeat(" ", w-len(s)-l)
}
