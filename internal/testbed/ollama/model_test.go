package ollama

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// ggufFile is what readGGUF finds in a file: enough to check the writer
// against the format, not a general reader.
type ggufFile struct {
	version uint32
	kv      map[string]any
	tensors map[string]ggufTensorInfo
	data    []byte // from the aligned start of the tensor data
}

type ggufTensorInfo struct {
	dims   []uint64
	typ    uint32
	offset uint64
}

type ggufReader struct {
	r   *bytes.Reader
	err error
}

func (d *ggufReader) read(v any) {
	if d.err == nil {
		d.err = binary.Read(d.r, binary.LittleEndian, v)
	}
}

func (d *ggufReader) u32() (v uint32) { d.read(&v); return v }
func (d *ggufReader) u64() (v uint64) { d.read(&v); return v }

func (d *ggufReader) str() string {
	n := d.u64()
	if d.err != nil || n > uint64(d.r.Len()) {
		d.err = fmt.Errorf("string of %d bytes past the end", n)
		return ""
	}
	b := make([]byte, n)
	_, d.err = io.ReadFull(d.r, b)
	return string(b)
}

func (d *ggufReader) scalar(typ uint32) any {
	switch typ {
	case ggufUint32:
		return d.u32()
	case ggufInt32:
		return int32(d.u32())
	case ggufFloat32:
		return math.Float32frombits(d.u32())
	case ggufBool:
		var b uint8
		d.read(&b)
		return b == 1
	case ggufString:
		return d.str()
	}
	d.err = fmt.Errorf("unexpected type %d", typ)
	return nil
}

func readGGUF(b []byte) (*ggufFile, error) {
	d := &ggufReader{r: bytes.NewReader(b)}
	magic := make([]byte, 4)
	d.read(magic)
	if string(magic) != ggufMagic {
		return nil, fmt.Errorf("magic %q", magic)
	}
	f := &ggufFile{version: d.u32(), kv: map[string]any{}, tensors: map[string]ggufTensorInfo{}}
	nTensors, nKV := d.u64(), d.u64()
	for range nKV {
		key := d.str()
		typ := d.u32()
		if typ != ggufArray {
			f.kv[key] = d.scalar(typ)
			continue
		}
		et, n := d.u32(), d.u64()
		var arr []any
		for range n {
			arr = append(arr, d.scalar(et))
			if d.err != nil {
				break
			}
		}
		f.kv[key] = arr
	}
	for range nTensors {
		name := d.str()
		ti := ggufTensorInfo{dims: make([]uint64, d.u32())}
		for i := range ti.dims {
			ti.dims[i] = d.u64()
		}
		ti.typ, ti.offset = d.u32(), d.u64()
		f.tensors[name] = ti
	}
	if d.err != nil {
		return nil, d.err
	}
	start := align(uint64(len(b) - d.r.Len()))
	if start > uint64(len(b)) {
		return nil, fmt.Errorf("data start %d past the end %d", start, len(b))
	}
	f.data = b[start:]
	return f, nil
}

// tensor returns the F32 values of a tensor.
func (f *ggufFile) tensor(t *testing.T, name string) ([]uint64, []float32) {
	t.Helper()
	ti, ok := f.tensors[name]
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	n := uint64(1)
	for _, d := range ti.dims {
		n *= d
	}
	if ti.typ != ggmlTypeF32 || ti.offset%ggufAlignment != 0 || ti.offset+4*n > uint64(len(f.data)) {
		t.Fatalf("tensor %s: type %d offset %d size %d, data %d bytes", name, ti.typ, ti.offset, 4*n, len(f.data))
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.data[ti.offset+4*uint64(i):]))
	}
	return ti.dims, v
}

func model(t *testing.T, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteModel(&buf, ModelOptions{Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestModelIsDeterministic(t *testing.T) {
	a, b, c := model(t, 7), model(t, 7), model(t, 8)
	if !bytes.Equal(a, b) {
		t.Error("two models of seed 7 differ")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 7 and 8 give the same model")
	}
	if len(a) != len(c) {
		t.Errorf("the size depends on the seed: %d and %d bytes", len(a), len(c))
	}
	if len(a) < 300_000 || len(a) > 800_000 {
		t.Errorf("model is %d bytes, want about half a megabyte", len(a))
	}
}

func TestModelReadsBack(t *testing.T) {
	f, err := readGGUF(model(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	if f.version != 3 {
		t.Errorf("version %d", f.version)
	}
	voc := NewVocabulary()
	nv := uint64(len(voc.Tokens))
	for k, want := range map[string]any{
		"general.architecture":          "llama",
		"llama.block_count":             uint32(2),
		"llama.embedding_length":        uint32(64),
		"llama.attention.head_count":    uint32(4),
		"llama.context_length":          uint32(4096),
		"tokenizer.ggml.model":          "llama",
		"tokenizer.ggml.eos_token_id":   uint32(2),
		"tokenizer.ggml.add_bos_token":  true,
		"llama.rope.dimension_count":    uint32(16),
		"llama.attention.head_count_kv": uint32(4),
	} {
		if got := f.kv[k]; got != want {
			t.Errorf("%s = %v (%T), want %v", k, got, got, want)
		}
	}
	toks, _ := f.kv["tokenizer.ggml.tokens"].([]any)
	if uint64(len(toks)) != nv || toks[2] != "</s>" || toks[3+0x41] != "<0x41>" {
		t.Fatalf("tokens: %d of them, want %d; </s> at 2 and <0x41> at 68", len(toks), nv)
	}
	// 2 layers × 9 tensors + embedding, output norm and output.
	if len(f.tensors) != 2*9+3 {
		t.Errorf("%d tensors", len(f.tensors))
	}
	dims, embd := f.tensor(t, "token_embd.weight")
	if dims[0] != 64 || dims[1] != nv {
		t.Errorf("token_embd dims %v", dims)
	}
	for tok := range nv {
		if embd[tok*64] != 1 {
			t.Fatalf("token %d: anchor dimension %v, want 1", tok, embd[tok*64])
		}
	}
	_, out := f.tensor(t, "output.weight")
	for tok := range nv {
		w := out[tok*64]
		if voc.Emit[tok] != (w == 0) || !voc.Emit[tok] && w != -1000 {
			t.Errorf("token %q (emit %v): output weight on the anchor %v", voc.Tokens[tok], voc.Emit[tok], w)
		}
	}
	for l := range 2 {
		for _, name := range []string{"attn_output", "ffn_down"} {
			dims, w := f.tensor(t, fmt.Sprintf("blk.%d.%s.weight", l, name))
			for i := range dims[0] {
				if w[i] != 0 {
					t.Fatalf("blk.%d.%s writes to the anchor dimension (input %d: %v)", l, name, i, w[i])
				}
			}
		}
	}
}

func TestVocabulary(t *testing.T) {
	v := NewVocabulary()
	if n := len(v.Tokens); n < 300 || n > 450 {
		t.Errorf("%d tokens", n)
	}
	index := map[string]int{}
	for i, tok := range v.Tokens {
		if _, dup := index[tok]; dup {
			t.Errorf("token %q twice", tok)
		}
		index[tok] = i
	}
	emitted := 0
	for i, e := range v.Emit {
		if e {
			emitted++
			if v.Types[i] != tokenNormal || !strings.HasPrefix(v.Tokens[i], spmSpace) {
				t.Errorf("emitted token %q of type %d", v.Tokens[i], v.Types[i])
			}
		}
	}
	if emitted != len(Words) {
		t.Errorf("%d emitted tokens, want one per word (%d)", emitted, len(Words))
	}
	for _, w := range Words {
		if !v.Emit[index[spmSpace+w]] {
			t.Errorf("word %q is not emitted", w)
		}
		for i := 1; i < len(w); i++ {
			if _, ok := index[spmSpace+w[:i]]; !ok {
				t.Errorf("no ladder piece %q for %q", w[:i], w)
			}
		}
		for _, o := range Words {
			if o != w && strings.HasPrefix(o, w) {
				t.Errorf("word %q is a prefix of %q: their texts would not split back into the same tokens", w, o)
			}
		}
	}
}

func TestIsWords(t *testing.T) {
	for text, want := range map[string]bool{
		" amber cedar": true,
		" amber":       true,
		"amber":        false,
		" amber  moss": false,
		" ambe":        false,
		"":             false,
	} {
		if got := IsWords(text); got != want {
			t.Errorf("IsWords(%q) = %v", text, got)
		}
	}
}

func TestWriteGGUFRejectsBadDims(t *testing.T) {
	err := writeGGUF(io.Discard, nil, []ggufTensor{{Name: "x", Dims: []uint64{2, 3}, Data: make([]float32, 5)}})
	if err == nil || !strings.Contains(err.Error(), "x") {
		t.Errorf("err = %v, want one naming the tensor", err)
	}
	err = writeGGUF(io.Discard, []ggufKV{{"k", 1.5}}, nil)
	if err == nil || !strings.Contains(err.Error(), "float64") {
		t.Errorf("err = %v, want one naming the type", err)
	}
}

func TestParentOf(t *testing.T) {
	for stat, want := range map[string]int{
		"4242 (ollama) S 4100 4242 4242 0 -1":        4100,
		"4242 (a) b (c) d) R 17 4242 4242 0 -1 4194": 17,
		"4242 (ollama":    -1,
		"4242 (ollama) S": -1,
	} {
		if got := parentOf([]byte(stat)); got != want {
			t.Errorf("parentOf(%q) = %d, want %d", stat, got, want)
		}
	}
}
