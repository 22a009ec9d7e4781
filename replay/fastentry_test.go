package replay

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/addrmap"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// testDecoder is a decoder of data set up as decodeFormat sets one up,
// with every entry the general way when noFast.
func testDecoder(data []byte, stream, noFast bool) *decoder {
	b := newBuilder()
	b.stream = stream
	in := newByteReader(bytes.NewReader(data), int64(len(data)), nil)
	b.offset, b.total = in.offset, int64(len(data))
	b.setLimit(int64(len(data)))
	d := &decoder{in: in, b: b, memo: newMemo(), noFast: noFast}
	b.memo = &d.memo
	return d
}

// bothWays is a pickle decoded with fastEntry and with every entry the
// general way; n is how many entries fastEntry decoded.
type bothWays struct {
	fast, slow       *snapshot.Snapshot
	fastErr, slowErr error
	n                int
}

func decodeBothWays(data []byte, stream bool) bothWays {
	type result struct {
		snap *snapshot.Snapshot
		n    int
		err  error
	}
	run := func(noFast bool) result {
		d := testDecoder(data, stream, noFast)
		top, err := d.run()
		if err != nil {
			return result{nil, d.fast.count, offsetError(d.opOff, err)}
		}
		snap, _, err := d.b.finish(top)
		return result{snap, d.fast.count, err}
	}
	f, s := run(false), run(true)
	return bothWays{fast: f.snap, slow: s.snap, fastErr: f.err, slowErr: s.err, n: f.n}
}

// sameDecode fails t unless both ways agree: the same model, or both an
// error. A pickle that refers to a trace-entry dict through the memo
// before its list takes it is the one case where only fastEntry refuses.
func sameDecode(t *testing.T, name string, data []byte) int {
	t.Helper()
	r := decodeBothWays(data, false)
	fe, se := r.fastErr, r.slowErr
	switch {
	case fe == nil && se == nil:
		if !reflect.DeepEqual(r.fast, r.slow) {
			t.Errorf("%s: the fast and the general entry decoding give different models", name)
		}
	case fe != nil && se == nil:
		if !strings.Contains(fe.Error(), "already placed") {
			t.Errorf("%s: only the fast entry decoding fails: %v", name, fe)
		}
	case fe == nil && se != nil:
		t.Errorf("%s: only the general entry decoding fails: %v", name, se)
	}
	return r.n
}

// TestFastEntriesMatchGeneral: every pickle the repository has, the
// benchmark generator's shapes (protocol 4 frames fall inside entries) and
// pickles Python writes to hit each way out of fastEntry decode to the same
// model with and without it, and fastEntry does take the entries of the
// common shapes.
func TestFastEntriesMatchGeneral(t *testing.T) {
	var files []string
	files = append(files, fixtures(t)...)
	local, _ := filepath.Glob("testdata/*.pickle")
	files = append(files, local...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := sameDecode(t, f, data)
		if strings.Contains(f, "assignment2") && n < 3000 {
			t.Errorf("%s: fastEntry took %d of 5,163 entries", f, n)
		}
	}
	py := fixture.Tool(t, "python3", "python3")
	dir := t.TempDir()
	for _, shape := range []string{"distinct", "shared"} {
		path := filepath.Join(dir, shape+".pickle")
		if out, err := exec.Command(py, "testdata/gen_bench.py", path, "20000", shape).CombinedOutput(); err != nil {
			t.Fatalf("gen_bench.py: %v\n%s", err, out)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := sameDecode(t, shape, data); n < 18000 {
			t.Errorf("%s: fastEntry took %d of 20,000 entries", shape, n)
		}
		r := decodeBothWays(data, true)
		if r.fastErr != nil || r.slowErr != nil || !reflect.DeepEqual(r.fast, r.slow) || !sameAccs(fastAccs(t, data, false), fastAccs(t, data, true)) {
			t.Errorf("%s streamed: the two ways differ (%v, %v)", shape, r.fastErr, r.slowErr)
		}
	}
	// Odd but plain pickles, each written by Python in protocols 2 and 4.
	const odd = `
import pickle, sys
fr = [{'filename': 'a.py', 'line': 1, 'name': 'f'}, {'filename': 'b.py', 'line': 2, 'name': 'g'}]
def e(i, **kw):
    d = {'action': 'alloc', 'addr': 4096 * (i + 1), 'size': 512, 'stream': 0, 'time_us': 1000 + i, 'frames': [fr[i % 2]] if i % 3 else list(fr)}
    d.update(kw)
    return d
seg = [{'device': 0, 'address': 4096, 'total_size': 1 << 24, 'stream': 0, 'segment_type': 'large', 'allocated_size': 0, 'active_size': 0, 'requested_size': 0, 'blocks': [{'address': 4096, 'size': 1 << 24, 'state': 'inactive'}]}]
cases = {
  'plain': [e(i) for i in range(40)],
  'extra_key': [e(i, vendor=[1, 2]) for i in range(40)],
  'pool_and_strings': [e(i, pool_id=(0, i), compile_context='ctx%d' % i, user_metadata='') for i in range(40)],
  'none_values': [e(i, time_us=None, frames=None) for i in range(40)],
  'float_size': [e(i, size=512.0) for i in range(40)],
  'huge_addr': [e(i, addr=1 << 70) for i in range(40)],
  'str_size': [e(i, size='x') for i in range(40)],
  'bool_stream': [e(i, stream=True) for i in range(40)],
  'new_actions': [e(i, action='vendor_%d' % i) for i in range(40)],
  'many_frames': [e(i, frames=fr * 700) for i in range(4)],
}
shared = e(0)
cases['shared_entry'] = [shared, e(1), shared]
cases['shared_other_list'] = [e(i) for i in range(40)]
for name, tr in cases.items():
    for proto in (2, 4):
        top = {'segments': seg, 'device_traces': [tr]}
        if name == 'shared_other_list':
            top['extra'] = [tr[5]]
        with open('%s/%s_p%d.pickle' % (sys.argv[1], name, proto), 'wb') as f:
            pickle.dump(top, f, protocol=proto)
`
	if out, err := exec.Command(py, "-c", odd, dir).CombinedOutput(); err != nil {
		t.Fatalf("writing the odd pickles: %v\n%s", err, out)
	}
	oddFiles, _ := filepath.Glob(filepath.Join(dir, "*_p?.pickle"))
	if len(oddFiles) != 24 {
		t.Fatalf("%d odd pickles written, want 24", len(oddFiles))
	}
	for _, f := range oddFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sameDecode(t, filepath.Base(f), data)
	}
}

// fastAccs decodes streamed and returns the per-device running figures.
func fastAccs(t *testing.T, data []byte, noFast bool) []*traceAcc {
	t.Helper()
	d := testDecoder(data, true, noFast)
	top, err := d.run()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.b.finish(top); err != nil {
		t.Fatal(err)
	}
	return d.b.accs
}

// sameAccs compares two folds: their seen sets by their addresses (each
// table has its own hash seed, so their slots differ), the rest field by
// field.
func sameAccs(a, b []*traceAcc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) {
			return false
		}
		if a[i] == nil {
			continue
		}
		x, y := *a[i], *b[i]
		if !slices.Equal(slices.Sorted(maps.Keys(maps.Collect(x.seen.All()))), slices.Sorted(maps.Keys(maps.Collect(y.seen.All())))) {
			return false
		}
		x.seen, y.seen = addrmap.Map[struct{}]{}, addrmap.Map[struct{}]{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// FuzzFastEntries: on any input the fast and the general entry decoding
// agree (sameDecode).
func FuzzFastEntries(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.pickle")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecode(t, "input", data)
	})
}
