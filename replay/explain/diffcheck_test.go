package explain

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/replay"
)

func deviceOf(t *testing.T, path string, edit func(c *replay.Capture)) *Device {
	t.Helper()
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c)
	}
	d, err := NewDevice(c, c.Snapshot.Devices()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDiffFlagNames: a moment diff cannot resolve names the flag it came
// from, not holders' --at.
func TestDiffFlagNames(t *testing.T) {
	d := leakDevice(t)
	for _, c := range []struct{ from, to, flag string }{{"oom:2", "end", "--from"}, {"#-1", "oom:2", "--to"}, {"later", "end", "--from"}} {
		_, err := DiffMoments(d, c.from, c.to, &Grouper{By: ByCallsite})
		if err == nil || !strings.HasPrefix(err.Error(), c.flag+" ") || strings.Contains(err.Error(), "--at") {
			t.Errorf("--from %s --to %s: %v; want it to name %s", c.from, c.to, err, c.flag)
		}
	}
	if _, err := At(d.Timeline, "oom:2"); err == nil || !strings.HasPrefix(err.Error(), "--at ") {
		t.Errorf("holders' moment: %v", err)
	}
}

// TestDiffWarnings: two files of one job say nothing; a file from another
// process, another allocator, months older, or sharing nothing says it is
// not one job, one line; a "to" older than "from" says it runs backwards.
func TestDiffWarnings(t *testing.T) {
	lib := regexp.MustCompile(DefaultLibraryPaths)
	const leak = "../testdata/leak_steps.pickle"
	named := func(name string) func(*replay.Capture) { return func(c *replay.Capture) { c.Path = name } }
	if w := DiffWarnings(deviceOf(t, leak, nil), deviceOf(t, leak, nil), classify.PID, lib); w != nil {
		t.Errorf("one file twice: %q", w)
	}
	a := deviceOf(t, leak, named("/d/snapshot_1234_step1.pickle"))
	if w := DiffWarnings(a, deviceOf(t, leak, named("/d/snapshot_1234_step2.pickle")), classify.PID, lib); w != nil {
		t.Errorf("two dumps of pid 1234: %q", w)
	}
	w := DiffWarnings(a, deviceOf(t, leak, named("/d/snapshot_5678_step2.pickle")), classify.PID, lib)
	if len(w) != 1 || !strings.Contains(w[0], "do not look like one job (pid 1234 vs 5678)") || strings.Contains(w[0], "\n") {
		t.Errorf("another process: %q", w)
	}
	older := deviceOf(t, leak, func(c *replay.Capture) {
		shift := (300 * 24 * time.Hour).Microseconds()
		for _, tr := range c.Snapshot.DeviceTraces {
			for i := range tr {
				tr[i].TimeUS -= shift
			}
		}
	})
	w = DiffWarnings(deviceOf(t, leak, nil), older, classify.PID, lib)
	if len(w) != 2 || !strings.Contains(w[0], "their ends 10 months apart") || !strings.Contains(w[1], "runs backwards") ||
		!strings.Contains(w[1], "ends 10 months before") {
		t.Errorf("to 300 days older than from: %q", w)
	}
	if w := DiffWarnings(older, deviceOf(t, leak, nil), classify.PID, lib); len(w) != 1 || strings.Contains(w[0], "backwards") {
		t.Errorf("from 300 days older than to: %q", w)
	}
	w = DiffWarnings(deviceOf(t, leak, nil), deviceOf(t, "../testdata/npu_workspace.pickle", nil), classify.PID, lib)
	if len(w) != 1 || !strings.Contains(w[0], "allocator PyTorch CUDA vs torch_npu") || !strings.Contains(w[0], "no segment address and no user frame in common") {
		t.Errorf("a CUDA and a torch_npu file: %q", w)
	}
	d, err := DiffMoments(leakDevice(t), "end", "#-1", &Grouper{By: ByCallsite})
	if err != nil {
		t.Fatal(err)
	}
	if m := MomentsWarning(d); !strings.Contains(m, "--to #-1 (after entry -1) comes before --from end (after entry 35)") {
		t.Errorf("moments backwards: %q", m)
	}
	if d, _ := DiffMoments(leakDevice(t), "#-1", "end", &Grouper{By: ByCallsite}); MomentsWarning(d) != "" {
		t.Errorf("moments forward: %q", MomentsWarning(d))
	}
}
