package acl

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newTestDevice returns device 0 of a runtime on a manual clock.
func newTestDevice(t testing.TB, specs ...DeviceSpec) (*Device, *ManualClock) {
	t.Helper()
	clk := NewManualClock(t0)
	r := NewRuntime(Config{Devices: specs, Clock: clk})
	d, err := r.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	return d, clk
}

// smallDevice has exactly mib MiB of usable HBM.
func smallDevice(t testing.TB, mib int64) *Device {
	d, _ := newTestDevice(t, DeviceSpec{HBMBytes: mib * MiB, SystemReserved: -1})
	return d
}

// wantCode fails unless err is an *Error with sentinel's code, naming the
// API and saying why.
func wantCode(t *testing.T, err error, sentinel *Error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %s (%d)", err, CodeName(sentinel.Code), sentinel.Code)
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.API == "" || ae.Msg == "" {
		t.Fatalf("error %#v lacks API or message", err)
	}
}

func memInfo(t *testing.T, d *Device) (free, total int64) {
	t.Helper()
	free, total, err := d.GetMemInfo(MemHBM)
	if err != nil {
		t.Fatal(err)
	}
	return free, total
}

func TestRuntimeDefaults(t *testing.T) {
	r := NewRuntime(Config{})
	if r.GetDeviceCount() != 1 || r.GetDevice() != 0 {
		t.Fatalf("count %d current %d", r.GetDeviceCount(), r.GetDevice())
	}
	if _, ok := r.Clock().(realClock); !ok {
		t.Errorf("default clock %T, want the real clock", r.Clock())
	}
	d := r.Current()
	spec := d.Spec()
	if spec.Name != "Ascend910B3" || spec.HBMBytes != 64*GiB || spec.SystemReserved != 3*GiB {
		t.Errorf("default spec %+v", spec)
	}
	free, total, err := d.GetMemInfo(MemHBM)
	if err != nil || free != 61*GiB || total != 61*GiB {
		t.Errorf("GetMemInfo = %d, %d, %v; want 61 GiB both", free, total, err)
	}
	info := d.Info()
	if info != (DeviceInfo{ID: 0, Name: "Ascend910B3", HBMTotal: 61 * GiB}) {
		t.Errorf("Info = %+v", info)
	}
}

func TestRuntimeDevices(t *testing.T) {
	clk := NewManualClock(t0)
	r := NewRuntime(Config{Clock: clk, Devices: []DeviceSpec{
		{}, {Name: "Ascend910B4", HBMBytes: 32 * GiB, SystemReserved: 2 * GiB}, {HBMBytes: 16 * MiB, SystemReserved: -5},
	}})
	if r.GetDeviceCount() != 3 || r.Clock() != Clock(clk) {
		t.Fatalf("count %d clock %v", r.GetDeviceCount(), r.Clock())
	}
	if err := r.SetDevice(2); err != nil || r.GetDevice() != 2 || r.Current().ID() != 2 {
		t.Fatalf("SetDevice(2): %v, current %d", err, r.GetDevice())
	}
	d1, err := r.Device(1)
	if err != nil || d1.Info().Name != "Ascend910B4" || d1.Info().HBMTotal != 30*GiB || d1.ID() != 1 {
		t.Errorf("device 1: %+v, %v", d1.Info(), err)
	}
	d2, _ := r.Device(2)
	if d2.Info().HBMTotal != 16*MiB {
		t.Errorf("negative SystemReserved: total %d, want 16 MiB", d2.Info().HBMTotal)
	}
	for _, id := range []int{-1, 3} {
		wantCode(t, r.SetDevice(id), ErrInvalidDevice)
		_, err := r.Device(id)
		wantCode(t, err, ErrInvalidDevice)
	}
	if r.GetDevice() != 2 {
		t.Errorf("failed SetDevice changed the current device to %d", r.GetDevice())
	}
}

func TestDeviceTooSmall(t *testing.T) {
	// Reservation above capacity leaves one granule rather than nothing.
	d, _ := newTestDevice(t, DeviceSpec{HBMBytes: 4 * GiB, SystemReserved: 8 * GiB})
	if _, total := memInfo(t, d); total != Granularity {
		t.Fatalf("total %d, want one granule", total)
	}
}

func TestGetMemInfoAttrs(t *testing.T) {
	d := smallDevice(t, 64)
	if _, err := d.Malloc(10*MiB, NormalOnly); err != nil {
		t.Fatal(err)
	}
	want := 64*MiB - (10*MiB + 32)
	for _, a := range []MemAttr{MemHBM, MemHBMHuge, MemHBMNormal, MemHBMP2PHuge, MemHBMP2PNormal, MemHBMHuge1G, MemHBMP2PHuge1G} {
		free, total, err := d.GetMemInfo(a)
		if err != nil || free != want || total != 64*MiB {
			t.Errorf("attr %d: %d, %d, %v", a, free, total, err)
		}
	}
	for _, a := range []MemAttr{MemDDR, MemDDRHuge, MemDDRNormal, MemDDRP2PHuge, MemDDRP2PNormal} {
		free, total, err := d.GetMemInfo(a)
		if err != nil || free != 0 || total != 0 {
			t.Errorf("DDR attr %d: %d, %d, %v; the simulated parts have no DDR", a, free, total, err)
		}
	}
	for _, a := range []MemAttr{-1, 12} {
		_, _, err := d.GetMemInfo(a)
		wantCode(t, err, ErrParamInvalid)
	}
}
