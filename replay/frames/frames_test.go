package frames_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/frames"
)

func fr(file, name string) snapshot.Frame { return snapshot.Frame{Filename: file, Line: 1, Name: name} }

func TestClass(t *testing.T) {
	r := &frames.Rules{}
	for _, c := range []struct {
		f    snapshot.Frame
		want frames.Class
	}{
		{fr("/job/model.py", "forward"), frames.User},
		{fr("/opt/torchvision/ops.py", "f"), frames.User}, // torch as a prefix of another name is user code
		{fr("/usr/lib/python3/dist-packages/torch/nn/functional.py", "linear"), frames.Library},
		{fr(`C:\venv\Lib\site-packages\einops\einops.py`, "f"), frames.Library},
		{fr(`C:\Python311\Lib\runpy.py`, "f"), frames.Library},
		{fr("/usr/lib/python3.11/runpy.py", "f"), frames.Library},
		{fr("<frozen runpy>", "f"), frames.Library},
		{fr("torch_npu/npu/memory.py", "f"), frames.Library},
		{fr("??", "f"), frames.Native},
		{fr("", "f"), frames.Native},
		{fr("aten/src/ATen/native/X.cpp", "f"), frames.Native},
		{fr("RegisterCUDA.cpp", "f"), frames.Native},
		{fr("thread48.o", "execute_native_thread_routine"), frames.Native},
		{fr("libtorch_cuda.so", "f"), frames.Native},
		{fr("libc.so.6", "f"), frames.Native},
		{fr("clone3.S", "clone3"), frames.Native},
		{fr("libfoo.a", "f"), frames.Native},
		{fr("/job/model.py", "torch::unwind::unwind()"), frames.Native}, // internal whatever the file
	} {
		if got := r.Class(c.f); got != c.want {
			t.Errorf("Class(%v) = %v, want %v", c.f, got, c.want)
		}
	}
	r.Library = regexp.MustCompile(`^/job/model\.py$`)
	if got := r.Class(fr("/job/model.py", "f")); got != frames.Library {
		t.Errorf("custom library: %v", got)
	}
	if got := r.Class(fr("x.cpp", "f")); got != frames.Native {
		t.Errorf("custom library, native file: %v", got)
	}
}

func TestNames(t *testing.T) {
	for name, want := range map[string]string{
		"torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)": "BmmBackward0",
		"torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)":                                       "AccumulateGrad",
		"torch::autograd::Node::operator()(std::vector<at::Tensor>&&)":                                            "",
		"torch::autograd::generated::details::div_tensor_other_backward(at::Tensor const&)":                       "",
	} {
		got, ok := frames.AutogradNode(name)
		if got != want || ok != (want != "") {
			t.Errorf("AutogradNode(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for name, want := range map[string]string{
		"at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)":                            "aten::bmm",
		"at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)":                     "aten::mul_Tensor",
		"at::_ops::bmm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)": "",
	} {
		got, ok := frames.ATenOp(name)
		if got != want || ok != (want != "") {
			t.Errorf("ATenOp(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// backward is the shape of a real backward-thread stack (innermost first).
var backward = snapshot.Stack{
	fr("??", "torch::unwind::unwind()"),
	fr("??", "torch::CapturedTraceback::gather(bool, bool, bool)"),
	fr("CUDACachingAllocator.cpp", "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char)"),
	fr("??", "at::detail::empty_cuda(c10::ArrayRef<long>)"),
	fr("??", "at::_ops::bmm::redispatch(c10::DispatchKeySet)"),
	fr("??", "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)"),
	fr("??", "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)"),
	fr("", "torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"),
	fr("??", "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
	fr("thread48.o", "execute_native_thread_routine"),
	fr("??", "start_thread"),
	fr("??", "clone"),
}

func TestCallsite(t *testing.T) {
	r := &frames.Rules{}
	at := func(st snapshot.Stack) string {
		s, ok := r.Callsite(st)
		if !ok {
			return "(none)"
		}
		return s.Label
	}
	user := fr("/job/model.py", "forward")
	lib := fr("torch/nn/functional.py", "linear")
	for _, c := range []struct {
		st   snapshot.Stack
		want string
	}{
		{snapshot.Stack{lib, user}, "forward (/job/model.py:1)"},
		{append(append(snapshot.Stack{}, backward[:9]...), lib, user), "forward (/job/model.py:1)"},
		{backward, "BmmBackward0 (backward)"},
		{append(append(snapshot.Stack{}, backward[:6]...), backward[7:]...), "aten::bmm"},
		{snapshot.Stack{backward[0], backward[3], lib, backward[9]}, "linear (torch/nn/functional.py:1)"},
		{snapshot.Stack{backward[0], backward[3], backward[9]}, "at::detail::empty_cuda(c10::ArrayRef<long>) (??:1)"},
		{snapshot.Stack{backward[0], backward[9], backward[11]}, frames.NoSite},
		{nil, "(none)"},
	} {
		if got := at(c.st); got != c.want {
			t.Errorf("call site %q, want %q", got, c.want)
		}
	}
}

func TestFold(t *testing.T) {
	r := &frames.Rules{}
	user := fr("/job/model.py", "forward")
	lib := fr("torch/nn/functional.py", "linear")
	st := append(append(snapshot.Stack{}, backward[:9]...), lib, user, lib)
	var got []string
	for _, l := range r.Fold(st, -1) {
		if l.Folded {
			got = append(got, l.Text())
		} else {
			got = append(got, st[l.Start].Name)
		}
	}
	if want := "… 10 library and native frames|forward|linear"; strings.Join(got, "|") != want {
		t.Errorf("Fold = %q, want %q", strings.Join(got, "|"), want)
	}
	site, _ := r.Callsite(backward)
	lines := r.Fold(backward, site.Index)
	if len(lines) != 3 || lines[0].Text() != "… 6 native frames" || lines[1].Folded || lines[1].Start != 6 || lines[2].Text() != "… 5 native frames" {
		t.Errorf("Fold around the node: %+v", lines)
	}
	if n := frames.KeyStart(st); n != 9 {
		t.Errorf("KeyStart = %d, want 9", n)
	}
	if n := frames.KeyStart(backward); n != len(backward) {
		t.Errorf("KeyStart of a native stack = %d", n)
	}
}

// TestFixtures: on every real snapshot, no call site names an unwinder, a
// thread entry or an object file, and every backward allocation without a
// user frame is named by its autograd node (by its ATen op when the engine
// itself allocated).
func TestFixtures(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(fixture.Root(t), "snapshots", "*"))
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	r := &frames.Rules{}
	backwardAllocs := map[string]int{}
	for _, p := range paths {
		c, err := replay.DecodeFile(p, replay.Options{})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		s := c.Snapshot
		for _, tr := range s.DeviceTraces {
			for i := range tr {
				e := &tr[i]
				if e.Action != snapshot.ActionAlloc {
					continue
				}
				st := s.Stack(e.Frames)
				site, ok := r.Callsite(st)
				if !ok {
					continue
				}
				if site.Index < 0 || frames.Internal(st[site.Index]) {
					t.Errorf("%s entry %d: call site %q is internal", filepath.Base(p), i, site.Label)
				}
				for _, bad := range []string{"unwind", "thread_routine", "clone", ".o:", ".so:", "??:"} {
					if strings.Contains(site.Label, bad) {
						t.Errorf("%s entry %d: call site %q", filepath.Base(p), i, site.Label)
					}
				}
				if !frames.Backward(st) || site.Class == frames.User {
					continue
				}
				backwardAllocs[filepath.Base(p)]++
				if n, ok := frames.BackwardNode(st); ok && site.Label != n+" (backward)" {
					t.Errorf("%s entry %d: backward allocation named %q, want its node %s", filepath.Base(p), i, site.Label, n)
				}
				if _, ok := frames.BackwardNode(st); !ok && !strings.HasPrefix(site.Label, "aten::") {
					t.Errorf("%s entry %d: backward allocation without a node named %q, want its ATen op", filepath.Base(p), i, site.Label)
				}
			}
		}
	}
	// The CUDA training dump: 19 of its 36 allocations come from autograd's backward thread.
	if n := backwardAllocs["cuda-silmont-mem_snapshot.pickle"]; n != 19 {
		t.Errorf("silmont: %d backward allocations named by their node, want 19", n)
	}
}

// TestCallsiteForward: a stack without a user frame takes the forward
// traceback's first user frame, marked; a stack with one keeps its own.
func TestCallsiteForward(t *testing.T) {
	var r frames.Rules
	nat := snapshot.Stack{
		{Filename: "??", Name: "torch::unwind::unwind()"},
		{Filename: "??", Name: "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)"},
	}
	fwd := snapshot.Stack{
		{Filename: "/venv/lib/python3.12/site-packages/torch/functional.py", Line: 407, Name: "einsum"},
		{Filename: "/job/model.py", Line: 58, Name: "forward"},
		{Filename: "/job/train.py", Line: 120, Name: "main"},
	}
	if s, _ := r.CallsiteForward(nat, fwd); s.Label != "forward (/job/model.py:58) [backward]" || !s.Forward || s.Index != -1 {
		t.Fatalf("%+v", s)
	}
	if s, _ := r.CallsiteForward(nat, fwd[:1]); s.Label != "BmmBackward0 (backward)" || s.Forward {
		t.Fatalf("no user frame forward: %+v", s)
	}
	own := append(snapshot.Stack{{Filename: "/job/loss.py", Line: 3, Name: "loss"}}, nat...)
	if s, _ := r.CallsiteForward(own, fwd); s.Label != "loss (/job/loss.py:3)" {
		t.Fatalf("own user frame: %+v", s)
	}
	if s, ok := r.CallsiteForward(nil, fwd); !ok || !s.Forward {
		t.Fatalf("no own stack: %+v %v", s, ok)
	}
}

func TestOptimizerFile(t *testing.T) {
	for name, want := range map[string]bool{
		"/usr/lib/python3/site-packages/torch/optim/adam.py":                true,
		"/venv/lib/python3.10/site-packages/torch/optim/_multi_tensor/x.py": true,
		`C:\\py\\Lib\\site-packages\\torch_npu\\optim\\npu_fused_adamw.py`:  true,
		"/opt/apex/optimizers/fused_adam.py":                                true,
		"/usr/lib/python3/site-packages/torch/optim/lr_scheduler.py":        false,
		"/job/optim.py":                 false, // a file named optim, not a directory
		"/job/optimizers_notes/adam.py": false,
		"/job/train.py":                 false,
		"":                              false,
	} {
		if got := frames.OptimizerFile(name); got != want {
			t.Errorf("OptimizerFile(%q) = %v, want %v", name, got, want)
		}
	}
}
