package wire

import (
	"reflect"
	"testing"
)

// TestHelloPeaks: the producer's own peaks travel as an optional trailing
// HELLO field; a HELLO without them decodes with none, and a truncated
// one is an error.
func TestHelloPeaks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peaks []DevicePeak
	}{
		{"without peaks", nil},
		{"with peaks", []DevicePeak{{Device: 0, ActiveBytes: 29_400_000_000, ReservedBytes: 31 << 30}, {Device: 3, ActiveBytes: 1, ReservedBytes: 2 << 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &enc{texts: testTexts}
			encodeHello(e, &Hello{Version: ProtocolVersion, PID: 7, Host: "h", Peaks: tc.peaks})
			h, err := decodeHello(e.b[5:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.Peaks, tc.peaks) {
				t.Errorf("peaks %+v, want %+v", h.Peaks, tc.peaks)
			}
			if tc.peaks != nil {
				if _, err := decodeHello(e.b[5 : len(e.b)-1]); err == nil {
					t.Error("a truncated peak list decoded")
				}
			}
		})
	}
}
