package config

import (
	"math/bits"

	"github.com/npumon/npumon/allocator/snapshot"

	"fmt"
	"math"
	"strconv"
	"strings"
)

// Flavour selects whose caching allocator the Allocator imitates where
// torch_npu and PyTorch's CUDA allocator differ
// (docs/reference/allocator-semantics.md §7).
type Flavour uint8

const (
	// FlavourNPU is torch_npu's NPUCachingAllocator (the default).
	FlavourNPU Flavour = iota
	// FlavourCUDA is PyTorch's CUDACachingAllocator: no 32-byte pad,
	// record_stream ignores the allocation stream, a memory fraction is set
	// even at 1.0, CUDA OOM text, expandable segments allowed together with
	// max_split_size_mb.
	FlavourCUDA
)

func (f Flavour) String() string {
	if f == FlavourCUDA {
		return "cuda"
	}
	return "npu"
}

// ConfigError is an invalid allocator setting; its text is torch's
// message for the same mistake.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Errorf is a ConfigError with a formatted message.
func Errorf(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// Unlimited is the max_split_size of a configuration that sets none.
const Unlimited = int64(math.MaxInt64)

// Config is a parsed allocator configuration. The zero value is not valid;
// start from DefaultConfig or ParseConfig.
type Config struct {
	Flavour Flavour
	// Raw is the configuration string as given (for Settings).
	Raw string

	MaxSplitSize        int64   // bytes; Unlimited when unset
	MaxNonSplitRounding int64   // bytes; default 20 MiB
	GCThreshold         float64 // garbage_collection_threshold; 0 = off
	// RoundupDivisions holds roundup_power2_divisions per power-of-two
	// interval: index i covers [2^i MiB, 2^(i+1) MiB); 0 = plain rounding.
	RoundupDivisions   [16]int64
	ExpandableSegments bool
	// LargeSegmentSize is the large-pool segment size for 1–10 MiB
	// requests and the expandable page size of the large pool.
	LargeSegmentSize int64
	PageSize1G       bool // NPU page_size:1g
	// BaseAddrAlignedKB is the NPU base address alignment of ≥2 MiB
	// blocks in expandable segments (0 disables); default 16.
	BaseAddrAlignedKB int64
	// MemoryFraction is per_process_memory_fraction (NPU), default 1.
	MemoryFraction         float64
	MultiStreamLazyReclaim bool
	ThrowOnMallocOOM       bool
	ReleaseLockOnMalloc    bool
	// Pad32 adds torch_npu's 32-byte pad in round_size (true for the NPU
	// flavour on SoCs before Ascend950).
	Pad32 bool

	maxSplitSet bool
}

// DefaultConfig returns the defaults of a flavour.
func DefaultConfig(f Flavour) Config {
	return Config{
		Flavour:             f,
		MaxSplitSize:        Unlimited,
		MaxNonSplitRounding: kLargeBuffer,
		LargeSegmentSize:    kLargeBuffer,
		BaseAddrAlignedKB:   16,
		MemoryFraction:      1,
		Pad32:               f == FlavourNPU,
	}
}

// ConfKey is the environment variable the flavour reads its settings from.
func (c Config) ConfKey() string {
	if c.Flavour == FlavourCUDA {
		return "PYTORCH_CUDA_ALLOC_CONF"
	}
	return "PYTORCH_NPU_ALLOC_CONF"
}

// ParseConfig parses a PYTORCH_NPU_ALLOC_CONF string ("key:value,...") the
// way torch_npu does, with its validation messages.
func ParseConfig(s string) (Config, error) { return parseConfig(s, FlavourNPU) }

// ParseCUDAConfig parses a PYTORCH_CUDA_ALLOC_CONF string into a
// CUDA-flavoured configuration.
func ParseCUDAConfig(s string) (Config, error) { return parseConfig(s, FlavourCUDA) }

// upstreamKeys are the PyTorch keys; torch_npu accepts only npuUpstream.
var (
	upstreamKeys = map[string]bool{
		"max_split_size_mb": true, "max_non_split_rounding_mb": true,
		"garbage_collection_threshold": true, "roundup_power2_divisions": true,
		"expandable_segments": true, "large_segment_size_mb": true,
		"pinned_use_background_threads": true, "pinned_max_round_threshold_mb": true,
		"pinned_max_cached_size_mb": true, "backend": true,
		"release_lock_on_cudamalloc": true, "pinned_use_cuda_host_register": true,
		"pinned_num_register_threads": true, "graph_capture_record_stream_reuse": true,
		"release_lock_on_hipmalloc": true, "pinned_use_hip_host_register": true,
	}
	npuUpstream = map[string]bool{
		"max_split_size_mb": true, "garbage_collection_threshold": true,
		"roundup_power2_divisions": true, "expandable_segments": true,
		"pinned_use_background_threads": true, "large_segment_size_mb": true,
		"max_non_split_rounding_mb": true, "pinned_max_round_threshold_mb": true,
		"pinned_max_cached_size_mb": true,
	}
)

// tokenize splits like PyTorch's ConfigTokenizer: ',', ':', '[' and ']'
// are tokens of their own, spaces are dropped.
func tokenize(s string) []string {
	var toks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch r {
		case ',', ':', '[', ']':
			flush()
			toks = append(toks, string(r))
		case ' ':
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

type cfgParser struct {
	toks []string
	i    int
}

func (p *cfgParser) tok(i int) string {
	if i < len(p.toks) {
		return p.toks[i]
	}
	return ""
}

func (p *cfgParser) consume(c string) error {
	p.i++
	if p.tok(p.i) != c {
		return Errorf("Expected '%s' at index %d in ConfigTokenizer but got '%s'", c, p.i, p.tok(p.i))
	}
	return nil
}

// value consumes ':' and returns the next token.
func (p *cfgParser) value() (string, error) {
	if err := p.consume(":"); err != nil {
		return "", err
	}
	p.i++
	if p.i >= len(p.toks) {
		return "", Errorf("Expected a value at index %d in ConfigTokenizer but got ''", p.i)
	}
	return p.toks[p.i], nil
}

func (p *cfgParser) boolean() (bool, error) {
	v, err := p.value()
	if err != nil {
		return false, err
	}
	switch v {
	case "True":
		return true, nil
	case "False":
		return false, nil
	}
	return false, Errorf("Expected 'True' or 'False' at index %d in ConfigTokenizer but got '%s'", p.i, v)
}

func (p *cfgParser) uint(key string) (int64, error) {
	v, err := p.value()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		return 0, Errorf("CachingAllocator option %s: invalid value '%s', expected a non-negative integer", key, v)
	}
	return int64(n), nil
}

func (p *cfgParser) float(key string) (float64, error) {
	v, err := p.value()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, Errorf("CachingAllocator option %s: invalid value '%s', expected a number", key, v)
	}
	return f, nil
}

func isPow2(v int64) bool { return v > 0 && v&(v-1) == 0 }

func parseConfig(s string, f Flavour) (Config, error) {
	return DefaultConfig(f).parse(s, nil)
}

// Update applies the settings string s on top of c the way
// torch_npu.npu.memory._set_allocator_settings does at run time: the NPU
// flavour accepts only the run-time keys, the CUDA flavour every key.
func (c Config) Update(s string) (Config, error) {
	allowed := runtimeKeys
	if c.Flavour == FlavourCUDA {
		allowed = nil
	}
	return c.parse(s, allowed)
}

// runtimeKeys are the keys torch_npu.npu.memory._set_allocator_settings
// accepts.
var runtimeKeys = map[string]bool{
	"expandable_segments": true, "max_split_size_mb": true, "max_non_split_rounding_mb": true,
	"release_lock_on_npumalloc": true, "throw_on_npumalloc_oom": true, "per_process_memory_fraction": true,
	"pinned_max_round_threshold_mb": true, "pinned_max_cached_size_mb": true,
}

// parse applies s on top of c. Like PyTorch's parseArgs it first resets
// max_split_size, roundup_power2_divisions and the GC threshold; allowed,
// when set, restricts the keys.
func (c Config) parse(s string, allowed map[string]bool) (Config, error) {
	c.Raw = s
	c.MaxSplitSize, c.maxSplitSet = Unlimited, false
	c.RoundupDivisions = [16]int64{}
	c.GCThreshold = 0
	p := &cfgParser{toks: tokenize(s)}
	for p.i = 0; p.i < len(p.toks); p.i++ {
		key := p.toks[p.i]
		if allowed != nil && !allowed[key] {
			return Config{}, Errorf("torch_npu.npu.memory._set_allocator_settings() unsupported setting: %s", key)
		}
		if err := c.parseKey(p, key); err != nil {
			return Config{}, err
		}
		if p.i+1 < len(p.toks) {
			if err := p.consume(","); err != nil {
				return Config{}, err
			}
		}
	}
	// Note [Expandable segments with max_split_size_mb]
	// torch_npu refuses the combination; PyTorch's CUDA allocator accepts
	// it, and there the oversize rules of get_free_block reject the merged
	// free blocks inside an expandable segment, so each cycle maps new pages
	// and reserved memory grows without bound (pytorch/pytorch#123548, fixed
	// by PR #193400). The CUDA flavour applies the oversize rules to
	// expandable blocks too (getFreeBlock), as CUDA did before that fix.
	if c.Flavour == FlavourNPU && c.ExpandableSegments && (c.maxSplitSet || c.GCThreshold != 0) {
		return Config{}, Errorf("`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with `expandable_segments`, please set `expandable_segments` to `False`.")
	}
	return c, nil
}

func (c *Config) parseKey(p *cfgParser, key string) error {
	npu := c.Flavour == FlavourNPU
	if npu {
		if upstreamKeys[key] && !npuUpstream[key] {
			return Errorf("torch_npu not support key '%s' in NPU allocator config, ", key)
		}
	}
	var err error
	switch key {
	case "max_split_size_mb":
		var v int64
		if v, err = p.uint(key); err != nil {
			return err
		}
		if v < 20 {
			return Errorf("CachingAllocator option max_split_size_mb too small, must be >= 20")
		}
		v = min(v, math.MaxInt64/MiB)
		c.MaxSplitSize, c.maxSplitSet = v*MiB, true
	case "max_non_split_rounding_mb":
		var v int64
		if v, err = p.uint(key); err != nil {
			return err
		}
		if v < 20 {
			return Errorf("CachingAllocator option max_non_split_rounding_mb too small, must be >= 20")
		}
		c.MaxNonSplitRounding = min(v, math.MaxInt64/MiB) * MiB
	case "garbage_collection_threshold":
		var v float64
		if v, err = p.float(key); err != nil {
			return err
		}
		if v <= 0 || v >= 1 {
			return Errorf("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
		}
		c.GCThreshold = v
	case "roundup_power2_divisions":
		return c.parseRoundup(p)
	case "expandable_segments":
		c.ExpandableSegments, err = p.boolean()
	case "large_segment_size_mb":
		var v int64
		if v, err = p.uint(key); err != nil {
			return err
		}
		if v <= 10 {
			return Errorf("CachingAllocator option large_segment_size_mb must be > 10 MB")
		}
		c.LargeSegmentSize = min(v, math.MaxInt64/MiB) * MiB
	case "pinned_use_background_threads", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
		"graph_capture_record_stream_reuse", "release_lock_on_hipmalloc", "pinned_use_hip_host_register":
		var b bool
		b, err = p.boolean()
		if key == "release_lock_on_cudamalloc" {
			c.ReleaseLockOnMalloc = b
		}
	case "pinned_max_round_threshold_mb", "pinned_max_cached_size_mb":
		_, err = p.uint(key)
	case "pinned_num_register_threads":
		var v int64
		if v, err = p.uint(key); err != nil {
			return err
		}
		if !isPow2(v) {
			return Errorf("Number of register threads has to be power of 2 ")
		}
		if v > 128 {
			return Errorf("Number of register threads should be less than or equal to 128")
		}
	case "backend":
		var v string
		if v, err = p.value(); err != nil {
			return err
		}
		if v != "native" && v != "cudaMallocAsync" {
			return Errorf("Unknown allocator backend, options are native and cudaMallocAsync")
		}
	default:
		if !npu {
			return Errorf("Unrecognized key '%s' in CUDA allocator config.", key)
		}
		return c.parseNPUKey(p, key)
	}
	return err
}

func (c *Config) parseNPUKey(p *cfgParser, key string) error {
	var err error
	switch key {
	case "base_addr_aligned_kb":
		var v string
		if v, err = p.value(); err != nil {
			return err
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return Errorf("CachingAllocator option base_addr_aligned_kb is invalid.")
		}
		if n < 0 || n > 16 {
			return Errorf("CachingAllocator option base_addr_aligned_kb error, must be [0~16], dtype is int")
		}
		c.BaseAddrAlignedKB = n
	case "page_size":
		var v string
		if v, err = p.value(); err != nil {
			return Errorf("page_size requires format 'page_size:1g'")
		}
		if v != "1g" {
			return Errorf("Unsupported page_size value: %s", v)
		}
		c.PageSize1G = true
	case "segment_size_mb":
		var v string
		if v, err = p.value(); err != nil {
			return err
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 20 || n > 512 {
			return Errorf("CachingAllocator option segment_size_mb error, must be [20, 512], dtype is int")
		}
		c.LargeSegmentSize = n * MiB
	case "multi_stream_lazy_reclaim":
		c.MultiStreamLazyReclaim, err = p.boolean()
	case "release_lock_on_npumalloc":
		c.ReleaseLockOnMalloc, err = p.boolean()
	case "throw_on_npumalloc_oom":
		c.ThrowOnMallocOOM, err = p.boolean()
	case "pinned_mem_register", "pin_memory_expandable_segments":
		_, err = p.boolean()
	case "per_process_memory_fraction":
		var v float64
		v, err = p.float(key)
		if err == nil && (v < 0 || v > 1) {
			err = Errorf("per_process_memory_fraction is invalid, set it in [0.0, 1.0]")
		}
		c.MemoryFraction = v
	case "pinned_reserve_segment_size_mb":
		_, err = p.uint(key)
	default:
		return Errorf("Unrecognized key '%s' in NPU allocator config, ", key)
	}
	return err
}

// parseRoundup parses "roundup_power2_divisions:N" or the bracket list
// "[64:8,256:4,>:1]" (keys in MiB).
func (c *Config) parseRoundup(p *cfgParser) error {
	if err := p.consume(":"); err != nil {
		return err
	}
	p.i++
	if p.tok(p.i) != "[" {
		n, err := strconv.ParseInt(p.tok(p.i), 10, 64)
		if err != nil || !isPow2(n) {
			return Errorf("For roundups, the divisions has to be power of 2 ")
		}
		for i := range c.RoundupDivisions {
			c.RoundupDivisions[i] = n
		}
		return nil
	}
	first, last := true, 0
	for p.i++; p.i < len(p.toks) && p.toks[p.i] != "]"; p.i++ {
		k := p.toks[p.i]
		if err := p.consume(":"); err != nil {
			return err
		}
		p.i++
		d, err := strconv.ParseInt(p.tok(p.i), 10, 64)
		if err != nil || (d != 0 && !isPow2(d)) {
			return Errorf("For roundups, the divisions has to be power of 2 ")
		}
		if k == ">" {
			for i := last + 1; i < len(c.RoundupDivisions); i++ {
				c.RoundupDivisions[i] = d
			}
		} else {
			mb, err := strconv.ParseInt(k, 10, 64)
			if err != nil || !isPow2(mb) {
				return Errorf("For roundups, the intervals have to be power of 2 ")
			}
			idx := min(bits.Len64(uint64(mb))-1, len(c.RoundupDivisions)-1)
			if first {
				for i := 0; i < idx; i++ {
					c.RoundupDivisions[i] = d
				}
				first = false
			}
			c.RoundupDivisions[idx] = d
			last = idx
		}
		if p.tok(p.i+1) != "]" {
			if err := p.consume(","); err != nil {
				return err
			}
		}
	}
	if p.i >= len(p.toks) {
		return Errorf("Expected ']' at index %d in ConfigTokenizer but got ''", p.i)
	}
	return nil
}

// Settings returns the allocator_settings a snapshot of this config carries.
func (c Config) Settings() *snapshot.Settings {
	s := &snapshot.Settings{
		ConfKey:                    c.ConfKey(),
		Conf:                       c.Raw,
		MaxSplitSize:               c.MaxSplitSize,
		GarbageCollectionThreshold: c.GCThreshold,
		ExpandableSegments:         c.ExpandableSegments,
		ReleaseLockOnMalloc:        c.ReleaseLockOnMalloc,
		RoundupPower2Divisions:     map[int64]int64{},
	}
	if c.MaxSplitSize == Unlimited {
		s.MaxSplitSize = -1
	}
	for i, d := range c.RoundupDivisions {
		s.RoundupPower2Divisions[int64(1)<<i] = d
	}
	return s
}
