package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestRoundSize(t *testing.T) {
	npu := DefaultConfig(FlavourNPU)
	cuda := DefaultConfig(FlavourCUDA)
	div4, err := ParseCUDAConfig("roundup_power2_divisions:4")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  *Config
		in   int64
		want int64
	}{
		{"npu 1 B pads to minimum", &npu, 1, 512},
		{"npu 480 B + pad is exactly 512", &npu, 480, 512},
		{"npu 512 B + pad spills to 1024", &npu, 512, 1024},
		{"npu exactly 1 MiB leaves the small pool", &npu, MiB, 1049088},
		{"npu 1 MiB − 32 stays small", &npu, MiB - 32, MiB},
		{"cuda 0 B", &cuda, 0, 512},
		{"cuda 512 B", &cuda, 512, 512},
		{"cuda 513 B", &cuda, 513, 1024},
		{"cuda 1 MiB", &cuda, MiB, MiB},
		{"div4 below 512·d uses 512 rounding", &div4, 1200, 1536},
		{"div4 3000 → quarter of 2048", &div4, 3000, 3072},
		{"div4 2049", &div4, 2049, 2560},
		{"div4 power of two unchanged", &div4, 4 * MiB, 4 * MiB},
		{"div4 5 MiB+1 → 6 MiB", &div4, 5*MiB + 1, 6 * MiB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.roundSize(tt.in); got != tt.want {
				t.Errorf("%s: roundSize(%d) = %d, want %d", tt.name, tt.in, got, tt.want)
			}
		})
	}
	if got := nextDivision(3, 4); got != 4 {
		t.Errorf("nextDivision(3,4) = %d, want 4 (step 0 doubles the floor)", got)
	}
}

func TestDivisionBuckets(t *testing.T) {
	c, err := ParseConfig("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]")
	if err != nil {
		t.Fatal(err)
	}
	want := [16]int64{8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1}
	if c.RoundupDivisions != want {
		t.Fatalf("buckets = %v, want %v", c.RoundupDivisions, want)
	}
	for i, tt := range []struct {
		size int64
		want int64
	}{{1, 8}, {2*MiB - 1, 8}, {64 * MiB, 8}, {128 * MiB, 0}, {256 * MiB, 4}, {GiB, 4}, {2 * GiB, 1}, {1 << 40, 1}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := c.divisions(tt.size); got != tt.want {
				t.Errorf("divisions(%d) = %d, want %d", tt.size, got, tt.want)
			}
		})
	}
}

func TestAllocationSize(t *testing.T) {
	def := DefaultConfig(FlavourNPU)
	big, _ := ParseConfig("large_segment_size_mb:40")
	g1, _ := ParseConfig("page_size:1g")
	tests := []struct {
		cfg        *Config
		size, want int64
	}{
		{&def, 512, SmallBuffer},
		{&def, MiB, SmallBuffer},
		{&def, MiB + 512, 20 * MiB},
		{&def, 10*MiB - 512, 20 * MiB},
		{&def, 10 * MiB, 10 * MiB},
		{&def, 10*MiB + 512, 12 * MiB},
		{&big, 5 * MiB, 40 * MiB},
		{&g1, 5 * MiB, GiB},
		{&g1, 3 * GiB / 2, 2 * GiB},
		{&g1, MiB, SmallBuffer},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := tt.cfg.AllocationSize(tt.size); got != tt.want {
				t.Errorf("%q: allocationSize(%d) = %d, want %d", tt.cfg.Raw, tt.size, got, tt.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(" max_split_size_mb:64, garbage_collection_threshold:0.6 ,roundup_power2_divisions:2,per_process_memory_fraction:0.5,base_addr_aligned_kb:0,segment_size_mb:64,throw_on_npumalloc_oom:True")
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxSplitSize != 64*MiB || c.GCThreshold != 0.6 || c.RoundupDivisions[15] != 2 || c.MemoryFraction != 0.5 ||
		c.BaseAddrAlignedKB != 0 || c.LargeSegmentSize != 64*MiB || !c.ThrowOnMallocOOM || !c.Pad32 {
		t.Fatalf("parsed %+v", c)
	}
	d, err := ParseConfig("")
	if err != nil || d.MaxSplitSize != Unlimited || d.MaxNonSplitRounding != 20*MiB || d.LargeSegmentSize != 20*MiB || d.BaseAddrAlignedKB != 16 || d.MemoryFraction != 1 {
		t.Fatalf("defaults %+v, %v", d, err)
	}
	cu, err := ParseCUDAConfig("expandable_segments:True,max_split_size_mb:24,backend:native,release_lock_on_cudamalloc:True")
	if err != nil || !cu.ExpandableSegments || cu.MaxSplitSize != 24*MiB || cu.Pad32 || !cu.ReleaseLockOnMalloc {
		t.Fatalf("cuda %+v, %v", cu, err)
	}
	if s := cu.Settings(); s.ConfKey != "PYTORCH_CUDA_ALLOC_CONF" || s.MaxSplitSize != 24*MiB || !s.ExpandableSegments || len(s.RoundupPower2Divisions) != 16 {
		t.Fatalf("settings %+v", s)
	}
	if s := d.Settings(); s.MaxSplitSize != -1 || s.ConfKey != "PYTORCH_NPU_ALLOC_CONF" {
		t.Fatalf("settings %+v", s)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		conf string
		cuda bool
		want string
	}{
		{"max_split_size_mb:19", false, "CachingAllocator option max_split_size_mb too small, must be >= 20"},
		{"max_non_split_rounding_mb:10", false, "CachingAllocator option max_non_split_rounding_mb too small, must be >= 20"},
		{"garbage_collection_threshold:1.0", false, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
		{"garbage_collection_threshold:0", false, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"},
		{"roundup_power2_divisions:3", false, "For roundups, the divisions has to be power of 2 "},
		{"roundup_power2_divisions:[3:4]", false, "For roundups, the intervals have to be power of 2 "},
		{"roundup_power2_divisions:[4:3]", false, "For roundups, the divisions has to be power of 2 "},
		{"expandable_segments:true", false, "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"},
		{"large_segment_size_mb:10", false, "CachingAllocator option large_segment_size_mb must be > 10 MB"},
		{"foo:1", false, "Unrecognized key 'foo' in NPU allocator config, "},
		{"release_lock_on_cudamalloc:True", false, "torch_npu not support key 'release_lock_on_cudamalloc' in NPU allocator config, "},
		{"base_addr_aligned_kb:17", false, "CachingAllocator option base_addr_aligned_kb error, must be [0~16], dtype is int"},
		{"base_addr_aligned_kb:x", false, "CachingAllocator option base_addr_aligned_kb is invalid."},
		{"page_size:2m", false, "Unsupported page_size value: 2m"},
		{"segment_size_mb:600", false, "CachingAllocator option segment_size_mb error, must be [20, 512], dtype is int"},
		{"per_process_memory_fraction:1.5", false, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]"},
		{"expandable_segments:True,max_split_size_mb:40", false, "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with `expandable_segments`, please set `expandable_segments` to `False`."},
		{"garbage_collection_threshold:0.5,expandable_segments:True", false, "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with `expandable_segments`, please set `expandable_segments` to `False`."},
		{"max_split_size_mb:40;expandable_segments:True", false, "CachingAllocator option max_split_size_mb: invalid value '40;expandable_segments'"},
		{"max_split_size_mb=40", false, "Unrecognized key 'max_split_size_mb=40' in NPU allocator config, "},
		{"max_split_size_mb:40 expandable_segments:True", false, "CachingAllocator option max_split_size_mb: invalid value '40expandable_segments'"}, // spaces are dropped
		{"foo:1", true, "Unrecognized key 'foo' in CUDA allocator config."},
		{"backend:magic", true, "Unknown allocator backend, options are native and cudaMallocAsync"},
		{"pinned_num_register_threads:3", true, "Number of register threads has to be power of 2 "},
		{"max_split_size_mb:", false, "Expected a value at index 2 in ConfigTokenizer but got ''"},
		{"roundup_power2_divisions:[64:8", false, "Expected ',' at index 6 in ConfigTokenizer but got ''"},
	}
	for _, tt := range tests {
		t.Run(tt.conf, func(t *testing.T) {
			var err error
			if tt.cuda {
				_, err = ParseCUDAConfig(tt.conf)
			} else {
				_, err = ParseConfig(tt.conf)
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%q: error %v, want %q", tt.conf, err, tt.want)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "max_split_size_mb:64", "roundup_power2_divisions:[64:8,256:4,>:1]", "expandable_segments:True,page_size:1g", "garbage_collection_threshold:0.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig(s)
		if err != nil {
			return
		}
		if c.MaxSplitSize < 20*MiB || c.LargeSegmentSize <= 10*MiB || c.MemoryFraction < 0 || c.MemoryFraction > 1 {
			t.Fatalf("%q accepted with %+v", s, c)
		}
		for _, d := range c.RoundupDivisions {
			if d != 0 && !isPow2(d) {
				t.Fatalf("%q: division %d", s, d)
			}
		}
	})
}
