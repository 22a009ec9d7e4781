package workload

import (
	"fmt"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay/category"
)

// Thread ids of the ops, offsets from the pid as torch's profiler would see
// them: the Python thread, the autograd engine's device thread, and the
// HCCL stream the all-reduces run on.
const (
	mainThread     = 0
	autogradThread = 1
	commThread     = 2
)

// layerOp is one forward op of a transformer block and its backward.
type layerOp struct {
	fwd, bwd string
	out      func(d dims) int64 // output bytes kept for backward (0: in-place)
	extra    func(d dims) int64 // a second saved tensor (layer-norm stats, dropout mask), or nil
	tmp      func(d dims) int64 // a temporary freed inside the op, or nil
	params   []int              // indices into Shape.layerParams
	work     float64            // relative compute time
	file     string
	line     int64
	fn       string
}

// dims are the step's activation sizes in bytes.
type dims struct {
	tok    int64 // batch × seq × hidden, bf16
	scores int64 // batch × heads × seq × seq, bf16
	stats  int64 // batch × seq fp32 (layer-norm mean / rstd)
	ws     int64 // matmul workspace
}

var (
	tok1   = func(d dims) int64 { return d.tok }
	tok3   = func(d dims) int64 { return 3 * d.tok }
	tok4   = func(d dims) int64 { return 4 * d.tok }
	scores = func(d dims) int64 { return d.scores }
	mask   = func(d dims) int64 { return d.scores / 2 }
	upcast = func(d dims) int64 { return 2 * d.scores }
	stats2 = func(d dims) int64 { return 2 * d.stats }
	ws     = func(d dims) int64 { return d.ws }
)

// blockOps is a transformer block's forward, in order.
var blockOps = []layerOp{
	{fwd: "aten::layer_norm", bwd: "NativeLayerNormBackward0", out: tok1, extra: stats2, params: []int{0, 1}, work: 1, file: "torch/nn/modules/normalization.py", line: 217, fn: "forward"},
	{fwd: "aten::linear", bwd: "AddmmBackward0", out: tok3, tmp: ws, params: []int{2, 3}, work: 6, file: "torch/nn/modules/linear.py", line: 125, fn: "forward"},
	{fwd: "aten::bmm", bwd: "BmmBackward0", out: scores, work: 4, file: "model.py", line: 58, fn: "Attention.forward"},
	{fwd: "aten::softmax", bwd: "SoftmaxBackward0", out: scores, tmp: upcast, work: 2, file: "torch/nn/functional.py", line: 2140, fn: "softmax"},
	{fwd: "aten::dropout", bwd: "NativeDropoutBackward0", out: scores, extra: mask, work: 1, file: "torch/nn/functional.py", line: 1425, fn: "dropout"},
	{fwd: "aten::bmm", bwd: "BmmBackward0", out: tok1, work: 4, file: "model.py", line: 61, fn: "Attention.forward"},
	{fwd: "aten::linear", bwd: "AddmmBackward0", out: tok1, tmp: ws, params: []int{4, 5}, work: 2, file: "torch/nn/modules/linear.py", line: 125, fn: "forward"},
	{fwd: "aten::add_", bwd: "AddBackward0", work: 0.5, file: "model.py", line: 92, fn: "Block.forward"},
	{fwd: "aten::layer_norm", bwd: "NativeLayerNormBackward0", out: tok1, extra: stats2, params: []int{6, 7}, work: 1, file: "torch/nn/modules/normalization.py", line: 217, fn: "forward"},
	{fwd: "aten::linear", bwd: "AddmmBackward0", out: tok4, tmp: ws, params: []int{8, 9}, work: 8, file: "torch/nn/modules/linear.py", line: 125, fn: "forward"},
	{fwd: "aten::gelu", bwd: "GeluBackward0", out: tok4, work: 1, file: "torch/nn/functional.py", line: 1719, fn: "gelu"},
	{fwd: "aten::linear", bwd: "AddmmBackward0", out: tok1, tmp: ws, params: []int{10, 11}, work: 8, file: "torch/nn/modules/linear.py", line: 125, fn: "forward"},
	{fwd: "aten::add_", bwd: "AddBackward0", work: 0.5, file: "model.py", line: 94, fn: "Block.forward"},
}

var blockWork = func() float64 {
	var s float64
	for _, o := range blockOps {
		s += o.work
	}
	return s
}()

// saved is what one forward op keeps for its backward.
type saved struct {
	out, extra tensor
	seq        int64
}

// stack builds a Python stack, innermost first, under the training loop.
func stack(frames ...snapshot.Frame) site {
	return append(frames,
		snapshot.Frame{Filename: "train.py", Line: 61, Name: "train_step"},
		snapshot.Frame{Filename: "train.py", Line: 118, Name: "main"})
}

func blockSite(o *layerOp, layer int) site {
	return stack(snapshot.Frame{Filename: o.file, Line: o.line, Name: o.fn},
		snapshot.Frame{Filename: "model.py", Line: 88, Name: fmt.Sprintf("Block.forward (layers.%d)", layer)},
		snapshot.Frame{Filename: "model.py", Line: 131, Name: "Transformer.forward"})
}

// Sites built once: interning in the allocator is cheaper when frames repeat.
var (
	siteParam   = stack(snapshot.Frame{Filename: "torch/nn/modules/module.py", Line: 1326, Name: "convert"}, snapshot.Frame{Filename: "torch/nn/modules/module.py", Line: 1329, Name: "Module.to"})
	siteInput   = stack(snapshot.Frame{Filename: "train.py", Line: 55, Name: "Tensor.to"})
	siteEmbed   = stack(snapshot.Frame{Filename: "torch/nn/functional.py", Line: 2551, Name: "embedding"}, snapshot.Frame{Filename: "model.py", Line: 127, Name: "Transformer.forward"})
	siteHead    = stack(snapshot.Frame{Filename: "torch/nn/modules/linear.py", Line: 125, Name: "forward"}, snapshot.Frame{Filename: "model.py", Line: 135, Name: "Transformer.forward"})
	siteLoss    = stack(snapshot.Frame{Filename: "torch/nn/functional.py", Line: 3479, Name: "cross_entropy"})
	siteGrad    = stack(snapshot.Frame{Filename: "torch/autograd/graph.py", Line: 825, Name: "_engine_run_backward"}, snapshot.Frame{Filename: "torch/_tensor.py", Line: 626, Name: "backward"})
	siteBucket  = stack(snapshot.Frame{Filename: "torch/nn/parallel/distributed.py", Line: 1636, Name: "_allreduce_bucket"}, snapshot.Frame{Filename: "torch/_tensor.py", Line: 626, Name: "backward"})
	siteAdam    = stack(snapshot.Frame{Filename: "torch/optim/adamw.py", Line: 137, Name: "_init_group"}, snapshot.Frame{Filename: "torch/optim/optimizer.py", Line: 493, Name: "wrapper"})
	siteAdamTmp = stack(snapshot.Frame{Filename: "torch/optim/adamw.py", Line: 576, Name: "_multi_tensor_adamw"}, snapshot.Frame{Filename: "torch/optim/optimizer.py", Line: 493, Name: "wrapper"})
	siteLeak    = stack(snapshot.Frame{Filename: "train.py", Line: 71, Name: "log_hidden_states"})
	siteCache   = stack(snapshot.Frame{Filename: "cache.py", Line: 33, Name: "KVCache.append"})
	siteMetric  = stack(snapshot.Frame{Filename: "metrics.py", Line: 18, Name: "Tracker.record"})
)

// dims of the current step.
func (w *Workload) dims() dims {
	s := w.shape
	tok := s.Batch * w.seqLen * s.Hidden * bf16
	return dims{tok: tok, scores: s.Batch * s.Heads * w.seqLen * w.seqLen * bf16,
		stats: s.Batch * w.seqLen * fp32, ws: min(8*config.MiB, tok/4)}
}

// setupModel allocates the parameters (those still missing after a failed
// attempt): the embedding, every block, the final norm and the head.
func (w *Workload) setupModel() {
	if w.params == nil {
		s := w.shape
		add := func(name string, bytes int64) {
			w.paramNames = append(w.paramNames, name)
			w.paramSizes = append(w.paramSizes, bytes)
		}
		add("embed.weight", s.Vocab*s.Hidden*bf16)
		for l := 0; l < s.Layers; l++ {
			for _, p := range s.layerParams() {
				add(fmt.Sprintf("layers.%d.%s", l, p.name), p.bytes)
			}
		}
		add("norm.weight", s.Hidden*bf16)
		add("norm.bias", s.Hidden*bf16)
		add("lm_head.weight", s.Vocab*s.Hidden*bf16)
		n := len(w.paramNames)
		w.params, w.grads, w.adam1, w.adam2 = make([]tensor, n), make([]tensor, n), make([]tensor, n), make([]tensor, n)
	}
	o := w.begin("Module.to", mainThread)
	for i := range w.params {
		if w.params[i].ptr == 0 {
			w.params[i] = w.allocKeep(w.paramBytes(i), siteParam, category.Parameter)
		}
	}
	w.end(o, 20*time.Millisecond)
}

// paramBytes is the size of parameter i.
func (w *Workload) paramBytes(i int) int64 { return w.paramSizes[i] }

// layerParam is the global index of block l's parameter j.
func (w *Workload) layerParam(l, j int) int { return 1 + l*len(w.shape.layerParams()) + j }

// trainStep is one iteration: data, forward, backward with bucketed
// all-reduce, optimizer, zero_grad, plus the scenario's pattern.
func (w *Workload) trainStep() {
	s := w.shape
	w.chooseSeqLen()
	d := w.dims()
	tok := d.tok
	fwdUnit := w.phaseDur[0] / time.Duration(float64(s.Layers)*blockWork+8)
	bwdUnit := w.phaseDur[1] / time.Duration(float64(s.Layers)*blockWork+8)

	// Data loading: the host is busy, then the batch is copied to the device.
	w.clock.Advance(w.stepT - w.phaseDur[0] - w.phaseDur[1] - w.phaseDur[2])
	o := w.begin("aten::to", mainThread)
	ids := w.alloc(s.Batch*w.seqLen*8, siteInput, category.Activation)
	labels := w.alloc(s.Batch*w.seqLen*8, siteInput, category.Activation)
	w.end(o, fwdUnit/4)

	// Forward.
	o = w.begin("aten::embedding", mainThread)
	x := w.alloc(tok, siteEmbed, category.Activation)
	w.end(o, fwdUnit)
	acts := make([][]saved, s.Layers)
	for l := 0; l < s.Layers; l++ {
		acts[l] = make([]saved, len(blockOps))
		for i := range blockOps {
			op := &blockOps[i]
			o := w.begin(op.fwd, mainThread)
			st := blockSite(op, l)
			var sv saved
			sv.seq = o.seq
			if op.out != nil {
				sv.out = w.alloc(op.out(d), st, category.Activation)
			}
			if op.extra != nil {
				sv.extra = w.alloc(op.extra(d), st, category.Activation)
			}
			var tmp tensor
			if op.tmp != nil {
				tmp = w.alloc(op.tmp(d), st, category.Temporary)
			}
			w.run(time.Duration(op.work * float64(fwdUnit)))
			w.free(tmp)
			acts[l][i] = sv
			w.end(o, 0)
			if w.fail != nil {
				return
			}
		}
		if l == s.Layers-1 && w.cfg.Scenario == Leak {
			// hidden_states.append(h): a reference that outlives the step.
			o := w.begin("aten::clone", mainThread)
			w.leaked = append(w.leaked, w.allocKeep(tok4(d), siteLeak, category.Activation))
			w.end(o, fwdUnit/2)
		}
	}
	o = w.begin("aten::layer_norm", mainThread)
	normOut := w.alloc(tok, siteHead, category.Activation)
	normStats := w.alloc(2*d.stats, siteHead, category.Activation)
	w.end(o, fwdUnit)
	o = w.begin("aten::linear", mainThread)
	logits := w.alloc(s.Batch*w.seqLen*s.Vocab*bf16, siteHead, category.Activation)
	w.end(o, 4*fwdUnit)
	o = w.begin("aten::log_softmax", mainThread)
	logp := w.alloc(s.Batch*w.seqLen*s.Vocab*fp32, siteLoss, category.Activation)
	w.end(o, fwdUnit)
	o = w.begin("aten::nll_loss", mainThread)
	loss := w.alloc(4, siteLoss, category.Activation)
	w.end(o, fwdUnit/2)
	if w.fail != nil {
		return
	}

	// Backward: head, then blocks in reverse; every two blocks a gradient
	// bucket is all-reduced on the communication stream.
	o = w.begin("NllLossBackward0", autogradThread)
	g := w.alloc(s.Batch*w.seqLen*s.Vocab*fp32, siteGrad, category.Temporary)
	w.free(logp)
	w.end(o, bwdUnit)
	o = w.begin("LogSoftmaxBackward0", autogradThread)
	g2 := w.alloc(s.Batch*w.seqLen*s.Vocab*bf16, siteGrad, category.Temporary)
	w.free(g)
	w.free(logits)
	w.end(o, bwdUnit)
	o = w.begin("MmBackward0", autogradThread)
	w.gradFor(len(w.params) - 1)
	g = w.alloc(tok, siteGrad, category.Temporary)
	w.free(g2)
	w.end(o, 4*bwdUnit)
	o = w.begin("NativeLayerNormBackward0", autogradThread)
	w.gradFor(len(w.params) - 3)
	w.gradFor(len(w.params) - 2)
	g2 = w.alloc(tok, siteGrad, category.Temporary)
	w.free(g)
	w.free(normOut)
	w.free(normStats)
	w.end(o, bwdUnit)
	g = g2
	bucket := []int{len(w.params) - 3, len(w.params) - 2, len(w.params) - 1}
	for l := s.Layers - 1; l >= 0; l-- {
		for i := len(blockOps) - 1; i >= 0; i-- {
			op := &blockOps[i]
			sv := acts[l][i]
			o := w.beginSeq(op.bwd, autogradThread, sv.seq)
			for _, j := range op.params {
				w.gradFor(w.layerParam(l, j))
				bucket = append(bucket, w.layerParam(l, j))
			}
			if op.out != nil {
				// gradient w.r.t. the op's input: the previous op's output size
				inBytes := tok
				for k := i - 1; k >= 0; k-- {
					if blockOps[k].out != nil {
						inBytes = blockOps[k].out(d)
						break
					}
				}
				var tmp tensor
				if op.tmp != nil {
					tmp = w.alloc(op.tmp(d), siteGrad, category.Temporary)
				}
				gin := w.alloc(inBytes, siteGrad, category.Temporary)
				w.run(time.Duration(2 * op.work * float64(bwdUnit) / 2))
				w.free(tmp)
				w.free(g)
				g = gin
			} else {
				w.run(time.Duration(op.work * float64(bwdUnit)))
			}
			w.free(sv.out)
			w.free(sv.extra)
			w.end(o, 0)
			if w.fail != nil {
				return
			}
		}
		if l%2 == 0 {
			w.allreduce(bucket, bwdUnit)
			bucket = bucket[:0]
		}
	}
	o = w.begin("EmbeddingBackward0", autogradThread)
	w.gradFor(0)
	bucket = append(bucket, 0)
	w.free(g)
	w.free(x)
	w.end(o, bwdUnit)
	w.allreduce(bucket, bwdUnit)
	w.free(loss)
	if w.fail != nil {
		return
	}
	// DDP waits for the last all-reduce before the optimizer reads gradients.
	if err := w.dev.SynchronizeStream(w.comm); err != nil && w.fail == nil {
		w.fail = err
	}

	w.optimizerStep()
	w.scenarioStep(d)
	w.free(ids)
	w.free(labels)
}

// gradFor allocates parameter i's gradient when it has none (zero_grad sets
// them to None, so backward allocates them every step).
func (w *Workload) gradFor(i int) {
	if w.grads[i].ptr == 0 {
		w.grads[i] = w.allocKeep(w.paramBytes(i), siteGrad, category.Gradient)
	}
}

// allreduce flattens a bucket of gradients, all-reduces it on the
// communication stream and frees the flat buffer at once: RecordStream keeps
// the block pending until the collective completes.
func (w *Workload) allreduce(bucket []int, unit time.Duration) {
	var n int64
	for _, i := range bucket {
		n += w.paramBytes(i)
	}
	if n == 0 || w.fail != nil {
		return
	}
	o := w.begin("aten::cat", autogradThread)
	flat := w.alloc(n, siteBucket, category.Temporary)
	w.end(o, unit/2)
	if w.fail != nil {
		return
	}
	w.check(w.dev.RecordEvent(w.commEv, w.compute))
	w.check(w.dev.StreamWaitEvent(w.comm, w.commEv))
	start := w.clock.Now()
	dur := 6 * unit
	w.check(w.dev.Launch(w.comm, dur))
	w.check(w.ca.RecordStream(flat.ptr, w.comm))
	w.free(flat)
	end, err := w.dev.StreamIdleAt(w.comm)
	w.check(err)
	op := store.Op{Name: "HcclAllReduce", StartUS: start.UnixMicro(), EndUS: end.UnixMicro(),
		Thread: uint64(w.pid + commThread), Seq: -1, Step: w.opStep()}
	w.emit(op)
}

// optimizerStep is AdamW: states on first use, per-block temporaries for
// the multi-tensor update, then zero_grad(set_to_none=True).
func (w *Workload) optimizerStep() {
	unit := w.phaseDur[2] / time.Duration(w.shape.Layers+2)
	outer := w.begin("Optimizer.step#AdamW.step", mainThread)
	per := len(w.shape.layerParams())
	groups := [][2]int{{0, 1}}
	for l := 0; l < w.shape.Layers; l++ {
		groups = append(groups, [2]int{1 + l*per, 1 + (l+1)*per})
	}
	groups = append(groups, [2]int{len(w.params) - 3, len(w.params)})
	for _, g := range groups {
		if w.adam1[g[0]].ptr == 0 {
			o := w.begin("aten::zeros_like", mainThread)
			for i := g[0]; i < g[1]; i++ {
				if w.adam1[i].ptr == 0 {
					w.adam1[i] = w.allocKeep(w.paramBytes(i)*fp32/bf16, siteAdam, category.OptimizerState)
				}
				if w.adam2[i].ptr == 0 {
					w.adam2[i] = w.allocKeep(w.paramBytes(i)*fp32/bf16, siteAdam, category.OptimizerState)
				}
			}
			w.end(o, unit/4)
		}
		o := w.begin("aten::_foreach_sqrt", mainThread)
		var tmps []tensor
		for i := g[0]; i < g[1]; i++ {
			tmps = append(tmps, w.alloc(w.paramBytes(i)*fp32/bf16, siteAdamTmp, category.Temporary))
		}
		w.end(o, unit/3)
		o = w.begin("aten::_foreach_addcdiv_", mainThread)
		w.run(unit / 2)
		for _, t := range tmps {
			w.free(t)
		}
		w.end(o, 0)
		if w.fail != nil {
			return
		}
	}
	w.end(outer, 0)
	o := w.begin("Optimizer.zero_grad#AdamW.zero_grad", mainThread)
	for i := range w.grads {
		w.free(w.grads[i])
		w.grads[i] = tensor{}
	}
	w.end(o, unit/4)
}

// chooseSeqLen picks this step's sequence length: fixed, except in the
// fragmentation scenario where batches are packed to varying lengths.
func (w *Workload) chooseSeqLen() {
	w.seqLen = w.shape.Seq
	if w.cfg.Scenario == Fragmentation {
		lo := w.shape.Seq / 3
		w.seqLen = lo + w.rng.Int64N(w.shape.Seq-lo+1)
		w.seqLen = max(8, w.seqLen/8*8)
	}
}

// scenarioStep adds the scenario's own allocations at the end of a step.
func (w *Workload) scenarioStep(d dims) {
	_, usable, _ := w.dev.GetMemInfo(1)
	switch w.cfg.Scenario {
	case Fragmentation:
		// Metrics and caches of odd sizes that live for a few steps.
		kept := w.lingering[:0]
		for _, l := range w.lingering {
			if l.until <= w.step {
				w.free(l.t)
			} else {
				kept = append(kept, l)
			}
		}
		w.lingering = kept
		o := w.begin("aten::clone", mainThread)
		for k := 2 + w.rng.IntN(4); k > 0; k-- {
			size := 256*config.KiB + w.rng.Int64N(usable/96)
			if t := w.allocKeep(size, siteMetric, category.Unknown); t.ptr != 0 {
				w.lingering = append(w.lingering, lingerer{t, w.step + 1 + w.rng.IntN(6)})
			}
		}
		w.end(o, time.Millisecond)
	case OOM:
		// cache = torch.cat([cache, new]): the new, larger copy is
		// allocated before the old one is freed.
		o := w.begin("aten::cat", mainThread)
		grown := w.allocKeep(w.hoard.size+usable/24, siteCache, category.Unknown)
		if grown.ptr != 0 {
			w.free(w.hoard)
			w.hoard = grown
		}
		w.end(o, 2*time.Millisecond)
	}
}

// ---- ops and time ----

// opRun is an op in progress.
type opRun struct {
	name      string
	start     time.Time
	thread    int
	seq       int64
	allocated int64
}

func (w *Workload) begin(name string, thread int) opRun {
	w.opSeq++
	return w.beginSeq(name, thread, w.opSeq)
}

func (w *Workload) beginSeq(name string, thread int, seq int64) opRun {
	w.pace()
	return opRun{name: name, start: w.clock.Now(), thread: thread, seq: seq,
		allocated: w.ca.Stats().AllocatedBytes[allocator.StatAll].Current}
}

// run executes dur of device work on the compute stream and waits for it.
func (w *Workload) run(dur time.Duration) {
	if w.fail != nil || dur <= 0 {
		return
	}
	w.check(w.dev.Launch(w.compute, dur))
	w.check(w.dev.SynchronizeStream(w.compute))
}

// end runs dur more work and records the op.
func (w *Workload) end(o opRun, dur time.Duration) {
	w.run(dur)
	if w.clock.Now().Equal(o.start) {
		w.clock.Advance(time.Microsecond)
	}
	w.emit(store.Op{Name: o.name, StartUS: o.start.UnixMicro(), EndUS: w.clock.Now().UnixMicro(),
		Thread: uint64(w.pid + o.thread), Seq: o.seq, Step: w.opStep(),
		MemDelta: w.ca.Stats().AllocatedBytes[allocator.StatAll].Current - o.allocated})
}

// opStep is the step ops belong to now (-1 while setting up the model).
func (w *Workload) opStep() int64 {
	if !w.setup {
		return -1
	}
	return int64(w.step)
}

// emit hands op to OnOp and the profiler.
func (w *Workload) emit(op store.Op) {
	if w.cfg.OnOp != nil {
		w.cfg.OnOp(op)
	}
	if w.rec != nil && !op.IsStep && w.rec.Recording() {
		r := profiler.OpRangeRecord{StartNS: op.StartUS*1000 - w.profDiff, EndNS: op.EndUS*1000 - w.profDiff,
			Seq: op.Seq, PID: uint64(w.pid), StartTID: op.Thread, EndTID: op.Thread, Name: op.Name}
		if op.Thread == uint64(w.pid+autogradThread) {
			r.Scope, r.FwdTID = profiler.ScopeBackwardFunction, uint64(w.pid)
		}
		w.rec.RecordOp(&r)
	}
}

func (w *Workload) check(err error) {
	if err != nil && w.fail == nil {
		w.fail = err
	}
}

// pace keeps the simulated clock at or behind the wall clock in paced runs:
// it sleeps while ahead, and skips forward when more than a second behind
// (a slow host, a suspended process) so that live times stay current.
func (w *Workload) pace() {
	if w.fail != nil {
		return
	}
	if !w.cfg.Paced {
		w.fail = w.ctx.Err()
		return
	}
	ahead := time.Until(w.clock.Now())
	switch {
	case ahead > time.Millisecond:
		t := time.NewTimer(ahead)
		select {
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			w.fail = w.ctx.Err()
		}
	case ahead < -time.Second:
		w.clock.Set(time.Now())
	}
	if w.fail == nil && w.ctx.Err() != nil {
		w.fail = w.ctx.Err()
	}
}
