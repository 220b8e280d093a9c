package ollama

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Gains of the layers' random weights, relative to 1/√fan-in. Strong
// layers make the next token depend on the whole context, not only on the
// last token: with weak ones the greedy text soon falls into a loop of
// one word ("opal opal opal …"), with these it keeps using every word
// over thousands of tokens.
const (
	gainQK   = 4 // sharp attention patterns
	gainAttn = 3
	gainFFN  = 3
)

// Shape of the tiny model: a llama-architecture transformer small enough
// to generate hundreds of tokens a second on one CPU core, and large
// enough that llama.cpp treats it as any other llama model.
const (
	modelLayers  = 2
	modelEmbd    = 64
	modelHeads   = 4
	modelFF      = 128
	modelContext = 4096
)

// Words are the only tokens the tiny model ever emits, each as a
// SentencePiece piece with its leading space ("▁amber"), so a stream reads
// " amber cedar fjord …". No word is a prefix of another, so a text made
// of them splits back into the same tokens (see Vocabulary).
var Words = []string{
	"amber", "basil", "cedar", "delta", "ember", "fjord", "glade", "hazel",
	"iris", "jade", "kelp", "lotus", "moss", "nova", "opal", "pine",
	"quill", "reed", "sage", "tide", "umber", "vale", "wren", "yew",
	"zinc", "dusk", "fern", "mist",
}

// spmSpace is SentencePiece's visible space, which starts a word's piece.
const spmSpace = "\u2581"

// Token types of a llama ("SentencePiece") vocabulary in GGUF.
const (
	tokenNormal  int32 = 1
	tokenUnknown int32 = 2
	tokenControl int32 = 3
	tokenByte    int32 = 6
)

// Special token ids.
const (
	tokenUnk = 0
	tokenBOS = 1
	tokenEOS = 2
)

// Vocabulary is the tiny model's tokenizer: <unk>, <s>, </s>, the 256
// byte tokens <0x00>…<0xFF> (SentencePiece's byte fallback, which spells
// any text the pieces cannot), then for every word each of its prefixes
// ("▁a", "▁am", "▁amb", "▁ambe", "▁amber"). llama.cpp's SentencePiece
// tokenizer builds a token by merging adjacent pieces only through pieces
// that are themselves in the vocabulary, so the prefixes are the ladder
// that lets " amber" come back as the one token "▁amber" when a delivered
// text is sent as a prompt again (a resume prefill); without them it
// would come back as bytes, and the continuation would differ.
//
// Emit reports, per token, whether the model may sample it: only the
// whole words are; the specials, the bytes and the partial prefixes are
// never sampled (their output rows are biased far down, see WriteModel),
// so a stream neither ends early at </s> nor spells broken UTF-8.
type Vocabulary struct {
	Tokens []string
	Scores []float32
	Types  []int32
	Emit   []bool
}

// NewVocabulary returns the vocabulary of Words, always the same.
func NewVocabulary() Vocabulary {
	var v Vocabulary
	add := func(tok string, typ int32, score float32, emit bool) {
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
		v.Emit = append(v.Emit, emit)
	}
	add("<unk>", tokenUnknown, 0, false)
	add("<s>", tokenControl, 0, false)
	add("</s>", tokenControl, 0, false)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenByte, 0, false)
	}
	seen := map[string]int{}
	for _, w := range Words {
		for i := 1; i <= len(w); i++ {
			piece := spmSpace + w[:i]
			whole := i == len(w)
			if at, ok := seen[piece]; ok {
				// A prefix shared by two words, or a whole word that is
				// another's prefix (Words has none, the test checks).
				v.Emit[at] = v.Emit[at] || whole
				continue
			}
			seen[piece] = len(v.Tokens)
			// SentencePiece merges the pair whose result scores highest
			// first; longer pieces score higher, so merging climbs the
			// ladder of a word from its start.
			add(piece, tokenNormal, float32(i), whole)
		}
	}
	return v
}

// ModelOptions configures WriteModel.
type ModelOptions struct {
	// Seed selects the random weights; the same seed gives the same bytes.
	Seed uint64
}

// WriteModel writes the tiny model as a GGUF v3 file: llama architecture,
// 2 layers, embedding 64, 4 heads, context 4096, F32 weights drawn from a
// generator seeded with o.Seed, and NewVocabulary's tokenizer. It is about
// half a megabyte.
//
// The weights are random, so the text is nonsense, but the model keeps
// two promises the end-to-end suite relies on: it never samples a token
// that NewVocabulary marks as not emitted, and it never ends a stream by
// itself (it runs until max_tokens). The bias behind both: embedding
// dimension 0 is 1 for every token and no layer writes to it (its row of
// each layer's output projection is zero), so after the final RMS norm it
// stays positive whatever the context; the output row of every
// non-emitted token weighs that dimension by −1000, which puts its logit
// hundreds below the others.
func WriteModel(w io.Writer, o ModelOptions) error {
	voc := NewVocabulary()
	rng := splitmix{state: o.Seed}
	nVocab := uint64(len(voc.Tokens))
	headDim := modelEmbd / modelHeads

	kvs := []ggufKV{
		{"general.architecture", "llama"},
		{"general.name", "streamwatch-tiny"},
		{"general.file_type", uint32(0)}, // all F32
		{"llama.context_length", uint32(modelContext)},
		{"llama.embedding_length", uint32(modelEmbd)},
		{"llama.block_count", uint32(modelLayers)},
		{"llama.feed_forward_length", uint32(modelFF)},
		{"llama.attention.head_count", uint32(modelHeads)},
		{"llama.attention.head_count_kv", uint32(modelHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(nVocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", voc.Tokens},
		{"tokenizer.ggml.scores", voc.Scores},
		{"tokenizer.ggml.token_type", voc.Types},
		{"tokenizer.ggml.unknown_token_id", uint32(tokenUnk)},
		{"tokenizer.ggml.bos_token_id", uint32(tokenBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(tokenEOS)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}

	// matrix returns in×out weights uniform with standard deviation std
	// (ggml layout: out rows of in values).
	matrix := func(in, out int, std float64) []float32 {
		m := make([]float32, in*out)
		for i := range m {
			m[i] = float32(rng.uniform(std))
		}
		return m
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	// zeroRow0 keeps a layer from writing to the anchor dimension.
	zeroRow0 := func(m []float32, in int) []float32 {
		clear(m[:in])
		return m
	}
	dims := func(d ...int) []uint64 {
		u := make([]uint64, len(d))
		for i, x := range d {
			u[i] = uint64(x)
		}
		return u
	}

	embd := matrix(modelEmbd, int(nVocab), 1)
	for t := range int(nVocab) {
		embd[t*modelEmbd] = 1 // the anchor dimension
	}
	tensors := []ggufTensor{{"token_embd.weight", dims(modelEmbd, int(nVocab)), embd}}
	for l := range modelLayers {
		p := fmt.Sprintf("blk.%d.", l)
		proj := 1 / math.Sqrt(modelEmbd)
		tensors = append(tensors,
			ggufTensor{p + "attn_norm.weight", dims(modelEmbd), ones(modelEmbd)},
			ggufTensor{p + "attn_q.weight", dims(modelEmbd, modelEmbd), matrix(modelEmbd, modelEmbd, gainQK*proj)},
			ggufTensor{p + "attn_k.weight", dims(modelEmbd, modelEmbd), matrix(modelEmbd, modelEmbd, gainQK*proj)},
			ggufTensor{p + "attn_v.weight", dims(modelEmbd, modelEmbd), matrix(modelEmbd, modelEmbd, proj)},
			ggufTensor{p + "attn_output.weight", dims(modelEmbd, modelEmbd), zeroRow0(matrix(modelEmbd, modelEmbd, gainAttn*proj), modelEmbd)},
			ggufTensor{p + "ffn_norm.weight", dims(modelEmbd), ones(modelEmbd)},
			ggufTensor{p + "ffn_gate.weight", dims(modelEmbd, modelFF), matrix(modelEmbd, modelFF, proj)},
			ggufTensor{p + "ffn_up.weight", dims(modelEmbd, modelFF), matrix(modelEmbd, modelFF, proj)},
			ggufTensor{p + "ffn_down.weight", dims(modelFF, modelEmbd), zeroRow0(matrix(modelFF, modelEmbd, gainFFN/math.Sqrt(modelFF)), modelFF)},
		)
	}
	out := matrix(modelEmbd, int(nVocab), 0.4)
	for t := range int(nVocab) {
		out[t*modelEmbd] = 0
		if !voc.Emit[t] {
			out[t*modelEmbd] = -1000
		}
	}
	tensors = append(tensors,
		ggufTensor{"output_norm.weight", dims(modelEmbd), ones(modelEmbd)},
		ggufTensor{"output.weight", dims(modelEmbd, int(nVocab)), out},
	)
	return writeGGUF(w, kvs, tensors)
}

// WriteModelFile writes the tiny model to path.
func WriteModelFile(path string, o ModelOptions) error {
	var buf bytes.Buffer
	if err := WriteModel(&buf, o); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// IsWords reports whether text is made only of Words, each after one
// space, as the tiny model streams them: " amber cedar".
func IsWords(text string) bool {
	if text == "" || text[0] != ' ' {
		return false
	}
	known := map[string]bool{}
	for _, w := range Words {
		known[w] = true
	}
	for _, w := range strings.Split(text[1:], " ") {
		if !known[w] {
			return false
		}
	}
	return true
}

// splitmix is SplitMix64, written out so that the weights of a seed never
// change with the Go release (math/rand's derived distributions may).
type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniform returns a value uniform on [−a, a) with a = std·√3, whose
// standard deviation is std.
func (s *splitmix) uniform(std float64) float64 {
	u := float64(s.next()>>11) / (1 << 53) // [0, 1)
	return (2*u - 1) * std * math.Sqrt(3)
}
