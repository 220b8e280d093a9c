package ollama

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// The GGUF container, version 3, as far as the tiny model needs it: a
// header, typed key-value metadata, tensor descriptions, then the tensor
// data, each tensor at an offset aligned to ggufAlignment. Every number is
// little-endian; a string is its byte length (uint64) then its bytes.
const (
	ggufMagic     = "GGUF"
	ggufVersion   = 3
	ggufAlignment = 32 // the format's default general.alignment
)

// Metadata value types of GGUF.
const (
	ggufUint32  uint32 = 4
	ggufInt32   uint32 = 5
	ggufFloat32 uint32 = 6
	ggufBool    uint32 = 7
	ggufString  uint32 = 8
	ggufArray   uint32 = 9
)

// ggmlTypeF32 is ggml's tensor type of 32-bit floats.
const ggmlTypeF32 uint32 = 0

// ggufKV is one metadata entry. Value is one of uint32, int32, float32,
// bool, string, []string, []float32 or []int32.
type ggufKV struct {
	Key   string
	Value any
}

// ggufTensor is one F32 tensor. Dims are ggml's: Dims[0] varies fastest,
// so a matrix mapping n inputs to m outputs is {n, m} and Data holds m
// rows of n.
type ggufTensor struct {
	Name string
	Dims []uint64
	Data []float32
}

// writeGGUF writes a GGUF v3 file of kvs and tensors to w, in the order
// given, so the same input gives the same bytes.
func writeGGUF(w io.Writer, kvs []ggufKV, tensors []ggufTensor) error {
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		if len(t.Dims) == 0 || n != uint64(len(t.Data)) {
			return fmt.Errorf("gguf: tensor %s: dims %v do not hold %d values", t.Name, t.Dims, len(t.Data))
		}
	}
	e := &ggufEncoder{w: bufio.NewWriter(w)}
	e.bytes([]byte(ggufMagic))
	e.u32(ggufVersion)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	var offset uint64
	for _, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(ggmlTypeF32)
		e.u64(offset)
		offset = align(offset + 4*uint64(len(t.Data)))
	}
	e.pad()
	for _, t := range tensors {
		for _, f := range t.Data {
			e.u32(math.Float32bits(f))
		}
		e.pad()
	}
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

func align(n uint64) uint64 {
	return (n + ggufAlignment - 1) / ggufAlignment * ggufAlignment
}

// ggufEncoder keeps the first write error and the byte count, so the
// writer above reads as the format does.
type ggufEncoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *ggufEncoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(b)
	e.n += uint64(n)
}

func (e *ggufEncoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.bytes(e.buf[:4])
}

func (e *ggufEncoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.bytes(e.buf[:8])
}

func (e *ggufEncoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

// pad writes zeros up to the next aligned offset.
func (e *ggufEncoder) pad() {
	var zero [ggufAlignment]byte
	e.bytes(zero[:align(e.n)-e.n])
}

func (e *ggufEncoder) value(v any) {
	switch v := v.(type) {
	case uint32:
		e.u32(ggufUint32)
		e.u32(v)
	case int32:
		e.u32(ggufInt32)
		e.u32(uint32(v))
	case float32:
		e.u32(ggufFloat32)
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(ggufBool)
		b := byte(0)
		if v {
			b = 1
		}
		e.bytes([]byte{b})
	case string:
		e.u32(ggufString)
		e.str(v)
	case []string:
		e.u32(ggufArray)
		e.u32(ggufString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []float32:
		e.u32(ggufArray)
		e.u32(ggufFloat32)
		e.u64(uint64(len(v)))
		for _, f := range v {
			e.u32(math.Float32bits(f))
		}
	case []int32:
		e.u32(ggufArray)
		e.u32(ggufInt32)
		e.u64(uint64(len(v)))
		for _, i := range v {
			e.u32(uint32(i))
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("gguf: unsupported metadata value %T", v)
		}
	}
}
