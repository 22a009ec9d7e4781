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

func withFeed(t testing.TB, info string, pid int) (Options, *testFeed) {
	f := &testFeed{}
	f.set(npuInfo(t, info), nil)
	o := testOptions(newFakeSource(smallSnapshot(true), smallOps()))
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
		"/usr/local/bin/npu-smi 23.0.2.1 · read 12:00:01 · every 1s",
		"0     910B2C      OK        88.6W   51C     0%  [",
		"20.2 GiB / 64.0 GiB",
		"▶ 0     124528    python3.8                  17.0 GiB",
		"▶ pid 124528: device memory 17.0 GiB · allocator reserved 22.0 MiB",
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
		if m.devicesShown() || m.ti.Value() != "D" {
			t.Fatalf("D left the prompt: shown %v, prompt %q", m.devicesShown(), m.ti.Value())
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
	o := testOptions(newFakeSource(smallSnapshot(true), smallOps()))
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
