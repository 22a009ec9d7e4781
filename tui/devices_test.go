package tui

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/golden"
	"github.com/npumon/npumon/monitor/npusmi"
	"github.com/npumon/npumon/replay/memusage"
)

// testFeed is a DeviceFeed whose samples the test sets; it counts reads.
type testFeed struct {
	mu    sync.Mutex
	s     npusmi.Sample
	reads int
}

func (f *testFeed) Latest() npusmi.Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.s
}

func (f *testFeed) set(in *npusmi.Info, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.Seq++
	f.s.Err = err
	if err == nil {
		f.s.Info, f.s.At = in, fixedNow.Add(time.Duration(f.s.Seq)*time.Second)
	}
	f.s.Source, f.s.Every = "/usr/local/bin/npu-smi", time.Second
}

func (f *testFeed) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func npuInfo(t testing.TB, name string) *npusmi.Info {
	t.Helper()
	b, err := os.ReadFile(fixture.Path(t, "npu-smi/"+name))
	if err != nil {
		t.Fatal(err)
	}
	in, err := npusmi.ParseInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

const (
	procsFixture = "npu-smi-info-910B2C-23.0.2.1-procs.txt" // pid 124528 holds 17400 MB on NPU 0
	a3Fixture    = "npu-smi-info-A3-2chip-25.2.0.txt"
)

// setAt is set with the reading's moment given.
func (f *testFeed) setAt(in *npusmi.Info, at time.Time) {
	f.set(in, nil)
	f.mu.Lock()
	f.s.At = at
	f.mu.Unlock()
}

// smallEnd is the small capture's last entry: a reading then pairs with the
// allocator's final 20 + 2 MiB.
var smallEnd = time.UnixMicro(t0 + 8*tStep)

func withFeed(t testing.TB, info string, pid int) (Options, *testFeed) {
	f := &testFeed{}
	f.setAt(npuInfo(t, info), smallEnd)
	o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
	o.Devices = f
	o.ProducerPID = func() int { return pid }
	return o, f
}

// TestDevicesViewProducer: D opens the view; the producer's row is marked and
// its device memory is set against the allocator's reserved bytes (the small
// capture reserves 20 + 2 MiB at its end).
func TestDevicesViewProducer(t *testing.T) {
	o, _ := withFeed(t, procsFixture, 124528)
	m := newSized(t, o, 80, 24)
	press(m, "D")
	v := m.View()
	checkFrame(t, v, 80, 24)
	for _, want := range []string{
		"/usr/local/bin/npu-smi 23.0.2.1 · read 07:06:40 · every 1s",
		"0     910B2C      OK        88.6W   51C     0%  [",
		"20.2 GiB / 64.0 GiB",
		"▶ 0     124528    python3.8                  17.0 GiB",
		"▶ pid 124528: device memory 17.0 GiB · allocator reserved 22.0 MiB",
		"both at 07:06:40.008: npu-smi's reading and the allocator's state then",
		"17.0 GiB outside the caching allocator",
		"D or esc back",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	press(m, "esc")
	if v := m.View(); strings.Contains(v, "910B2C") || !strings.Contains(v, "Timeline") {
		t.Errorf("esc did not close the view:\n%s", v)
	}
}

// TestDevicesPairing: the producer's device memory is set against the
// allocator's reserved bytes at the reading's own moment, not at the
// allocator's newest entry; a reading past the newest entry is not compared
// until the entries reach it, and the last paired comparison stays.
func TestDevicesPairing(t *testing.T) {
	src := storeOf(t, smallSnapshot(true), smallOps())
	in := npuInfo(t, procsFixture) // pid 124528 holds 17400 MB
	mine := int64(17400) * npusmi.MiB
	at := func(us int64) npusmi.Sample { return npusmi.Sample{Seq: 1, Info: in, At: time.UnixMicro(us)} }
	for _, tc := range []struct {
		name     string
		at       int64
		paired   bool
		reserved int64
	}{
		// segment A (20 MiB) is reserved at entry 0, segment B (2 MiB) at entry 3
		{"after entry 1", t0 + tStep + tStep/2, true, 20 * mib},
		{"at entry 3", t0 + 3*tStep, true, 22 * mib},
		{"at the newest entry", t0 + 8*tStep, true, 22 * mib},
		{"past the newest entry", t0 + 8*tStep + 1, false, 0},
		{"before the first entry", t0 - 1, false, 0},
	} {
		p := pairSample(src, at(tc.at), 124528)
		if !p.Found || p.Mine != mine || p.Paired != tc.paired || p.Reserved != tc.reserved || p.Newest != t0+8*tStep {
			t.Errorf("%s: %+v, want paired %v reserved %d", tc.name, p, tc.paired, tc.reserved)
		}
	}
	if p := pairSample(src, at(t0+tStep), 99); p.Found || p.Paired {
		t.Errorf("another pid: %+v", p)
	}
	untimed := storeOf(t, smallSnapshot(false), nil)
	if p := pairSample(untimed, at(3), 124528); p.Paired {
		t.Errorf("a capture without times paired: %+v", p)
	}

	// in the view: a reading inside the capture shows 17.0 GiB − 20 MiB,
	// not − 22 MiB (the newest entry's figure)
	f := &testFeed{}
	f.setAt(in, time.UnixMicro(t0+tStep+tStep/2))
	o := testOptions(src)
	o.Devices, o.ProducerPID = f, func() int { return 124528 }
	m := newSized(t, o, 80, 30)
	press(m, "D")
	v := m.View()
	if !strings.Contains(v, "allocator reserved 20.0 MiB") || !strings.Contains(v, "both at 07:06:40.001") ||
		!strings.Contains(v, "17.0 GiB outside the caching allocator") {
		t.Errorf("paired view:\n%s", v)
	}
	// a newer reading past the entries: the paired one stays, the new one waits
	f.setAt(in, time.UnixMicro(t0+9*tStep))
	m.Update(tickMsg(fixedNow))
	v = m.View()
	if !strings.Contains(v, "allocator reserved 20.0 MiB") || !strings.Contains(v, "the newer reading of 07:06:40.009 waits") {
		t.Errorf("pending view:\n%s", v)
	}
	// never paired: no figure at all
	m = newSized(t, o, 80, 30)
	press(m, "D")
	v = m.View()
	if strings.Contains(v, "outside the caching allocator") || !strings.Contains(v, "device memory 17.0 GiB at 07:06:40.009") ||
		!strings.Contains(v, "no comparison") {
		t.Errorf("unpaired view:\n%s", v)
	}
}

func TestDevicesViewProducerNotListed(t *testing.T) {
	o, _ := withFeed(t, a3Fixture, 4242)
	m := newSized(t, o, 80, 24)
	press(m, "D")
	v := m.View()
	if !strings.Contains(v, "pid 4242 (the producer) is not in the process table") ||
		!strings.Contains(v, "0.1   Ascend910") {
		t.Errorf("view:\n%s", v)
	}
	if strings.Contains(v, "outside the caching allocator") {
		t.Errorf("a comparison without the producer's row:\n%s", v)
	}
}

// TestDevicesKeyFromEveryMode: D opens the view while loading, from the
// capture picker, from help (after closing it) and from every pane.
func TestDevicesKeyFromEveryMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"timeline", nil},
		{"segments", []string{"2"}},
		{"ops", []string{"4"}},
		{"filter typed, then applied", []string{"/", "x", "enter"}},
		{"help closed", []string{"?", "?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := withFeed(t, procsFixture, 0)
			m := newSized(t, o, 80, 24)
			press(m, tc.keys...)
			press(m, "D")
			if !m.devicesShown() || !strings.Contains(m.View(), "910B2C") {
				t.Fatalf("not shown:\n%s", m.View())
			}
			press(m, "D")
			if m.devicesShown() {
				t.Fatal("D did not close it")
			}
		})
	}
	t.Run("loading", func(t *testing.T) {
		o, _ := withFeed(t, procsFixture, 0)
		o.Load = func(ctx context.Context, report func(Progress)) error { <-ctx.Done(); return ctx.Err() }
		m := newSized(t, o, 80, 24)
		defer m.Close()
		press(m, "D")
		if !strings.Contains(m.View(), "910B2C") {
			t.Fatalf("not shown while loading:\n%s", m.View())
		}
	})
	t.Run("typing D in the filter", func(t *testing.T) {
		o, _ := withFeed(t, procsFixture, 0)
		m := newSized(t, o, 80, 24)
		press(m, "/", "D")
		if m.devicesShown() || m.pr.ti.Value() != "D" {
			t.Fatalf("D left the prompt: shown %v, prompt %q", m.devicesShown(), m.pr.ti.Value())
		}
	})
	t.Run("no feed", func(t *testing.T) {
		m := small(t, 80, 24)
		press(m, "D")
		if m.devicesShown() {
			t.Fatal("shown without a feed")
		}
	})
}

// TestDevicesViewFollowsFeed: a new sample shows on the next tick; the feed
// is not read while the view is closed.
func TestDevicesViewFollowsFeed(t *testing.T) {
	o, f := withFeed(t, procsFixture, 0)
	m := newSized(t, o, 80, 24)
	before := f.readCount()
	for range 5 {
		m.Update(tickMsg(fixedNow))
	}
	if f.readCount() != before {
		t.Errorf("the feed was read %d times while the view was closed", f.readCount()-before)
	}
	press(m, "D")
	f.set(npuInfo(t, a3Fixture), nil)
	m.Update(tickMsg(fixedNow))
	v := m.View()
	if !strings.Contains(v, "1.1   Ascend910") || !strings.Contains(v, "990711") {
		t.Fatalf("new sample not shown:\n%s", v)
	}
	f.set(nil, errors.New("npu-smi info: exit status 3: dcmi module initialize failed"))
	m.Update(tickMsg(fixedNow))
	v = m.View()
	if !strings.Contains(v, "last poll failed: npu-smi info: exit status 3") || !strings.Contains(v, "990711") {
		t.Fatalf("a failed poll keeps the table and says so:\n%s", v)
	}
}

func TestDevicesViewNoNPUSMI(t *testing.T) {
	f := &testFeed{}
	f.set(nil, errors.New(`npu-smi not found: exec: "npu-smi": executable file not found in $PATH`))
	m := newSized(t, Options{Devices: f, DevicesOnly: true, SourceName: "npu-smi", Live: true, Now: func() time.Time { return fixedNow }, Location: time.UTC}, 80, 24)
	v := m.View()
	checkFrame(t, v, 80, 24)
	if !strings.Contains(v, "npu-smi not found") || !strings.Contains(v, "--npu-smi or NPUMON_NPU_SMI") || strings.Contains(v, "OK") {
		t.Errorf("view:\n%s", v)
	}
	if cmd := press(m, "esc"); isQuit(cmd) || !m.devicesShown() {
		t.Error("esc left the standalone view")
	}
	if !isQuit(press(m, "q")) {
		t.Error("q does not quit")
	}
}

// TestDevicesViewScrolls: 16 chips and their processes on 80x24 scroll.
func TestDevicesViewScrolls(t *testing.T) {
	in := npuInfo(t, "npu-smi-info-910B3x8-24.1.rc1.txt")
	more := *in
	more.Chips = append(append(append([]npusmi.Chip{}, in.Chips...), in.Chips...), in.Chips...)
	for i := 8; i < 24; i++ {
		more.Chips[i].NPU = i
	}
	f := &testFeed{}
	f.set(&more, nil)
	m := newSized(t, Options{Devices: f, DevicesOnly: true, SourceName: "npu-smi", Live: true, Location: time.UTC}, 80, 24)
	v := m.View()
	if !strings.Contains(v, "lines (↑/↓)") || strings.Contains(v, "Processes") {
		t.Fatalf("first page:\n%s", v)
	}
	for range 30 { // past the end: stops at the last page
		press(m, "down")
	}
	v = m.View()
	if !strings.Contains(v, "Processes") || !strings.Contains(v, "23    910B3") || strings.Contains(v, "\n0     910B3") || !strings.Contains(v, "NPU   Name") {
		t.Fatalf("scrolled:\n%s", v)
	}
	press(m, "g")
	if !strings.Contains(m.View(), "0     910B3") {
		t.Fatalf("g did not go back up:\n%s", m.View())
	}
}

// TestDevicesGolden draws the devices view at 80x24: standalone (npumon
// devices --watch) on the A3 layout, the 310P layout without HBM in ASCII,
// and over an attached capture with the producer in the table.
func TestDevicesGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) Options
		keys []string
		wait string
	}{
		{"80x24_devices_a3", func(t *testing.T) Options {
			f := &testFeed{}
			f.set(npuInfo(t, a3Fixture), nil)
			return Options{Devices: f, DevicesOnly: true, SourceName: "npu-smi", Live: true, Location: time.UTC}
		}, nil, "990711"},
		{"80x24_devices_310p_ascii", func(t *testing.T) Options {
			f := &testFeed{}
			f.set(npuInfo(t, "npu-smi-info-310P3-24.1.0.1-procs.txt"), nil)
			return Options{Devices: f, DevicesOnly: true, SourceName: "npu-smi", Live: true, Location: time.UTC, ASCII: true}
		}, nil, "3034989"},
		{"80x24_devices_producer", func(t *testing.T) Options {
			o, _ := withFeed(t, procsFixture, 124528)
			return o
		}, []string{"D"}, "outside the caching allocator"},
		{"80x24_devices_memusage_no_npusmi", func(t *testing.T) Options {
			f := &testFeed{}
			f.set(nil, errors.New(`npu-smi not found: exec: "npu-smi": executable file not found in $PATH`))
			o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
			o.Devices, o.MemUsage = f, memFiles(t)
			return o
		}, []string{"D"}, "total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := teatest.NewTestModel(t, New(tc.opts(t)), teatest.WithInitialTermSize(80, 24))
			for _, k := range tc.keys {
				tm.Send(keyMsg(k))
			}
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.wait)) },
				teatest.WithDuration(time.Minute))
			tm.Send(keyMsg("q"))
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute))
			v := fm.View()
			checkFrame(t, v, 80, 24)
			golden.Check(t, golden.Path(t), []byte(v))
		})
	}
}

// memFiles is a MemUsage of the two memUsageInfo fixtures.
func memFiles(t testing.TB) func() []*memusage.File {
	var fs []*memusage.File
	for _, n := range []string{"device_0_memUsageInfo_20261201103016.csv", "device_1_memUsageInfo_20261201103017.csv"} {
		f, err := memusage.Read("../replay/memusage/testdata/" + n)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	return func() []*memusage.File { return fs }
}

// TestDevicesMemUsage: with the capture's memUsageInfo CSVs the devices
// view lists each device's modules, most first, under the process table —
// and without npu-smi still lists them under the error; the oom panel's
// verdict names the modules' figures.
func TestDevicesMemUsage(t *testing.T) {
	o, _ := withFeed(t, procsFixture, 124528)
	o.MemUsage = memFiles(t)
	m := newSized(t, o, 80, 40)
	press(m, "D")
	v := m.View()
	for _, want := range []string{
		"Outside the caching allocator, by module (torch_npu memUsageInfo, at the dump)",
		"device 0 · device_0_memUsageInfo_20261201103016.csv · 2026-12-01 10:30:16",
		"HCCL                   1.20 GiB  peak   1.50 GiB",
		"RUNTIME                 310 MiB  peak    342 MiB",
		"total                  1.56 GiB",
		"device 1 · device_1_memUsageInfo_20261201103017.csv",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "DVPP") {
		t.Errorf("a module holding nothing is listed:\n%s", v)
	}
	if i, j := strings.Index(v, "HCCL"), strings.Index(v, "AICPU"); i < 0 || j < i {
		t.Errorf("modules not most first:\n%s", v)
	}
}

var _ tea.Model = (*Model)(nil)

// BenchmarkDevicesView draws the devices view of 16 chips with 64
// processes (what a redraw after a new sample costs) against drawing the
// main panes of the small capture at the same size.
func BenchmarkDevicesView(b *testing.B) {
	in := npuInfo(b, "npu-smi-info-910B3x8-24.1.rc1.txt")
	big := *in
	big.Chips = append(append([]npusmi.Chip{}, in.Chips...), in.Chips...)
	for i := range big.Chips {
		big.Chips[i].NPU = i
		for j := range 4 {
			big.Procs = append(big.Procs, npusmi.Process{NPU: i, PID: 1000 + 4*i + j, Name: "python", MemMB: 1024})
		}
	}
	f := &testFeed{}
	f.set(&big, nil)
	o := testOptions(storeOf(b, smallSnapshot(true), smallOps()))
	o.Devices, o.ProducerPID = f, func() int { return 1000 }
	b.Run("baseline_main_view", func(b *testing.B) {
		m := newSized(b, o, 120, 40)
		for b.Loop() {
			m.dirty = true
			_ = m.View()
		}
	})
	b.Run("devices_view", func(b *testing.B) {
		m := newSized(b, o, 120, 40)
		press(m, "D")
		for b.Loop() {
			m.dirty = true
			_ = m.View()
		}
	})
}
