package openaigo_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

const chunkEvent = `data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1796000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n"

func body(n int) []byte { return []byte(strings.Repeat(chunkEvent, n) + "data: [DONE]\n\n") }

func resp(b []byte) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(b))}
}

// BenchmarkOpenAIGoStream decodes and classifies a stream with openai-go's
// own ssestream, per chunk; BenchmarkRawSSEStream does the same bytes with
// hedgeprobe/sse. Both in one run so the two compare.
func BenchmarkOpenAIGoStream(b *testing.B) {
	const n = 1000
	in := body(n)
	b.ReportAllocs()
	for b.Loop() {
		s := ssestream.NewStream[openaigo.Chunk](ssestream.NewDecoder(resp(in)), nil)
		for s.Next() {
			_ = openaigo.Classify(s.Current())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
}

func BenchmarkRawSSEStream(b *testing.B) {
	const n = 1000
	in := body(n)
	b.ReportAllocs()
	for b.Loop() {
		s := sse.NewOpenAIStream(resp(in), sse.StreamOptions{})
		for s.Next() {
			_ = sse.ClassifyOpenAI(s.Current())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/chunk")
}
