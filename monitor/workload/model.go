package workload

import "fmt"

// Shape is the transformer the workload trains, sized to the device.
type Shape struct {
	Layers int
	Hidden int64 // model width
	Heads  int64
	Seq    int64 // tokens per sample
	Batch  int64 // samples per step
	Vocab  int64
}

// Element sizes: parameters, gradients and activations in bf16, optimizer
// states and logits in fp32.
const (
	bf16 = 2
	fp32 = 4
)

func (s Shape) String() string {
	return fmt.Sprintf("%d layers, hidden %d, %d heads, batch %d × seq %d", s.Layers, s.Hidden, s.Heads, s.Batch, s.Seq)
}

// param is one parameter tensor of the model.
type param struct {
	name  string
	bytes int64
}

// layerParams lists one transformer block's parameters in allocation order.
func (s Shape) layerParams() []param {
	h := s.Hidden
	return []param{
		{"input_layernorm.weight", h * bf16}, {"input_layernorm.bias", h * bf16},
		{"attn.qkv.weight", 3 * h * h * bf16}, {"attn.qkv.bias", 3 * h * bf16},
		{"attn.out.weight", h * h * bf16}, {"attn.out.bias", h * bf16},
		{"post_layernorm.weight", h * bf16}, {"post_layernorm.bias", h * bf16},
		{"mlp.up.weight", 4 * h * h * bf16}, {"mlp.up.bias", 4 * h * bf16},
		{"mlp.down.weight", 4 * h * h * bf16}, {"mlp.down.bias", h * bf16},
	}
}

// paramBytes is Σ parameter bytes (bf16), embeddings and head included.
func (s Shape) paramBytes() int64 {
	var n int64
	for _, p := range s.layerParams() {
		n += p.bytes
	}
	return int64(s.Layers)*n + 2*s.Vocab*s.Hidden*bf16
}

// staticBytes is what lives across steps: parameters, gradients and two fp32
// Adam states per parameter.
func (s Shape) staticBytes() int64 { return s.paramBytes() * (1 + 1 + 2*fp32/bf16) }

// activationBytes is the activation memory one sample keeps for backward.
func (s Shape) activationBytes(seq int64) int64 {
	tok := seq * s.Hidden * bf16
	scores := s.Heads * seq * seq * bf16
	perLayer := 16*tok + 3*scores + scores/2 // saved tensors, scores/probs/dropped, dropout mask
	// plus the head at its peak (logits, log-probs and their gradients) and
	// the softmax upcast temporary
	return int64(s.Layers)*perLayer + seq*s.Vocab*(2*bf16+2*fp32) + 2*scores
}

// sizeModel picks a shape that fits usable bytes: static state at most 40%,
// activations around 60% at peak, shrinking width, then sequence, as needed.
func sizeModel(layers int, usable int64) Shape {
	s := Shape{Layers: layers, Hidden: 4096, Heads: 32, Seq: 2048, Batch: 1, Vocab: 32000}
	for s.Hidden > 256 && s.staticBytes() > usable*2/5 {
		s.Hidden /= 2
		s.Heads /= 2
	}
	for s.Seq > 128 && s.staticBytes()+s.activationBytes(s.Seq) > usable*3/5 {
		s.Seq /= 2
	}
	if b := (usable*11/20 - s.staticBytes()) / s.activationBytes(s.Seq); b > 1 {
		s.Batch = min(b, 16)
	}
	return s
}
