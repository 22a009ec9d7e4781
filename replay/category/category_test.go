package category

import (
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// stacks of the rules, innermost first
var (
	stParam = snapshot.Stack{{Filename: "/env/lib/python3.11/site-packages/torch/nn/modules/module.py", Line: 1326, Name: "convert"}, {Filename: "train.py", Line: 9, Name: "main"}}
	stFwd   = snapshot.Stack{{Filename: "model.py", Line: 40, Name: "forward"}, {Filename: "train.py", Line: 20, Name: "main"}}
	stBwdPy = snapshot.Stack{{Filename: "/env/lib/python3.11/site-packages/torch/autograd/graph.py", Line: 825, Name: "_engine_run_backward"}, {Filename: "train.py", Line: 21, Name: "main"}}
	stBwdC  = snapshot.Stack{{Filename: "??", Name: "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"},
		{Filename: "??", Name: "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)"},
		{Filename: "??", Name: "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"},
		{Filename: "thread48.o", Name: "execute_native_thread_routine"}}
	stOptim = snapshot.Stack{{Filename: "C:\\env\\Lib\\site-packages\\torch\\optim\\adam.py", Line: 137, Name: "_init_group"}, {Filename: "train.py", Line: 22, Name: "main"}}
)

func TestPhaseOf(t *testing.T) {
	for _, c := range []struct {
		st   snapshot.Stack
		want Phase
	}{
		{nil, PhaseNone}, {stParam, PhaseInit}, {stFwd, PhaseOther}, {stBwdPy, PhaseBackward},
		{stBwdC, PhaseBackward}, {stOptim, PhaseOptimizer},
		{snapshot.Stack{{Filename: "flex_opt.py", Name: "init_weight_list"}}, PhaseInit},
		// the forward of a module is not its construction
		{snapshot.Stack{{Filename: "torch/nn/modules/module.py", Name: "_call_impl"}, {Filename: "t.py", Name: "main"}}, PhaseOther},
	} {
		if got := PhaseOf(c.st); got != c.want {
			t.Errorf("PhaseOf(%v) = %d, want %d", c.st, got, c.want)
		}
	}
}

// TestClassify: one training step and the beginning of the next, each
// allocation named by the rule it is there for.
func TestClassify(t *testing.T) {
	stacks := []snapshot.Stack{nil, stParam, stFwd, stBwdPy, stBwdC, stOptim}
	const (
		param snapshot.StackID = iota + 1
		fwd
		bwdPy
		bwdC
		optim
	)
	type ev struct {
		act   snapshot.Action
		addr  uint64
		st    snapshot.StackID
		want  Category // alloc entries only
		label string
	}
	evs := []ev{
		{snapshot.ActionWorkspaceSnapshot, 0x900, 0, 0, ""},
		{snapshot.ActionSegmentAlloc, 0x900, 0, 0, ""},
		{snapshot.ActionAlloc, 0x900, 0, Workspace, "a workspace triple's block"},
		{snapshot.ActionAlloc, 0x100, param, Parameter, "a parameter, moved to the device"},
		{snapshot.ActionAlloc, 0x110, param, Temporary, "a copy made by .to() and dropped at once"},
		{snapshot.ActionFree, 0x110, 0, 0, ""},
		{snapshot.ActionAlloc, 0x200, fwd, Activation, "saved for backward"},
		{snapshot.ActionAlloc, 0x210, fwd, Temporary, "freed inside the forward"},
		{snapshot.ActionFree, 0x210, 0, 0, ""},
		{snapshot.ActionAlloc, 0x300, bwdC, Gradient, "a backward node's output kept past backward"},
		{snapshot.ActionAlloc, 0x310, bwdPy, Temporary, "a gradient of an activation, consumed in backward"},
		{snapshot.ActionFree, 0x200, 0, 0, ""},
		{snapshot.ActionFree, 0x310, 0, 0, ""},
		{snapshot.ActionAlloc, 0x320, 0, Gradient, "no frames in a trace with frames: the autograd thread"},
		{snapshot.ActionAlloc, 0x400, optim, OptimizerState, "exp_avg, allocated on the first step"},
		{snapshot.ActionAlloc, 0x410, optim, Temporary, "the update's temporary"},
		{snapshot.ActionFree, 0x410, 0, 0, ""},
		{snapshot.ActionFree, 0x300, 0, 0, ""}, // zero_grad
		{snapshot.ActionAlloc, 0x500, fwd, Unknown, "never freed, no backward while it lived"},
	}
	var entries []snapshot.TraceEntry
	for _, e := range evs {
		entries = append(entries, snapshot.TraceEntry{Action: e.act, Addr: e.addr, Frames: e.st, Size: 512})
	}
	start := []Start{{Addr: 0x10, Frames: snapshot.NoStack}, {Addr: 0x20, Frames: snapshot.NoStack}, {Addr: 0x30, Frames: optim}}
	entries = append(entries, snapshot.TraceEntry{Action: snapshot.ActionFree, Addr: 0x20, Size: 512})
	tab := Classify(entries, start, func(id snapshot.StackID) snapshot.Stack { return stacks[id] })
	made := map[uint64]Category{}
	for i, e := range evs {
		switch e.act {
		case snapshot.ActionAlloc:
			if got := tab.Entry(i); got != e.want {
				t.Errorf("entry %d (%s): %s, want %s", i, e.label, got, e.want)
			}
			made[e.addr] = e.want
		case snapshot.ActionFree:
			// a free entry carries the category of what it frees
			if got := tab.Entry(i); got != made[e.addr] {
				t.Errorf("free entry %d at 0x%x: %s, want %s", i, e.addr, got, made[e.addr])
			}
		}
	}
	if got := tab.Entry(len(entries) - 1); got != Unknown {
		t.Errorf("the free of an allocation live before the trace: %s, want unknown", got)
	}
	for _, c := range []struct {
		addr uint64
		want Category
	}{{0x10, Parameter}, {0x20, Unknown}, {0x30, OptimizerState}} {
		if got := tab.Of(-1, c.addr); got != c.want {
			t.Errorf("live before the trace at 0x%x: %s, want %s", c.addr, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range All {
		if got, err := Parse(c.String()); err != nil || got != c {
			t.Errorf("Parse(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := Parse("weights"); err == nil {
		t.Error("Parse accepted an unknown name")
	}
}

func TestPhaseOfSchedulerIsNotOptimizer(t *testing.T) {
	st := snapshot.Stack{{Filename: "/env/site-packages/torch/optim/lr_scheduler.py", Line: 90, Name: "step"}, {Filename: "train.py", Line: 30, Name: "main"}}
	if got := PhaseOf(st); got != PhaseOther {
		t.Errorf("a learning-rate scheduler's step: phase %d, want other", got)
	}
}
