package bodyend

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// chunked reads r n bytes at a time, as a body read in pieces does.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// The [DONE] line is found however the reads cut it, and nothing else is
// taken for it.
func TestDoneBodyFindsTheMark(t *testing.T) {
	for _, tc := range []struct {
		body string
		done bool
	}{
		{"data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true},
		{"data: [DONE]", true},
		{"data: {\"choices\":[]}\n\ndata:[DONE]\n\n", true},
		// go-openai takes any whitespace after the colon.
		{"data: {\"choices\":[]}\n\ndata:  [DONE]\n\n", true},
		{"data: {\"choices\":[]}\r\n\r\ndata:\t \f[DONE]\r\n\r\n", true},
		{"data:\r[DONE]", true},
		{"\n\n\ndata: [DONE]", true},
		{"ddata: [DONE]\n", false},
		{"data: x[DONE]\n", false},
		{"data: [DONE\ndata: [DONE\n", false},
		{" data: [DONE]\n", false}, // a field named " data", no SDK's end
		// A byte order mark is no part of the first line; a part of one is.
		{"\uFEFFdata: [DONE]", true},
		{"\uFEFFdata: {}\n\ndata:  [DONE]\n", true},
		{"\xEF\xBBdata: [DONE]\n", false},
		{"\uFEFF\uFEFFdata: [DONE]\n", false},
		// A text delta that holds the mark is no end: a Close there would
		// wait for a body that goes on.
		{"data: {\"choices\":[{\"delta\":{\"content\":\"data: [DONE]\"}}]}\n\n", false},
		{"data: {\"choices\":[]}\n\ndata: [DONT]\n\n", false},
		{"data: [DON\n\nE]", false},
		{"", false},
	} {
		for n := 1; n <= len(tc.body)+1; n++ {
			resp := &http.Response{ProtoMajor: 1, StatusCode: 200, Body: io.NopCloser(chunked{strings.NewReader(tc.body), n})}
			AtDone(resp)
			b := resp.Body.(*doneBody)
			if _, err := io.Copy(io.Discard, b); err != nil {
				t.Fatal(err)
			}
			if b.done.Load() != tc.done {
				t.Errorf("%q read %d bytes at a time: done %v, want %v", tc.body, n, b.done.Load(), tc.done)
			}
		}
	}
}

// Only a 2xx HTTP/1.x response is wrapped, or drained: HTTP/2 keeps its
// connection without, and a response not from the network (ProtoMajor 0)
// may have a body whose Close does not end a Read.
func TestOnlyHTTP1(t *testing.T) {
	for _, tc := range []struct {
		major, status int
		wrapped       bool
	}{
		{1, 200, true}, {2, 200, false}, {0, 200, false}, {1, 429, false},
	} {
		resp := &http.Response{ProtoMajor: tc.major, StatusCode: tc.status, Body: io.NopCloser(strings.NewReader("x"))}
		AtDone(resp)
		if _, ok := resp.Body.(*doneBody); ok != tc.wrapped {
			t.Errorf("HTTP/%d %d: wrapped %v, want %v", tc.major, tc.status, ok, tc.wrapped)
		}
	}
	// Drain leaves a body it must not touch unread.
	resp := &http.Response{ProtoMajor: 2, Body: io.NopCloser(strings.NewReader("rest"))}
	Drain(resp)
	if b, _ := io.ReadAll(resp.Body); string(b) != "rest" {
		t.Errorf("Drain read an HTTP/2 body: %q left", b)
	}
}
