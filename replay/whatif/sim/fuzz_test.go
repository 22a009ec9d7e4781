package sim

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/whatif"
)

// FuzzSimulate feeds arbitrary traces (any action, address, size and
// stream, in any order) through every configuration family: the engine must
// neither panic nor fail, and its curves must stay consistent.
func FuzzSimulate(f *testing.F) {
	f.Add([]byte{0, 1, 10, 0, 1, 1, 10, 0, 2, 1, 10, 0})
	f.Add([]byte{0, 1, 200, 1, 0, 2, 200, 1, 1, 1, 200, 1, 4, 3, 30, 0, 2, 1, 200, 1, 9, 0, 255, 0})
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	{
		actions := []snapshot.Action{
			snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionFree,
			snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap,
			snapshot.ActionSegmentUnmap, snapshot.ActionSnapshot, snapshot.ActionOOM,
		}
		var tr []snapshot.TraceEntry
		for len(data) >= 4 && len(tr) < 2000 {
			e := snapshot.TraceEntry{
				Action: actions[int(data[0])%len(actions)],
				Addr:   uint64(data[1]%16) << 24,
				Size:   int64(data[2]) << (data[3] % 24),
				Stream: uint64(data[3] % 3),
			}
			if data[3] == 255 {
				e.Size = -1
			}
			if e.Action == snapshot.ActionOOM {
				e.DeviceFree = int64(binary.LittleEndian.Uint16(data[1:3])) << 16
			}
			tr = append(tr, e)
			data = data[4:]
		}
		if len(tr) == 0 {
			return // no device to simulate
		}
		s := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}}
		for _, f := range []config.Flavour{config.FlavourNPU, config.FlavourCUDA} {
			res, err := SimulateSnapshot(context.Background(), s, f, whatif.Options{
				Confs: []string{"expandable_segments:True", "max_split_size_mb:20", "roundup_power2_divisions:4"},
			})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Devices[0]
			for _, r := range d.Runs {
				if len(r.Reserved) == 0 || r.Reserved[0].Index != -1 {
					t.Fatalf("%s: curve %v", r.Name, r.Reserved)
				}
				for i := 1; i < len(r.Reserved); i++ {
					if r.Reserved[i].Index <= r.Reserved[i-1].Index || r.Reserved[i].Bytes < 0 {
						t.Fatalf("%s: curve not increasing in entries: %v", r.Name, r.Reserved)
					}
				}
				if r.PeakReserved > config.RoundUp(d.DeviceMem, 2*config.MiB) { // acl counts whole pages
					t.Fatalf("%s: peak %d over the device's %d", r.Name, r.PeakReserved, d.DeviceMem)
				}
			}
		}
	}
}
