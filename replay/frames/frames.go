// Package frames classifies the frames of an allocation's stack and names
// its call site: the one rule every view (holders, diff, explain, leak
// suspects, the TUI's groups and stacks) uses. It imports only
// allocator/snapshot.
//
// Every frame is in one class (Rules.Class):
//
//   - Native: C/C++ code and what the unwinder could not resolve — a file
//     ending in .c .cc .cpp .cxx .cu .cuh .h .hpp, an object or shared file
//     (.o .so .so.N .S .a), a file "??" or none — and, whatever the file,
//     the internal frames (Internal): the unwinder, the allocator itself,
//     thread and runtime entry points.
//   - Library: a Python frame whose file matches the library paths
//     (DefaultLibraryPaths: torch, torch_npu, site-packages, dist-packages,
//     the standard library, <frozen …>; a Rules may name other paths).
//   - User: every other frame, the user's own code.
//
// The call site (Rules.Callsite) is the first user frame, innermost first;
// for a stack with none, the autograd node running it ("BmmBackward0
// (backward)", from torch::autograd::generated::BmmBackward0::apply), else
// the ATen op ("aten::bmm", from at::_ops::bmm::call), else the innermost
// library frame, else the innermost native frame that is not internal. It
// never names an internal frame or an object file.
//
// An allocation made in backward may carry the forward pass's traceback
// (torch 2.8+ "forward_frames"; CallsiteForward): when its own stack has
// no user frame, its call site is the first user frame of that traceback
// (innermost first), labelled "forward (/job/model.py:58) [backward]".
//
// Fold reads a stack as lines: each user frame (and the call site's frame)
// by itself, each run of other frames as one folded line ("… 44 native
// frames"). KeyStart is where a whole-stack key starts: at the first frame
// that is not native.
package frames

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
)

// Class is what a frame is.
type Class uint8

// Classes.
const (
	User Class = iota
	Library
	Native
)

func (c Class) String() string {
	switch c {
	case User:
		return "user"
	case Library:
		return "library"
	}
	return "native"
}

// DefaultLibraryPaths matches the files of library frames: PyTorch and
// torch_npu, installed packages, the Python standard library and
// interpreter internals (<frozen …>). Either path separator is accepted
// (snapshots taken on Windows use backslashes).
const DefaultLibraryPaths = `(^|[\\/])(torch|torch_npu|site-packages|dist-packages)[\\/]` +
	`|[\\/][Ll]ib[\\/]python[0-9.]*[\\/]` +
	`|[\\/]Lib[\\/][^\\/]+\.py$` +
	`|^<[^>]*>$`

var defaultLibrary = regexp.MustCompile(DefaultLibraryPaths)

// nativeFile matches the files of native frames (the empty file and "??"
// are checked apart).
var nativeFile = regexp.MustCompile(`\.(c|cc|cpp|cxx|cu|cuh|h|hpp|o|S|a)$|\.so(\.[0-9]+)*$`)

// objectFile matches object and shared files: never a call site.
var objectFile = regexp.MustCompile(`\.(o|S|a)$|\.so(\.[0-9]+)*$`)

// internalNames are substrings of the names of internal frames: the
// unwinder that recorded the stack, the caching allocator, thread and
// runtime entry points. They say nothing about who allocated.
var internalNames = []string{
	"unwind::unwind", "CapturedTraceback", "gather_with_cpp",
	"CachingAllocator",
	"execute_native_thread_routine", "start_thread", "pthread_",
	"Engine::thread_main", "Engine::thread_init", "PythonEngine::thread_init",
	"__libc_start_main", "__clone",
}

// internalExact are whole names of internal frames (short ones that would
// match too much as substrings).
var internalExact = []string{"clone", "_start", "__clone3", "clone3"}

// Internal reports whether f is an unwinder, allocator, thread or runtime
// entry frame, or a frame in an object or shared file.
func Internal(f snapshot.Frame) bool {
	if objectFile.MatchString(f.Filename) {
		return true
	}
	name := f.Name
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	for _, s := range internalExact {
		if name == s {
			return true
		}
	}
	for _, s := range internalNames {
		if strings.Contains(f.Name, s) {
			return true
		}
	}
	return false
}

// Rules classify frames; the zero value uses DefaultLibraryPaths.
type Rules struct {
	// Library matches the files of library frames; nil: the default.
	Library *regexp.Regexp
}

func (r *Rules) library() *regexp.Regexp {
	if r != nil && r.Library != nil {
		return r.Library
	}
	return defaultLibrary
}

// IsNative reports whether f is a native frame (the rule in the package
// comment; it does not depend on the library paths).
func IsNative(f snapshot.Frame) bool {
	fn := f.Filename
	return fn == "" || fn == "??" || nativeFile.MatchString(fn) || Internal(f)
}

// Class is the class of f.
func (r *Rules) Class(f snapshot.Frame) Class {
	if IsNative(f) {
		return Native
	}
	if r.library().MatchString(f.Filename) {
		return Library
	}
	return User
}

var (
	autogradNode = regexp.MustCompile(`^torch::autograd::(?:generated::)?([A-Za-z_][A-Za-z0-9_]*)::apply\(`)
	atenOp       = regexp.MustCompile(`^at::_ops::([A-Za-z_][A-Za-z0-9_]*)::call\(`)
)

// AutogradNode is the autograd node a native frame's function runs:
// "BmmBackward0" for torch::autograd::generated::BmmBackward0::apply(…),
// "AccumulateGrad" for torch::autograd::AccumulateGrad::apply(…).
func AutogradNode(name string) (string, bool) {
	m := autogradNode.FindStringSubmatch(name)
	if m == nil || m[1] == "Node" {
		return "", false
	}
	return m[1], true
}

// ATenOp is the ATen operator a native frame's function calls:
// "aten::bmm" for at::_ops::bmm::call(…). An overload stays joined to the
// name as in C++ ("aten::mul_Tensor").
func ATenOp(name string) (string, bool) {
	m := atenOp.FindStringSubmatch(name)
	if m == nil {
		return "", false
	}
	return "aten::" + m[1], true
}

// BackwardNode is the innermost autograd node of a stack: the node whose
// backward made the allocation ("" and false when the stack shows none).
func BackwardNode(st snapshot.Stack) (string, bool) {
	for _, f := range st {
		if n, ok := AutogradNode(f.Name); ok {
			return n, true
		}
	}
	return "", false
}

// Backward reports whether st runs on autograd's engine (a frame of
// torch::autograd::Engine): an allocation made by backward, with or
// without a node of its own (the engine reduces gradients itself).
func Backward(st snapshot.Stack) bool {
	for _, f := range st {
		if strings.Contains(f.Name, "torch::autograd::Engine::") {
			return true
		}
	}
	return false
}

// Key is how a frame reads in a call-site key: "name (file:line)".
func Key(f snapshot.Frame) string {
	return f.Name + " (" + f.Filename + ":" + strconv.FormatInt(f.Line, 10) + ")"
}

// Site is the call site of a stack.
type Site struct {
	// Label names it: Key of its frame, or "BmmBackward0 (backward)" for an
	// autograd node, "aten::bmm" for an ATen op.
	Label string
	// Index is the position of the frame it comes from in the stack
	// (-1: none, the stack held nothing but internal frames).
	Index int
	Class Class // the class of that frame (Native for a node or an op)
	// Forward is true when the site is a frame of the forward traceback
	// (CallsiteForward); Index is then -1.
	Forward bool
}

// BackwardSuffix ends the label of a call site taken from the forward
// traceback of a backward allocation.
const BackwardSuffix = " [backward]"

// CallsiteForward is the call site of an allocation with stack st and
// forward traceback fwd (innermost first; empty: none): Callsite(st),
// unless st has no user frame and fwd has one — then the first user frame
// of fwd, labelled Key(frame)+BackwardSuffix. ok is false when both are
// empty.
func (r *Rules) CallsiteForward(st, fwd snapshot.Stack) (Site, bool) {
	s, ok := r.Callsite(st)
	if ok && s.Class == User {
		return s, ok
	}
	for _, f := range fwd {
		if r.Class(f) == User {
			return Site{Label: Key(f) + BackwardSuffix, Index: -1, Class: User, Forward: true}, true
		}
	}
	return s, ok
}

// NoSite labels a stack of internal frames only.
const NoSite = "(native frames only)"

// Callsite is the call site of st (the rule in the package comment); ok is
// false for an empty stack.
func (r *Rules) Callsite(st snapshot.Stack) (Site, bool) {
	if len(st) == 0 {
		return Site{}, false
	}
	lib, nat := -1, -1
	for i, f := range st {
		switch r.Class(f) {
		case User:
			return Site{Label: Key(f), Index: i, Class: User}, true
		case Library:
			if lib < 0 {
				lib = i
			}
		default:
			if nat < 0 && !Internal(f) {
				nat = i
			}
		}
	}
	for i, f := range st {
		if n, ok := AutogradNode(f.Name); ok {
			return Site{Label: n + " (backward)", Index: i, Class: Native}, true
		}
	}
	for i, f := range st {
		if n, ok := ATenOp(f.Name); ok {
			return Site{Label: n, Index: i, Class: Native}, true
		}
	}
	switch {
	case lib >= 0:
		return Site{Label: Key(st[lib]), Index: lib, Class: Library}, true
	case nat >= 0:
		return Site{Label: Key(st[nat]), Index: nat, Class: Native}, true
	}
	return Site{Label: NoSite, Index: -1, Class: Native}, true
}

// KeyStart is the index of the first frame of st that is not native
// (len(st) when all are): where a whole-stack key starts.
func KeyStart(st snapshot.Stack) int {
	for i, f := range st {
		if !IsNative(f) {
			return i
		}
	}
	return len(st)
}

// Line is one line of a folded stack: a frame (Start+1 == End, Folded
// false) or a run of folded frames st[Start:End].
type Line struct {
	Start, End int
	Folded     bool
	// Library and Native count the folded frames of each class.
	Library, Native int
}

// Text is how a folded line reads: "… 44 native frames", "… 3 library
// frames", "… 12 library and native frames".
func (l Line) Text() string {
	n := l.End - l.Start
	what := "library and native frames"
	switch {
	case l.Native == 0:
		what = "library frames"
	case l.Library == 0:
		what = "native frames"
	}
	if n == 1 {
		what = strings.TrimSuffix(what, "s")
	}
	return "… " + strconv.Itoa(n) + " " + what
}

// Fold reads st as lines: each user frame and the frame at keep (the call
// site's Index; -1: none) alone, each run of two or more other frames
// folded into one line (a run of one reads as its frame).
func (r *Rules) Fold(st snapshot.Stack, keep int) []Line {
	var out []Line
	for i := 0; i < len(st); {
		if i == keep || r.Class(st[i]) == User {
			out = append(out, Line{Start: i, End: i + 1})
			i++
			continue
		}
		l := Line{Start: i, Folded: true}
		for ; i < len(st) && i != keep; i++ {
			c := r.Class(st[i])
			if c == User {
				break
			}
			if c == Native {
				l.Native++
			} else {
				l.Library++
			}
		}
		l.End = i
		if l.End-l.Start == 1 {
			l = Line{Start: l.Start, End: l.End} // one frame reads as itself
		}
		out = append(out, l)
	}
	return out
}

// OptimizerFile reports whether a frame's file is an optimizer's: a file in
// a directory named optim or optimizers at any depth (torch/optim,
// torch/optim/_multi_tensor, torch_npu/optim, apex/optimizers, …),
// learning-rate schedulers (lr_scheduler*.py) excepted. Step detection
// (an optimizer's step call) and memory categories (optimizer state) both
// read it.
func OptimizerFile(filename string) bool {
	p := strings.ReplaceAll(filename, "\\", "/")
	if strings.HasPrefix(path.Base(p), "lr_scheduler") {
		return false
	}
	dir := "/" + path.Dir(p) + "/"
	return strings.Contains(dir, "/optim/") || strings.Contains(dir, "/optimizers/")
}
