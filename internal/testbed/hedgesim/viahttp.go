package hedgesim

// The hedgedhttp row's call: the real cristalhq/hedgedhttp client over the
// scripted upstreams' in-memory transport, its winner's SSE body read to
// the end (hedgedpool.go makes the library's worker queue run in virtual
// time).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cristalhq/hedgedhttp"
)

var (
	sseData = []byte("data: ")
	sseDone = []byte("data: [DONE]")
)

// viaHTTP makes the call through hedgedhttp and reads the winner's SSE
// body; no watchdog (hedgedhttp has none). A winner that is a 429 or a
// 5xx is retried once, the other route first, as the caller's fallback
// chain would, and as the other competitors' rows are.
func viaHTTP(ctx context.Context, client *hedgedhttp.Client, c *call) Result {
	start := time.Now()
	hc := &httpCall{call: c}
	r := readHTTP(ctx, client, hc)
	r.Streams = 1
	tries := []*httpCall{hc}
	if se, ok := errors.AsType[*StatusError](r.Err); ok && se.Transient() {
		retry := &httpCall{call: c, first: 1}
		tries = append(tries, retry)
		offset := time.Since(start)
		r = readHTTP(ctx, client, retry)
		r.Done += offset
		if r.TTFT >= 0 {
			r.TTFT += offset
			r.AnswerTTFT += offset
		}
		r.Streams = 2
	}
	// Every round trip hedgedhttp made has returned by now (the winner's
	// body is closed, losers were cancelled); a loser still in its header
	// wait is counted as an attempt all the same.
	var received int64
	for _, t := range tries {
		t.mu.Lock()
		r.Attempts += t.trips
		for _, b := range t.bodies {
			received += int64(b.s.content)
		}
		t.mu.Unlock()
	}
	r.Wasted = received - r.read
	return r.Result
}

// httpResult is a Result plus the content chunks the caller read.
type httpResult struct {
	Result
	read int64
}

func readHTTP(ctx context.Context, client *hedgedhttp.Client, hc *httpCall) (r httpResult) {
	start := time.Now()
	r.TTFT, r.AnswerTTFT = -1, -1
	req, err := http.NewRequestWithContext(context.WithValue(ctx, callKey{}, hc), http.MethodPost, "http://upstream.invalid/v1/chat/completions", nil)
	if err != nil {
		panic(err) // a constant URL: cannot fail
	}
	resp, err := client.Do(req)
	if err != nil {
		r.end(start, err)
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		r.end(start, &StatusError{Code: resp.StatusCode})
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, sseData) || bytes.Equal(line, sseDone) {
			continue
		}
		r.read++
		r.delivered(start)
	}
	r.end(start, sc.Err())
	return r
}
