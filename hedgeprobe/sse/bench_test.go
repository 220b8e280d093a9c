package sse

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// chunkEvent is a typical OpenAI content chunk event (~230 bytes).
const chunkEvent = `data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1796000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n"

func streamBytes(n int) []byte {
	return []byte(strings.Repeat(chunkEvent, n) + "data: [DONE]\n\n")
}

// BenchmarkReader is the WHATWG reader alone, per event.
func BenchmarkReader(b *testing.B) {
	const n = 1000
	in := streamBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		rd := NewReader(bytes.NewReader(in))
		for rd.Next() {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkReaderCRLineEnds is BenchmarkReader on a stream whose lines end
// in CR alone, which the rules allow and no LF follows.
func BenchmarkReaderCRLineEnds(b *testing.B) {
	const n = 1000
	in := bytes.ReplaceAll(streamBytes(n), []byte("\n"), []byte("\r"))
	b.ReportAllocs()
	for b.Loop() {
		rd := NewReader(bytes.NewReader(in))
		for rd.Next() {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkScannerBaseline is the SDKs' way (bufio.Scanner lines, no
// timestamps, no CR handling, no limit error), per event, as the baseline.
func BenchmarkScannerBaseline(b *testing.B) {
	const n = 1000
	in := streamBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(in))
		sc.Buffer(nil, bufio.MaxScanTokenSize<<9)
		var data []byte
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				_ = bytes.Clone(data)
				data = data[:0]
				continue
			}
			if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				data = append(data, v...)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkOpenAIStream is reader + JSON decode + classify + token count,
// per chunk: what a raw-SSE route costs hedgeprobe per item.
func BenchmarkOpenAIStream(b *testing.B) {
	const n = 1000
	in := streamBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		s := NewOpenAIStream(response(context.Background(), 200, "text/event-stream", bytes.NewReader(in)), StreamOptions{})
		for s.Next() {
			c := s.Current()
			_ = ClassifyOpenAI(c)
			_, _ = OpenAITokens(c)
		}
		if s.Err() != nil {
			b.Fatal(s.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
}

// BenchmarkTap is the tap's parsing on top of a plain read of the body.
func BenchmarkTap(b *testing.B) {
	const n = 1000
	in := streamBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		tb := &tapBody{ReadCloser: io.NopCloser(bytes.NewReader(in)), emit: func(Event) {}}
		tb.p.limit, tb.p.watch = TapLimit, true // as RoundTrip sets them
		_, _ = io.Copy(io.Discard, struct{ io.Reader }{tb})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

func BenchmarkClassifyOpenAI(b *testing.B) {
	c, _, _, _ := decodeOpenAI("openai", Event{Data: []byte(strings.TrimSpace(strings.TrimPrefix(chunkEvent, "data: ")))})
	b.ReportAllocs()
	for b.Loop() {
		_ = ClassifyOpenAI(c)
	}
}
