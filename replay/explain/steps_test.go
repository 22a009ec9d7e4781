package explain

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// TestDetectStepsSources: one generated snapshot per step source
// (testdata/gen_steps.py, Python's own pickle), each a training loop
// whose log_hidden_states call site keeps 1 MiB per iteration.
func TestDetectStepsSources(t *testing.T) {
	for _, tc := range []struct {
		file   string
		source StepSource
		steps  int
	}{
		{"leak_steps.pickle", StepsProfiler, 6},
		{"steps_annotation.pickle", StepsAnnotation, 5}, // annotations before its optimizer frames
		{"steps_optimizer.pickle", StepsOptimizer, 4},   // no time_us; lr_scheduler.step ignored
		{"steps_period.pickle", StepsPeriod, 6},         // a loop over layers inside each iteration
		{"steps_norepeat.pickle", StepsNone, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := decode(t, source(t, tc.file))
			d, err := NewDevice(c, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			s := d.Steps()
			if s.Source != tc.source || s.Len() != tc.steps || len(s.Starts) != s.Len() {
				t.Fatalf("%d steps from %q (starts %v), want %d from %q", s.Len(), s.Source, s.Starts, tc.steps, tc.source)
			}
			for k := range s.Ends {
				if s.Starts[k] > s.Ends[k].Index || (k > 0 && s.Starts[k] <= s.Ends[k-1].Index) {
					t.Fatalf("step %d spans %d..%d after an end at %d", k, s.Starts[k], s.Ends[k].Index, s.Ends[max(k-1, 0)].Index)
				}
				if s.StepOf(s.Starts[k]) != k || s.StepOf(s.Ends[k].Index) != k {
					t.Fatalf("StepOf(%d), StepOf(%d) = %d, %d, want %d", s.Starts[k], s.Ends[k].Index,
						s.StepOf(s.Starts[k]), s.StepOf(s.Ends[k].Index), k)
				}
			}
			e, err := Explain(context.Background(), c, Options{NoWhatIf: true})
			if err != nil {
				t.Fatal(err)
			}
			de := e.Devices[0]
			if tc.steps == 0 {
				if len(de.LeakSuspects) != 0 || !strings.Contains(de.StepsLine(), "does not repeat") {
					t.Fatalf("%q, suspects %+v", de.StepsLine(), de.LeakSuspects)
				}
				return
			}
			ls := de.LeakSuspects
			if len(ls) == 0 || !strings.HasPrefix(ls[0].Key, "log_hidden_states ") || ls[0].GrowthBytesPerStep != 1<<20 {
				t.Fatalf("leak suspects %+v", ls)
			}
			if want := "steps: " + strconv.Itoa(tc.steps) + " from " + tc.source.Describe(); de.StepsLine() != want {
				t.Fatalf("%q, want %q", de.StepsLine(), want)
			}
		})
	}
}

// TestStepsOutsideIterations: the repeat period leaves setup and the
// tail in no step.
func TestStepsOutsideIterations(t *testing.T) {
	d, err := NewDevice(decode(t, source(t, "steps_period.pickle")), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Steps()
	if s.Starts[0] == 0 || s.StepOf(0) != -1 || s.StepOf(len(d.Timeline.Entries)-1) != -1 {
		t.Fatalf("setup or tail inside a step: starts %v, ends %+v", s.Starts, s.Ends)
	}
}

func TestIsOptimizerStep(t *testing.T) {
	for _, tc := range []struct {
		file, name string
		want       bool
	}{
		{"/venv/lib/python3.11/site-packages/torch/optim/adam.py", "step", true},
		{"C:\\venv\\Lib\\site-packages\\torch\\optim\\sgd.py", "step", true},
		{"/opt/apex/optimizers/fused_adam.py", "step", true},
		{"torch/optim/adam.py", "step", true},
		{"/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py", "step", false},
		{"/venv/lib/python3.11/site-packages/torch/optim/adam.py", "_multi_tensor_adam", false},
		{"/venv/lib/python3.11/site-packages/torch/profiler/profiler.py", "step", false},
		{"/job/optim.py", "step", false},
	} {
		if got := IsOptimizerStep(snapshot.Frame{Filename: tc.file, Name: tc.name}); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.name, tc.file, got, tc.want)
		}
	}
}

// TestPeriodOnNPUDump: on the real torch_npu dump (no time_us) the repeat
// period alone finds the script's three iterations, the first one's extra
// optimizer state (allocated once) left out of the period: each iteration
// starts at train_one_step's first allocation (entries 329, 3261, 5842,
// an independent reading with Python's pickle) and the optimizer's step
// lies inside it.
func TestPeriodOnNPUDump(t *testing.T) {
	c := decode(t, source(t, "npu-2.6-msinsight-snapshot_1768383987920985470.pkl"))
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := periodSteps(d.Timeline)
	if p.Len() != 3 || !slices.Equal(p.Starts, []int{329, 3261, 5842}) {
		t.Fatalf("%d iterations, starts %v, ends %+v (%s)", p.Len(), p.Starts, p.Ends, p.Note)
	}
	for k, e := range d.Steps().Ends {
		if p.StepOf(e.Index) != k {
			t.Fatalf("the optimizer's step %d ends at %d, outside iteration %d (%v..%+v)", k, e.Index, k, p.Starts, p.Ends)
		}
	}
}

// TestSketchNeverUnderCounts: the period keys' counting sketch saturates
// at MinLeakSteps and, whatever shares a counter, counts a key at least
// as often as it was added (or MinLeakSteps), so the filter loses no key.
func TestSketchNeverUnderCounts(t *testing.T) {
	s := sketch{c: make([]uint8, 1<<12/4), shift: 64 - 12}
	added := map[uint64]int{}
	for i := range 20000 {
		h := uint64(i%7000) * 0x9E3779B97F4A7C15
		before := s.count(h)
		if got := s.add(h); got != before+1 {
			t.Fatalf("add returned %d, counter was %d", got, before)
		}
		added[h]++
	}
	for h, n := range added {
		if got := s.count(h); int(got) < min(n, MinLeakSteps) || got > MinLeakSteps {
			t.Fatalf("count %d after %d adds", got, n)
		}
	}
	if f := s.full(); f == 0 || f > 1<<12 {
		t.Fatalf("full = %d", f)
	}
}
