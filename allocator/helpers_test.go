package allocator

import (
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// testEnv is one simulated device on a manual clock with an allocator.
type testEnv struct {
	t     *testing.T
	rt    *acl.Runtime
	dev   *acl.Device
	clock *acl.ManualClock
	a     *Allocator
}

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newEnv builds an allocator for conf (NPU flavour unless cuda) on a device
// with hbm usable bytes (0 = default 61 GiB).
func newEnv(t *testing.T, conf string, cuda bool, hbm int64, opts ...Option) *testEnv {
	t.Helper()
	clock := acl.NewManualClock(epoch)
	spec := acl.DeviceSpec{}
	if hbm > 0 {
		spec = acl.DeviceSpec{HBMBytes: hbm, SystemReserved: -1}
	}
	rt := acl.NewRuntime(acl.Config{Devices: []acl.DeviceSpec{spec}, Clock: clock})
	dev, err := rt.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	if cuda {
		cfg, err = config.ParseCUDAConfig(conf)
	} else {
		cfg, err = config.ParseConfig(conf)
	}
	if err != nil {
		t.Fatalf("config %q: %v", conf, err)
	}
	a, err := New(dev, cfg, append([]Option{WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	a.RecordHistory(true, RecordAll, 1<<20)
	return &testEnv{t: t, rt: rt, dev: dev, clock: clock, a: a}
}

func (e *testEnv) stream() acl.Stream {
	e.t.Helper()
	s, err := e.dev.CreateStream()
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *testEnv) malloc(size int64, s acl.Stream) uint64 {
	e.t.Helper()
	p, err := e.a.Malloc(size, s)
	if err != nil {
		e.t.Fatalf("Malloc(%d): %v", size, err)
	}
	return p
}

func (e *testEnv) free(p uint64) {
	e.t.Helper()
	if err := e.a.Free(p); err != nil {
		e.t.Fatalf("Free(%#x): %v", p, err)
	}
}

// trace returns the recorded trace without the entries of the snapshots
// taken to read it.
func (e *testEnv) trace() []snapshot.TraceEntry {
	var out []snapshot.TraceEntry
	for _, te := range e.a.Snapshot().DeviceTraces[0] {
		if te.Action != snapshot.ActionSnapshot {
			out = append(out, te)
		}
	}
	return out
}

// poolLists returns p's free and unmapped blocks in set order, after
// checking that each set's keys match their blocks and its chunks are
// well formed.
func poolLists(t *testing.T, p *blockPool) (blocks, unmapped []*block) {
	t.Helper()
	list := func(s *keySet, addr bool) []*block {
		var out []*block
		if len(s.lasts) != len(s.chunks) {
			t.Fatalf("%d chunks, %d last keys", len(s.chunks), len(s.lasts))
		}
		for i, ch := range s.chunks {
			if len(ch) == 0 && len(s.chunks) > 1 || len(ch) > chunkMax {
				t.Fatalf("chunk %d of %d holds %d keys", i, len(s.chunks), len(ch))
			}
			if len(ch) > 0 && s.lasts[i] != ch[len(ch)-1] {
				t.Fatalf("chunk %d's last key is not in lasts", i)
			}
			for j := range ch {
				b := p.tab.blocks[ch[j].id]
				if b == nil {
					t.Fatalf("key %+v has no block", ch[j])
				}
				want := b.key()
				if addr {
					want = b.addrKey()
				}
				if ch[j] != want {
					t.Fatalf("key %+v does not match its block", ch[j])
				}
				out = append(out, b)
			}
		}
		if len(out) != s.len() {
			t.Fatalf("set holds %d keys, counts %d", len(out), s.len())
		}
		return out
	}
	return list(&p.blocks, false), list(&p.unmapped, true)
}
