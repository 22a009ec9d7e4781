package acl

import "testing"

// FuzzDeviceMemory interprets the input as a sequence of Malloc,
// MallocAlign32, Free and MallocPhysical/FreePhysical calls on a small
// device and checks the accounting after each: used equals the live
// footprints, free ranges plus used equal capacity, live allocations never
// overlap, and tearing everything down restores one free range.
func FuzzDeviceMemory(f *testing.F) {
	f.Add([]byte{0, 10, 1, 200, 2, 0, 3, 1, 0, 255, 2, 1})
	f.Add([]byte{1, 255, 1, 255, 1, 255, 2, 1, 3, 3, 4, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		d := smallDevice(t, 32)
		var ptrs []uint64
		var handles []PhysHandle
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%5, int64(ops[i+1])
			switch op {
			case 0: // Malloc: sizes from 1 B to ~3 MiB
				if p, err := d.Malloc(arg*arg*53+1, MallocPolicy(arg%3)); err == nil {
					ptrs = append(ptrs, p)
				}
			case 1:
				if p, err := d.MallocAlign32(arg*arg*97+1, MallocPolicy(arg%3)); err == nil {
					ptrs = append(ptrs, p)
				}
			case 2:
				if len(ptrs) > 0 {
					j := int(arg) % len(ptrs)
					if err := d.Free(ptrs[j]); err != nil {
						t.Fatal(err)
					}
					ptrs = append(ptrs[:j], ptrs[j+1:]...)
				}
			case 3:
				if h, err := d.MallocPhysical((arg%4 + 1) * Granularity); err == nil {
					handles = append(handles, h)
				}
			case 4:
				if len(handles) > 0 {
					j := int(arg) % len(handles)
					if err := d.FreePhysical(handles[j]); err != nil {
						t.Fatal(err)
					}
					handles = append(handles[:j], handles[j+1:]...)
				}
			}
			checkAccounting(t, d)
		}
		for _, p := range ptrs {
			if err := d.Free(p); err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range handles {
			if err := d.FreePhysical(h); err != nil {
				t.Fatal(err)
			}
		}
		if d.LargestFreeRange() != 32*MiB || d.Info().HBMUsed != 0 {
			t.Fatalf("after teardown: largest %d used %d", d.LargestFreeRange(), d.Info().HBMUsed)
		}
	})
}

func checkAccounting(t *testing.T, d *Device) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	type piece struct{ a, b uint64 }
	var taken []piece
	var sum int64
	for p, a := range d.allocs {
		taken = append(taken, piece{p, p + uint64(a.footprint)})
		sum += a.footprint
	}
	for _, ph := range d.phys {
		for _, pg := range ph.pages {
			taken = append(taken, piece{pg.start, pg.end})
		}
		sum += ph.size
	}
	if sum != d.used {
		t.Fatalf("used %d, live footprints %d", d.used, sum)
	}
	var free uint64
	for _, r := range d.hbm.free {
		free += r.end - r.start
	}
	if int64(free)+d.used != d.usable {
		t.Fatalf("free ranges %d + used %d != %d", free, d.used, d.usable)
	}
	for i, x := range taken {
		if d.hbm.containing(x.a) >= 0 {
			t.Fatalf("live piece at %#x listed free", x.a)
		}
		for _, y := range taken[i+1:] {
			if x.a < y.b && y.a < x.b {
				t.Fatalf("live pieces overlap: %+v %+v", x, y)
			}
		}
	}
}
