package npusmi

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixture.Path(t, "npu-smi/"+name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// b910 is a 910B row pair: power, temp, HBM used / total; Memory-Usage and
// hugepages print 0 / 0, AICore 0.
func b910(npu int, name, bus string, power float64, temp int, hbmUsed int64) Chip {
	return Chip{NPU: npu, PhyID: -1, Device: -1, Name: name, Health: "OK", BusID: bus,
		Power: power, PowerOK: true, TempC: temp, TempOK: true, AICoreOK: true,
		HugepagesOK: true, MemOK: true, HBMUsedMB: hbmUsed, HBMTotalMB: 65536, HBMOK: true}
}

// a3 is an A3 chip: Phy-ID printed; the second chip of an NPU prints "-" for power.
func a3(npu, chip, phy int, bus string, power float64, temp int, hbmUsed int64) Chip {
	c := b910(npu, "Ascend910", bus, power, temp, hbmUsed)
	c.Chip, c.PhyID = chip, phy
	c.PowerOK = power >= 0
	if !c.PowerOK {
		c.Power = 0
	}
	return c
}

// p310 is a 310P3 chip: power NA, Memory-Usage only, hugepages in use.
func p310(npu, chip, dev int, bus string, temp int, huge, memUsed, memTotal int64) Chip {
	return Chip{NPU: npu, Chip: chip, Device: dev, PhyID: -1, Name: "310P3", Health: "OK", BusID: bus,
		TempC: temp, TempOK: true, AICoreOK: true, HugepagesUsed: huge, HugepagesTotal: huge, HugepagesOK: true,
		MemUsedMB: memUsed, MemTotalMB: memTotal, MemOK: true}
}

// TestParseInfoFixtures checks every recorded layout against the figures
// read off the text by hand.
func TestParseInfoFixtures(t *testing.T) {
	for _, tc := range []struct {
		file    string
		version string
		chips   []Chip
		procs   []Process
	}{
		{"npu-smi-info-910B3x8-24.1.rc1.txt", "24.1.rc1.b030", []Chip{
			b910(0, "910B3", "0000:C1:00.0", 101.8, 43, 3318),
			b910(1, "910B3", "0000:C2:00.0", 92.0, 39, 3314),
			b910(2, "910B3", "0000:81:00.0", 102.0, 40, 3314),
			b910(3, "910B3", "0000:82:00.0", 99.8, 40, 3314),
			b910(4, "910B3", "0000:01:00.0", 98.6, 45, 3314),
			b910(5, "910B3", "0000:02:00.0", 99.7, 44, 3314),
			b910(6, "910B3", "0000:41:00.0", 103.8, 45, 3314),
			b910(7, "910B3", "0000:42:00.0", 98.2, 44, 3315),
		}, nil},
		{"npu-smi-info-910B2C-23.0.2.1-procs.txt", "23.0.2.1", []Chip{
			b910(0, "910B2C", "0000:5A:00.0", 88.6, 51, 20701), // five digits: "20701/ 65536"
			b910(1, "910B2C", "0000:19:00.0", 99.6, 50, 20687),
		}, []Process{{NPU: 0, Chip: 0, PID: 124528, Name: "python3.8", MemMB: 17400}}},
		{"npu-smi-info-310B4-nohbm-23.0.0.txt", "23.0.0", []Chip{{
			NPU: 0, Chip: 0, Device: 0, PhyID: -1, Name: "310B4", Health: "Alarm", BusID: "",
			Power: 0, PowerOK: true, TempC: 65, TempOK: true, AICoreOK: true,
			HugepagesUsed: 15, HugepagesTotal: 15, HugepagesOK: true,
			MemUsedMB: 3628, MemTotalMB: 15609, MemOK: true,
		}}, nil},
		{"npu-smi-info-310P3-24.1.0.1-procs.txt", "24.1.0.1", []Chip{
			p310(1, 0, 0, "0000:01:00.0", 62, 7210, 16302, 44280),
			p310(1, 1, 1, "0000:01:00.0", 62, 7210, 15543, 43693),
			p310(2, 0, 2, "0000:02:00.0", 61, 17057, 35563, 44280),
			p310(2, 1, 3, "0000:02:00.0", 61, 16823, 35204, 43693),
		}, []Process{
			{NPU: 1, Chip: 0, PID: 3277562, Name: "mindie_llm_back", MemMB: 14513},
			{NPU: 1, Chip: 1, PID: 3277565, Name: "mindie_llm_back", MemMB: 14513},
			{NPU: 2, Chip: 0, PID: 3034986, Name: "mindie_llm_back", MemMB: 34207},
			{NPU: 2, Chip: 1, PID: 3034989, Name: "mindie_llm_back", MemMB: 33740},
		}},
		{"npu-smi-info-910B3-container-25.2.3.txt", "25.2.3", []Chip{
			b910(3, "910B3", "0000:82:00.0", 92.8, 36, 3198), // the name cell is one column wider
		}, nil},
		{"npu-smi-info-A3-2chip-25.2.0.txt", "25.2.0", []Chip{
			a3(0, 0, 0, "0000:9C:00.0", 162.8, 37, 3133),
			a3(0, 1, 1, "0000:9E:00.0", -1, 37, 2876),
			a3(1, 0, 2, "0000:37:00.0", 167.1, 38, 3116),
			a3(1, 1, 3, "0000:39:00.0", -1, 38, 10568),
		}, []Process{{NPU: 1, Chip: 1, PID: 990711, Name: "python", MemMB: 7746}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in, err := ParseInfo(read(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if in.Version != tc.version {
				t.Errorf("version %q, want %q", in.Version, tc.version)
			}
			if len(in.Chips) != len(tc.chips) {
				t.Fatalf("%d chips, want %d: %+v", len(in.Chips), len(tc.chips), in.Chips)
			}
			for i := range tc.chips {
				if in.Chips[i] != tc.chips[i] {
					t.Errorf("chip %d:\n got %+v\nwant %+v", i, in.Chips[i], tc.chips[i])
				}
			}
			if !reflect.DeepEqual(in.Procs, tc.procs) {
				t.Errorf("procs %+v, want %+v", in.Procs, tc.procs)
			}
		})
	}
}

func TestDeviceMemoryAndChipProcs(t *testing.T) {
	in, err := ParseInfo(read(t, "npu-smi-info-310P3-24.1.0.1-procs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	u, tot, hbm, ok := in.Chips[2].DeviceMemory()
	if u != 35563*MiB || tot != 44280*MiB || hbm || !ok {
		t.Errorf("310P3 memory %d / %d hbm=%v ok=%v", u, tot, hbm, ok)
	}
	if ps := in.ChipProcs(in.Chips[3]); len(ps) != 1 || ps[0].PID != 3034989 {
		t.Errorf("NPU 2 chip 1 procs %+v", ps)
	}
	in, err = ParseInfo(read(t, "npu-smi-info-A3-2chip-25.2.0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	u, tot, hbm, ok = in.Chips[3].DeviceMemory()
	if u != 10568*MiB || tot != 65536*MiB || !hbm || !ok {
		t.Errorf("A3 chip 3 HBM %d / %d hbm=%v ok=%v", u, tot, hbm, ok)
	}
	if ps := in.ChipProcs(in.Chips[0]); len(ps) != 0 {
		t.Errorf("NPU 0 chip 0 procs %+v", ps)
	}
}

// TestParseInfoRefuses edits real outputs into layouts the parser does not
// know: each must fail naming the line, never give a number.
func TestParseInfoRefuses(t *testing.T) {
	base := string(read(t, "npu-smi-info-910B2C-23.0.2.1-procs.txt"))
	for _, tc := range []struct {
		name      string
		from, to  string
		line      int // 0: no line (whole-output errors)
		msgSubstr string
	}{
		{"new column", "Power(W)    Temp(C)           Hugepages-Usage(page)", "Power(W)    Temp(C)    Volt(V)  Hugepages-Usage(page)", 4, "unknown header"},
		{"second header", "AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)", "AICore(%)   HBM-BW(%)         HBM-Usage(MB)", 5, "unknown second header"},
		{"garbage power", "88.6        51", "8x.6        51", 7, "power"},
		{"missing total", "20701/ 65536", "20701/      ", 8, "used / total"},
		{"extra value", "| 0           0    / 0          20701/ 65536", "| 0     7     0    / 0          20701/ 65536", 8, "third cell"},
		{"fractional temp", "88.6        51 ", "88.6        51.5", 7, "temperature"},
		{"process header", "Process memory(MB)", "Process memory(GB)", 14, "process table header"},
		{"process pid", "124528", "12x528", 16, "process id"},
		{"rule of other glyphs", "+===========================+===============+====================================================+\n| 1 ",
			"+~~~~~~~~~~~~~~~~~~~~~~~~~~~+\n| 1 ", 9, "rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.from) {
				t.Fatalf("fixture lacks %q", tc.from)
			}
			in, err := ParseInfo([]byte(strings.Replace(base, tc.from, tc.to, 1)))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %+v, %v; want a parse error", in, err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msgSubstr) {
				t.Errorf("error %q: line %d, want line %d with %q", err, pe.Line, tc.line, tc.msgSubstr)
			}
		})
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no device table"},
		{"tool error", "dcmi module initialize failed. ret is -8005\n", "line 1: not an npu-smi info table"},
		{"header only", strings.Join(strings.Split(base, "\n")[:5], "\n"), "ends inside the table header"},
		{"half a chip", strings.Join(strings.Split(base, "\n")[:7], "\n"), "line 7: chip row without its second row"},
		{"no chips", strings.Join(strings.Split(base, "\n")[:6], "\n") + "\n", "lists no chips"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInfo([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseUsages(t *testing.T) {
	us, err := ParseUsages(read(t, "npu-smi-usages-910B-25.5.1.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Usages{{NPU: 0, Chip: 0, HBMCapacityMB: 65536, HBMOK: true, DDRCapacityMB: 0, DDROK: true, Pct: map[string]int{
		"DDR Usage Rate": 0, "DDR Hugepages Usage Rate": 0, "HBM Usage Rate": 5, "Aicore Usage Rate": 0,
		"Aivector Usage Rate": 0, "Aicpu Usage Rate": 0, "Ctrlcpu Usage Rate": 6, "DDR Bandwidth Usage Rate": 0,
		"HBM Bandwidth Usage Rate": 0, "NPU Utilization": 0, "Aicube Usage Rate": 0,
	}}}
	if !reflect.DeepEqual(us, want) {
		t.Errorf("got %+v\nwant %+v", us, want)
	}
	// two chips: the second block follows the first's Chip ID
	two := "NPU ID : 4\nChip Count : 2\nHBM Usage Rate(%) : 7\nChip ID : 0\nHBM Usage Rate(%) : 9\nChip ID : 1\n"
	us, err = ParseUsages([]byte(two))
	if err != nil || len(us) != 2 || us[1].NPU != 4 || us[1].Chip != 1 || us[1].Pct["HBM Usage Rate"] != 9 || us[0].Pct["HBM Usage Rate"] != 7 {
		t.Errorf("two chips: %+v, %v", us, err)
	}
	for _, bad := range []string{"", "HBM Usage Rate(%) : 5\n", "NPU ID : 0\nHBM Usage Rate(%) : 500\n", "NPU ID : 0\nno colon here\n", "NPU ID : x\n"} {
		if _, err := ParseUsages([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
