package npusmi

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseInfo feeds the recorded layouts and their mutations to the
// parser: no panic, and whatever parses holds only figures the text shows.
func FuzzParseInfo(f *testing.F) {
	for _, name := range []string{
		"npu-smi-info-910B3x8-24.1.rc1.txt", "npu-smi-info-910B2C-23.0.2.1-procs.txt",
		"npu-smi-info-310B4-nohbm-23.0.0.txt", "npu-smi-info-310P3-24.1.0.1-procs.txt",
		"npu-smi-info-910B3-container-25.2.3.txt", "npu-smi-info-A3-2chip-25.2.0.txt",
	} {
		f.Add(read(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := ParseInfo(b)
		if err != nil {
			if in != nil {
				t.Fatal("an error with a result")
			}
			return
		}
		if len(in.Chips) == 0 {
			t.Fatal("a table without chips parsed")
		}
		text := string(b)
		for _, c := range in.Chips {
			if c.HBMOK && !strings.Contains(text, strconv.FormatInt(c.HBMTotalMB, 10)) {
				t.Fatalf("HBM total %d is not in the text", c.HBMTotalMB)
			}
			if c.HBMUsedMB < 0 || c.MemUsedMB < 0 || c.AICore < 0 || c.AICore > 100 {
				t.Fatalf("impossible figures %+v", c)
			}
		}
		for _, p := range in.Procs {
			if p.PID <= 0 || !strings.Contains(text, strconv.Itoa(p.PID)) {
				t.Fatalf("pid %d", p.PID)
			}
		}
	})
}

func FuzzParseUsages(f *testing.F) {
	f.Add(read(f, "npu-smi-usages-910B-25.5.1.txt"))
	f.Fuzz(func(t *testing.T, b []byte) {
		us, err := ParseUsages(b)
		if err == nil && len(us) == 0 {
			t.Fatal("no blocks and no error")
		}
		for _, u := range us {
			for k, v := range u.Pct {
				if v < 0 || v > 100 {
					t.Fatalf("%s = %d", k, v)
				}
			}
		}
	})
}

// BenchmarkParseInfo measures one 8-NPU table (what a poll parses each interval)
// against splitting the same text into lines, the least any parser does.
func BenchmarkParseInfo(b *testing.B) {
	src := read(b, "npu-smi-info-910B3x8-24.1.rc1.txt")
	b.Run("baseline_split_lines", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			_ = strings.Split(string(src), "\n")
		}
	})
	b.Run("ParseInfo", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, err := ParseInfo(src); err != nil {
				b.Fatal(err)
			}
		}
	})
}
