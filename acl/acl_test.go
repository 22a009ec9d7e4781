package acl

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

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

func wantCode(t *testing.T, err error, sentinel *Error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want code %d (%s)", err, sentinel.Code, CodeName(sentinel.Code))
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.API == "" || ae.Msg == "" {
		t.Fatalf("error %#v lacks API or message", err)
	}
}

func TestSmoke(t *testing.T) {
	d, _ := newTestDevice(t)
	free, total, err := d.GetMemInfo(MemHBM)
	if err != nil || total != 61*GiB || free != total {
		t.Fatalf("GetMemInfo = %d, %d, %v", free, total, err)
	}
	p, err := d.Malloc(100, HugeFirst)
	if err != nil || p != HBMBase {
		t.Fatalf("Malloc = %#x, %v", p, err)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	wantCode(t, d.Free(p), ErrParamInvalid)
}
