package sse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// TestLanesRescueFrozenConnection: over HTTP/2 a Buffered call on one
// route whose connection freezes mid-answer. The stall hedge goes to the
// same host. Through one transport it rides the frozen connection and
// gets nothing; through Lanes it takes a connection of its own, wins, and
// the caller gets the whole answer. So does the hedge that follows the
// primary's failure (its stall watchdog, no stall hedge): the primary has
// ended, but its connection, frozen, is still in its transport's pool.
// And so does a Streaming call's resume after commit, which continues the
// words the caller has, on the same host.
func TestLanesRescueFrozenConnection(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Sixty words, "w0 " to "w59 "; a continuation (a trailing
		// assistant message) goes on after the words it was given.
		var body struct {
			Messages []sse.Message `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		from := 0
		if m := body.Messages; len(m) > 0 && m[len(m)-1].Role == "assistant" {
			from = len(strings.Fields(m[len(m)-1].Content))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := from; i < 60; i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	transport := func() *http.Transport { return adaptertest.TrustingTransport(srv) }
	stallHedge := hedgeprobe.Config{Delivery: hedgeprobe.Buffered, StallAfter: 300 * time.Millisecond, MaxAttempts: 2}
	var text string
	// call makes one call on one route through rt, a route that continues
	// a partial answer when cont is set.
	call := func(t *testing.T, cfg hedgeprobe.Config, rt http.RoundTripper, proxy *adaptertest.FreezingProxy, timeout time.Duration, cont sse.Continuation) (hedgeprobe.Stats, int, error) {
		t.Helper()
		client := &http.Client{Transport: rt}
		defer client.CloseIdleConnections()
		route := sse.OpenAIRoute("one", sse.OpenAIRequest{BaseURL: "https://" + proxy.Addr() + "/v1", Model: "m", Client: client,
			Messages: []sse.Message{{Role: "user", Content: "count"}}, Continue: cont})
		p, err := hedgeprobe.New(cfg, sse.OpenAIItems)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		s := p.Stream(ctx, route)
		defer s.Close()
		n := 0
		var b strings.Builder
		for s.Next() {
			if c := s.Current(); sse.ClassifyOpenAI(c) == hedgeprobe.Content {
				n++
				b.WriteString(c.Choices[0].Delta.Content)
			}
		}
		text = b.String()
		return s.Stats(), n, s.Err()
	}
	// About 6 KB: the handshakes and the first few dozen chunks.
	const limit = 6000

	t.Run("one transport", func(t *testing.T) {
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		st, n, err := call(t, stallHedge, transport(), proxy, 2*time.Second, sse.ContinueNone)
		if !errors.Is(err, context.DeadlineExceeded) || n != 0 {
			t.Fatalf("err %v, %d chunks delivered: want the call's deadline and none", err, n)
		}
		if len(st.Attempts) != 2 || st.Attempts[1].Trigger != hedgeprobe.TriggerStall || st.Attempts[1].ContentChunks != 0 {
			t.Fatalf("attempts %+v: want a stall hedge that got nothing", st.Attempts)
		}
		if got := proxy.Conns(); got != 1 {
			t.Fatalf("%d connections, want the hedge on the primary's", got)
		}
	})
	t.Run("lanes", func(t *testing.T) {
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		start := time.Now()
		st, n, err := call(t, stallHedge, &sse.Lanes{New: func() http.RoundTripper { return transport() }}, proxy, 20*time.Second, sse.ContinueNone)
		if err != nil || n != 60 {
			t.Fatalf("err %v, %d chunks delivered: want the whole answer", err, n)
		}
		if st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerStall || st.Attempts[0].ContentChunks == 0 {
			t.Fatalf("winner %d, attempts %+v: want the stall hedge to win after the primary's first chunks", st.Winner, st.Attempts)
		}
		if got := proxy.Conns(); got != 2 {
			t.Fatalf("%d connections, want one per lane", got)
		}
		t.Logf("rescued in %v (primary froze after %d chunks)", time.Since(start).Round(time.Millisecond), st.Attempts[0].ContentChunks)
	})
	t.Run("one transport, quick pings", func(t *testing.T) {
		// Pinged after 300 ms without a frame, and closed 500 ms after
		// that: the frozen connection fails the attempts on it, and an
		// error hedge dials a new one.
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		tr := transport()
		tr.HTTP2.SendPingTimeout, tr.HTTP2.PingTimeout = 300*time.Millisecond, 500*time.Millisecond
		cfg := stallHedge
		cfg.MaxAttempts = 3
		st, n, err := call(t, cfg, tr, proxy, 20*time.Second, sse.ContinueNone)
		if err != nil || n != 60 || st.Winner != 2 || st.Attempts[2].Trigger != hedgeprobe.TriggerError {
			t.Fatalf("err %v, %d chunks delivered, winner %d, attempts %+v: want the error hedge's whole answer, after the ping failed the primary and the stall hedge", err, n, st.Winner, st.Attempts)
		}
		if got := proxy.Conns(); got < 2 {
			t.Fatalf("%d connections, want the frozen one closed and another dialled", got)
		}
	})
	t.Run("one transport, resumed after commit", func(t *testing.T) {
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		cfg := hedgeprobe.Config{ResumeAfter: 300 * time.Millisecond, MaxAttempts: 2}
		st, n, err := call(t, cfg, transport(), proxy, 2*time.Second, sse.ContinueTrailingAssistant)
		if !errors.Is(err, context.DeadlineExceeded) || len(st.Attempts) != 2 || st.Attempts[1].Trigger != hedgeprobe.TriggerResume || st.Attempts[1].ContentChunks != 0 {
			t.Fatalf("err %v, %d chunks, attempts %+v: want the call's deadline, after a resume that got nothing", err, n, st.Attempts)
		}
	})
	t.Run("lanes, resumed after commit", func(t *testing.T) {
		// Streaming: the caller has the primary's first chunks when its
		// connection freezes; the resume continues them on the same
		// host, and the caller reads the sixty words once each.
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		cfg := hedgeprobe.Config{ResumeAfter: 300 * time.Millisecond, MaxAttempts: 2}
		st, n, err := call(t, cfg, &sse.Lanes{New: func() http.RoundTripper { return transport() }}, proxy, 20*time.Second, sse.ContinueTrailingAssistant)
		var want strings.Builder
		for i := range 60 {
			fmt.Fprintf(&want, "w%d ", i)
		}
		if err != nil || text != want.String() {
			t.Fatalf("err %v, %d chunks, text %q: want the sixty words", err, n, text)
		}
		if st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerResume || st.Attempts[0].ContentChunks == 0 {
			t.Fatalf("winner %d, attempts %+v: want the resume to win after the primary's first chunks", st.Winner, st.Attempts)
		}
		if got := proxy.Conns(); got != 2 {
			t.Fatalf("%d connections, want one per lane", got)
		}
	})
	t.Run("lanes, after the primary failed", func(t *testing.T) {
		proxy := adaptertest.StartFreezingProxy(t, srv.Listener.Addr().String(), limit)
		cfg := hedgeprobe.Config{Delivery: hedgeprobe.Buffered, StallAfter: hedgeprobe.Off, StallTimeout: 300 * time.Millisecond, MaxAttempts: 2}
		st, n, err := call(t, cfg, &sse.Lanes{New: func() http.RoundTripper { return transport() }}, proxy, 20*time.Second, sse.ContinueNone)
		if err != nil || n != 60 {
			t.Fatalf("err %v, %d chunks delivered: want the whole answer", err, n)
		}
		if st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerError || st.Attempts[0].Outcome != hedgeprobe.AttemptFailed {
			t.Fatalf("winner %d, attempts %+v: want the error hedge to win after the primary's stall timeout", st.Winner, st.Attempts)
		}
		if got := proxy.Conns(); got != 2 {
			t.Fatalf("%d connections, want one per lane", got)
		}
	})
}

// TestLanesPerAttempt: three attempts that never answer, each in its own
// lane; a request made in an attempt's context, https or http://, goes
// through its lane's transport, made once; one of no attempt through
// lane 0; CloseIdleConnections reaches every lane made.
func TestLanesPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		made := map[int]*countingTransport{}
		l := &sse.Lanes{New: func() http.RoundTripper {
			mu.Lock()
			defer mu.Unlock()
			c := &countingTransport{}
			made[len(made)] = c
			return c
		}}
		p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: time.Second, MaxAttempts: 3, HedgeBudget: 1}, sse.OpenAIItems)
		if err != nil {
			t.Fatal(err)
		}
		lanes := map[int]int{}
		route := hedgeprobe.Route[sse.ChatChunk]{Name: "r", Open: func(ctx context.Context, a hedgeprobe.Attempt) (hedgeprobe.Source[sse.ChatChunk], error) {
			i, ok := hedgeprobe.AttemptIndexFromContext(ctx)
			mu.Lock()
			lanes[a.Index] = i
			mu.Unlock()
			if !ok {
				t.Errorf("attempt %d: no index in its context", a.Index)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:1/", nil)
			_, _ = l.RoundTrip(req)
			if a.Index == 2 {
				plain, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
				_, _ = l.RoundTrip(plain)
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s := p.Stream(ctx, route)
		for s.Next() {
		}
		_ = s.Close()
		req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:1/", nil)
		_, _ = l.RoundTrip(req)
		l.CloseIdleConnections()
		if fmt.Sprint(lanes) != "map[0:0 1:1 2:2]" || len(made) != 3 {
			t.Fatalf("index in the context by attempt %v, transports made %d", lanes, len(made))
		}
		for i, c := range made {
			want := 1
			if i == 0 || i == 2 {
				want = 2 // and the request of no attempt; and attempt 2's http:// request
			}
			if c.requests.Load() != int32(want) || c.closed.Load() != 1 {
				t.Errorf("transport %d: %d requests, closed %d times; want %d and 1", i, c.requests.Load(), c.closed.Load(), want)
			}
		}
	})
}

type countingTransport struct{ requests, closed atomic.Int32 }

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.requests.Add(1)
	return nil, errors.New("no network here")
}

func (c *countingTransport) CloseIdleConnections() { c.closed.Add(1) }

// TestTapPassesCloseIdleConnections: a client on a Tap over Lanes closes
// the idle connections of every lane the requests made.
func TestTapPassesCloseIdleConnections(t *testing.T) {
	var made []*countingTransport
	lanes := &sse.Lanes{New: func() http.RoundTripper {
		c := &countingTransport{}
		made = append(made, c)
		return c
	}}
	client := &http.Client{Transport: &sse.Tap{Base: lanes}}
	req, _ := http.NewRequest(http.MethodGet, "https://127.0.0.1:1/", nil)
	_, _ = client.Do(req)
	client.CloseIdleConnections()
	if len(made) != 1 || made[0].requests.Load() != 1 || made[0].closed.Load() != 1 {
		t.Fatalf("transports %d; want one, with one request, closed once", len(made))
	}
}

// TestLanesDials measures what lanes cost in connections: 400 calls, 8 at
// a time, on one route hedged on itself, every tenth primary slow (its
// first chunk after 200 ms; the hedge, launched at 50 ms, answers at once
// and wins), over HTTP/1.1 to an http:// and an https upstream and over
// HTTP/2, through one transport and through Lanes. It logs the
// connections dialled.
//
// Lanes may dial a little more: a hedge finds idle connections only in
// its own lane's pool, and each lane's first requests race their dials.
// Over HTTP/2 a transport dials once for each request in flight before
// its first connection is up (the extras are closed then): at most 8
// calls × 2 attempts, which lanes split, primaries in lane 0 and hedges
// in lane 1. Over HTTP/1.1 the dials beyond the cancelled losers'
// connections (which HTTP/1.1 closes, lanes or not) fill the pools,
// which the 8 calls at a time keep small: the check asks for fewer than
// one per four calls. (How many attempts lose is the machine's doing: a
// primary slowed past 50 ms by a busy machine is hedged too.) A lane
// that made a transport per request would dial for every one.
func TestLanesDials(t *testing.T) {
	for _, proto := range []string{"http://", "HTTP/1.1", "HTTP/2"} {
		h2 := proto == "HTTP/2"
		for _, lanes := range []bool{false, true} {
			var (
				mu     sync.Mutex
				seen   = map[string]int{}
				dials  int
				protos = map[string]int{}
			)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				call := strings.Split(r.URL.Path, "/")[2]
				mu.Lock()
				seen[call]++
				protos[r.Proto]++
				slow := seen[call] == 1 && strings.HasSuffix(call, "0")
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				if slow {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
				for range 5 {
					fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w \"}}]}\n\n")
					w.(http.Flusher).Flush()
				}
				fmt.Fprint(w, "data: [DONE]\n\n")
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					mu.Lock()
					dials++
					mu.Unlock()
				}
			}
			srv.EnableHTTP2 = h2
			if proto == "http://" {
				srv.Start()
			} else {
				srv.StartTLS()
			}
			newTransport := func() http.RoundTripper { return adaptertest.TrustingTransport(srv) }
			var rt http.RoundTripper = newTransport()
			if lanes {
				rt = &sse.Lanes{New: newTransport}
			}
			client := &http.Client{Transport: rt}
			p, err := hedgeprobe.New(hedgeprobe.Config{HedgeAfter: 50 * time.Millisecond, MaxAttempts: 2, HedgeBudget: 1, HedgeBurst: 20}, sse.OpenAIItems)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			sem := make(chan struct{}, 8)
			var hedgesWon, losers, failed atomic.Int32
			for i := range 400 {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					route := sse.OpenAIRoute("r", sse.OpenAIRequest{BaseURL: fmt.Sprintf("%s/c/%d/v1", srv.URL, i), Model: "m", Client: client,
						Messages: []sse.Message{{Role: "user", Content: "hi"}}})
					s := p.Stream(context.Background(), route)
					for s.Next() {
					}
					if s.Err() != nil {
						failed.Add(1)
					}
					_ = s.Close()
					st := s.Stats()
					if st.Winner == 1 {
						hedgesWon.Add(1)
					}
					losers.Add(int32(len(st.Attempts) - 1))
				}()
			}
			wg.Wait()
			client.CloseIdleConnections()
			srv.Close()
			mu.Lock()
			t.Logf("%s, lanes %v: %d connections dialled for 400 calls, %d attempts lost, %d hedges won", proto, lanes, dials, losers.Load(), hedgesWon.Load())
			if want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; len(protos) != 1 || protos[want] == 0 {
				t.Errorf("%s, lanes %v: requests by protocol %v, want all %s", proto, lanes, protos, want)
			}
			if h2 && dials > 8*2 {
				t.Errorf("%s, lanes %v: %d connections dialled; want at most one per request in flight before the first was up, 16", proto, lanes, dials)
			}
			if extra := dials - int(losers.Load()); !h2 && extra >= 100 {
				t.Errorf("%s, lanes %v: %d connections dialled beyond the %d losers'; want fewer than 100", proto, lanes, extra, losers.Load())
			}
			mu.Unlock()
			if failed.Load() != 0 || hedgesWon.Load() < 30 {
				t.Errorf("%s, lanes %v: %d calls failed, %d hedges won; want none, and the hedges of most of the 40 slow primaries", proto, lanes, failed.Load(), hedgesWon.Load())
			}
		}
	}
}
