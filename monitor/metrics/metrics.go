// Package metrics exports what npumon's Stores hold as Prometheus metrics.
// A Collector reads each Store at scrape time (one Summary per device at its
// newest entry); nothing is updated per trace entry. docs/metrics.md names
// every metric, its type, unit and labels.
package metrics

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// Target is one process (one rank) whose Store the Collector reads.
type Target struct {
	// Store holds the process's devices; required.
	Store *store.Store
	// Source is the source label: the address or directory the figures
	// come from, in a canonical form (an absolute path, a resolved
	// address), so that one source named twice has one value. Targets of
	// one Collector must differ in Source or Rank (Distinct).
	Source string
	// Name is the source as the user gave it, for messages; "" means
	// Source.
	Name string
	// Rank is the distributed rank, -1 when unknown (the label is then "").
	Rank int
	// PID is the process id, or a func returning it (a live producer's
	// handshake); 0 when unknown (the label is then "").
	PID    int
	PIDFun func() int
	// Allocator, if set, gives the in-process allocator of a device, whose
	// own counters (requested bytes, alloc retries, …) are exported beside
	// the Store's figures. nil, or a nil result: those metrics are absent.
	Allocator func(device int) *allocator.Allocator
	// Received, if set, gives the entries a live connection received and
	// the entries the producer reported missed, in place of the Store's
	// count of indexed entries and gap records.
	Received func() (received, missed uint64)
}

func (t *Target) pid() int {
	if t.PIDFun != nil {
		return t.PIDFun()
	}
	return t.PID
}

// Labels every npumon metric carries. id is the device as the source
// numbers it (npu-exporter's chip label of the same name); source tells
// apart two sources whose devices, ranks and pids are the same.
var labelNames = []string{"id", "rank", "pid", "source"}

func (t *Target) name() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Source
}

// Distinct reports targets whose series would have the same labels: the
// same Source and Rank (a Store's devices are distinct, and the pid alone
// cannot tell two targets apart, since it may be unknown). The Prometheus
// registry would keep one of them and drop the other without a word.
func Distinct(targets []Target) error {
	type key struct {
		source string
		rank   int
	}
	seen := map[key]int{}
	for i := range targets {
		t := &targets[i]
		rank := max(t.Rank, -1)
		k := key{t.Source, rank}
		if j, ok := seen[k]; ok {
			o := &targets[j]
			what := fmt.Sprintf("source=%q", t.Source)
			if rank >= 0 {
				what += fmt.Sprintf(" rank=%q", strconv.Itoa(rank))
			}
			if o.name() == t.name() {
				return fmt.Errorf("source %s is given twice (its series would have the same labels, %s): give it once", t.name(), what)
			}
			return fmt.Errorf("sources %s and %s are the same (their series would have the same labels, %s): give it once", o.name(), t.name(), what)
		}
		seen[k] = i
	}
	return nil
}

// spec is one metric's name, help and type, for Describe and docs checks.
type spec struct {
	name, help string
	counter    bool
	desc       *prometheus.Desc
}

var specs []spec

// desc declares a metric; a name ending in _total is a counter.
func desc(name, help string) *prometheus.Desc {
	d := prometheus.NewDesc(name, help, labelNames, nil)
	specs = append(specs, spec{name: name, help: help, counter: strings.HasSuffix(name, "_total"), desc: d})
	return d
}

// The metric descriptions. Names follow Prometheus conventions: base units
// (bytes), _total for counters, _ratio for 0…1 fractions.
var (
	activeBytes = desc("npumon_active_bytes",
		"Bytes of the live allocations at the newest trace entry, pending frees included, sized as the trace records them (requested sizes).")
	allocatedBytes = desc("npumon_allocated_bytes",
		"Bytes of the allocated blocks at the newest trace entry, rounded block sizes (JSON allocated_bytes).")
	requestedBytes = desc("npumon_requested_bytes",
		"Bytes of the live allocations at the newest trace entry that are not waiting on a pending free, as requested (JSON requested_bytes).")
	reservedBytes = desc("npumon_reserved_bytes",
		"Bytes of device memory the caching allocator holds in segments at the newest trace entry.")
	peakActiveBytes = desc("npumon_peak_active_bytes",
		"Largest npumon_active_bytes over the trace so far.")
	peakRequestedBytes = desc("npumon_peak_requested_bytes",
		"Largest npumon_requested_bytes over the trace so far.")
	peakReservedBytes = desc("npumon_peak_reserved_bytes",
		"Largest npumon_reserved_bytes over the trace so far.")
	cachedFreeBytes = desc("npumon_cached_free_bytes",
		"Bytes inside reserved segments that no live block occupies (the sum of the free ranges of the segment map).")
	largestFreeBlockBytes = desc("npumon_largest_free_block_bytes",
		"Size of the largest free range inside one reserved segment: the biggest request the cache can serve without a new segment.")
	largestFreeBlockRatio = desc("npumon_largest_free_block_ratio",
		"Largest free block divided by cached-free bytes (1 when nothing is free); low values mean the free cache is split into small pieces.")
	segments = desc("npumon_segments",
		"Number of reserved segments at the newest trace entry.")
	liveBlocks = desc("npumon_live_blocks",
		"Number of live allocations at the newest trace entry.")
	ooms = desc("npumon_ooms_total",
		"Out-of-memory events recorded in the trace.")
	entriesReceived = desc("npumon_trace_entries_received_total",
		"Trace entries received from the source (for a capture: the entries it holds).")
	entriesMissed = desc("npumon_trace_entries_missed_total",
		"Trace entries the producer reported dropped before they reached npumon.")
	allocRequested = desc("npumon_allocator_requested_bytes",
		"The in-process allocator's requested_bytes.all.current: bytes callers asked for, before rounding.")
	allocAllocated = desc("npumon_allocator_allocated_bytes",
		"The in-process allocator's allocated_bytes.all.current: bytes of allocated blocks after rounding.")
	allocActive = desc("npumon_allocator_active_bytes",
		"The in-process allocator's active_bytes.all.current: allocated blocks plus blocks waiting on a pending free, after rounding.")
	allocReserved = desc("npumon_allocator_reserved_bytes",
		"The in-process allocator's reserved_bytes.all.current.")
	allocPeakRequested = desc("npumon_allocator_peak_requested_bytes",
		"The in-process allocator's requested_bytes.all.peak.")
	allocPeakReserved = desc("npumon_allocator_peak_reserved_bytes",
		"The in-process allocator's reserved_bytes.all.peak.")
	allocRetries = desc("npumon_allocator_alloc_retries_total",
		"The in-process allocator's num_alloc_retries: allocations that failed, freed cached blocks and tried again.")
	allocOOMs = desc("npumon_allocator_ooms_total",
		"The in-process allocator's num_ooms: allocations that failed for good.")
)

// Collector is a prometheus.Collector over a fixed set of targets.
type Collector struct {
	targets []Target
}

// New returns a Collector reading the targets at every scrape. Targets
// whose series collide (Distinct) must be refused before: a scrape would
// drop all but one of them.
func New(targets ...Target) *Collector {
	return &Collector{targets: append([]Target(nil), targets...)}
}

// Describe sends every description the Collector may use.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range specs {
		ch <- s.desc
	}
}

// Collect reads every target's devices at their newest entry.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.targets {
		c.collect(&c.targets[i], ch)
	}
}

func (c *Collector) collect(t *Target, ch chan<- prometheus.Metric) {
	if t.Store == nil {
		return
	}
	rank, pid := "", ""
	if t.Rank >= 0 {
		rank = strconv.Itoa(t.Rank)
	}
	if p := t.pid(); p > 0 {
		pid = strconv.Itoa(p)
	}
	var received, missed uint64
	live := t.Received != nil
	if live {
		received, missed = t.Received()
	}
	devs := t.Store.Devices()
	for _, dev := range devs {
		s := t.Store.SummaryAtSeq(dev, t.Store.Len(dev))
		lv := []string{strconv.Itoa(dev), rank, pid, t.Source}
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lv...)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
		}
		gauge(activeBytes, s.ActiveBytes)
		gauge(allocatedBytes, s.MapAllocatedBytes)
		gauge(requestedBytes, s.AllocatedBytes)
		gauge(reservedBytes, s.ReservedBytes)
		gauge(peakActiveBytes, s.PeakActiveBytes)
		gauge(peakRequestedBytes, s.PeakAllocatedBytes)
		gauge(peakReservedBytes, s.PeakReservedBytes)
		gauge(cachedFreeBytes, s.TotalFreeBytes)
		gauge(largestFreeBlockBytes, s.LargestFreeBlock)
		ch <- prometheus.MustNewConstMetric(largestFreeBlockRatio, prometheus.GaugeValue, replay.LargestFreeRatio(s.LargestFreeBlock, s.TotalFreeBytes), lv...)
		gauge(segments, int64(s.Segments))
		gauge(liveBlocks, int64(s.LiveBlocks))
		counter(ooms, int64(s.OOMs))
		// A live connection counts per process; with one device it is that
		// device's count, with several the Store's per-device count is used.
		if live && len(devs) == 1 {
			counter(entriesReceived, int64(received))
			counter(entriesMissed, int64(missed))
		} else {
			counter(entriesReceived, s.Entries)
			counter(entriesMissed, s.Dropped)
		}
		if t.Allocator == nil {
			continue
		}
		a := t.Allocator(dev)
		if a == nil {
			continue
		}
		st := a.Stats()
		all := allocator.StatAll
		gauge(allocRequested, st.RequestedBytes[all].Current)
		gauge(allocAllocated, st.AllocatedBytes[all].Current)
		gauge(allocActive, st.ActiveBytes[all].Current)
		gauge(allocReserved, st.ReservedBytes[all].Current)
		gauge(allocPeakRequested, st.RequestedBytes[all].Peak)
		gauge(allocPeakReserved, st.ReservedBytes[all].Peak)
		counter(allocRetries, st.NumAllocRetries)
		counter(allocOOMs, st.NumOOMs)
	}
}
