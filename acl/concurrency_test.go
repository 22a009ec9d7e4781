package acl

import (
	"sync"
	"testing"
	"time"
)

// TestConcurrentUse hammers one device from several goroutines (run with
// -race) and checks that every byte comes back.
func TestConcurrentUse(t *testing.T) {
	d, _ := newTestDevice(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := d.CreateStream()
			e, _ := d.CreateEvent()
			var ptrs []uint64
			for i := range 200 {
				p, err := d.Malloc(int64(g*1000+i*4096+1), MallocPolicy(i%3))
				if err != nil {
					t.Error(err)
					return
				}
				ptrs = append(ptrs, p)
				d.Launch(s, time.Microsecond)
				d.RecordEvent(e, s)
				d.QueryEvent(e)
				if i%10 == 0 {
					h, err := d.MallocPhysical(2 * MiB)
					if err != nil {
						t.Error(err)
						return
					}
					va, _ := d.ReserveMemAddress(2*MiB, 0, 0, 1)
					if err := d.MapMem(va, 2*MiB, 0, h); err != nil {
						t.Error(err)
					}
					d.UnmapMem(va)
					d.FreePhysical(h)
					d.ReleaseMemAddress(va)
				}
				_ = d.Info()
			}
			d.SynchronizeStream(s)
			for _, p := range ptrs {
				if err := d.Free(p); err != nil {
					t.Error(err)
				}
			}
			d.DestroyEvent(e)
			d.DestroyStream(s)
		}()
	}
	wg.Wait()
	free, total := memInfo(t, d)
	if free != total || d.LargestFreeRange() != total || d.Info().Streams != 0 {
		t.Fatalf("after concurrent use: free %d of %d, largest %d, streams %d", free, total, d.LargestFreeRange(), d.Info().Streams)
	}
}
