package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

// trackedUpstream is fakellm behind a handler that keeps, for the
// connection checks, the state of every server connection, how many
// requests are being served, per profile how many requests were
// answered to their end (their handler returned while their context
// was not done: fakellm stops at once when the client goes away), and
// how many requests came over each protocol.
type trackedUpstream struct {
	server *httptest.Server

	mu       sync.Mutex
	conns    map[net.Conn]http.ConnState
	inFlight map[string]int
	answered map[string]int
	protos   map[string]int
}

// startTracked starts the upstream on 127.0.0.1: over plain HTTP/1.1,
// or with h2 over TLS offering HTTP/2, where requests share connections
// as streams and a cancelled one is reset (RST_STREAM), not closed.
func startTracked(t *testing.T, h2 bool) *trackedUpstream {
	t.Helper()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	// The primary the checks race answers after 800 ms, not 80: a loser's
	// request that the client failed to cancel is then still running, or
	// answered whole, long after its call returned, however slow the
	// machine; a cancelled one has ended within milliseconds.
	cfg.Profiles["slow-first"].TTFT.Fixed *= SilenceFactor
	llm, err := fakellm.New(fakellm.Options{Config: cfg, Scale: Scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	u := &trackedUpstream{conns: map[net.Conn]http.ConnState{}, inFlight: map[string]int{}, answered: map[string]int{}, protos: map[string]int{}}
	u.server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		profile, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/p/"), "/")
		u.mu.Lock()
		u.inFlight[profile]++
		u.protos[r.Proto]++
		u.mu.Unlock()
		// Deferred: fakellm cuts a connection by panicking with
		// http.ErrAbortHandler, as net/http has handlers do.
		defer func() {
			cut := recover()
			// The server cancels a request's context after its handler
			// returns; done before is the client's doing.
			whole := cut == nil && r.Context().Err() == nil
			u.mu.Lock()
			u.inFlight[profile]--
			if whole {
				u.answered[profile]++
			}
			u.mu.Unlock()
			if cut != nil {
				panic(cut)
			}
		}()
		llm.ServeHTTP(w, r)
	}))
	u.server.Config.ConnState = func(c net.Conn, s http.ConnState) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if s == http.StateClosed || s == http.StateHijacked {
			delete(u.conns, c)
			return
		}
		u.conns[c] = s
	}
	if h2 {
		u.server.EnableHTTP2 = true
		u.server.StartTLS()
	} else {
		u.server.Start()
	}
	t.Cleanup(u.server.Close)
	return u
}

// settled waits, in real time, until cond holds (u.mu held) or 10 s
// have passed, and says which. The bound is no figure of the check: a
// connection a client holds on to stays open however long one waits.
func (u *trackedUpstream) settled(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		u.mu.Lock()
		ok := cond()
		u.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return ok
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serving is the number of requests being served; u.mu held.
func (u *trackedUpstream) serving() int {
	n := 0
	for _, k := range u.inFlight {
		n += k
	}
	return n
}

// idle says that no request is being served and no connection is in
// the middle of one. A new connection has carried no request yet: Go's
// transport keeps one it dialled for a request cancelled meanwhile as
// idle, for the next.
func (u *trackedUpstream) idle() bool {
	if u.serving() > 0 {
		return false
	}
	for _, s := range u.conns {
		if s == http.StateActive {
			return false
		}
	}
	return true
}

// describe is the upstream's state for a failure message; u.mu held.
func (u *trackedUpstream) describe() string {
	states := map[http.ConnState]int{}
	for _, s := range u.conns {
		states[s]++
	}
	busy := map[string]int{}
	for profile, n := range u.inFlight {
		if n > 0 {
			busy[profile] = n
		}
	}
	return fmt.Sprintf("serving %d requests (by profile %v), connections by state %v", u.serving(), busy, states)
}

// CheckConnectionsReleased checks, over real sockets to fakellm, that an
// adapter's attempts give back what they hold. route builds the adapter's
// route named profile to fakellm's profile at profileURL (an OpenAI
// client appends "/v1"), on client.
//
//   - Losers: 40 calls (8 at a time) race a primary whose first chunk
//     comes after 800 ms against a hedge launched at 10 ms that answers
//     in about 3 ms. No primary reported cancelled may have been answered
//     to its end or left running at the upstream: its request was ended
//     by the client, or never sent (cancelled while its connection was
//     dialled). The hedges must win most calls, so that the check is not
//     vacuous.
//   - Callers leaving: 48 calls of the same race whose caller cancels
//     its context after 0 to 15 ms, before the hedge, during the race or
//     mid-answer, end with no error but the caller's, and no primary's
//     request is answered to its end.
//   - Failing upstreams: 48 calls whose primary answers 429 or 503, fails
//     with an error event mid-stream, or drops its connection, the hedge
//     racing it — the paths where a body is left unread or unclosed.
//
// After each, once the calls have returned, no request may still be
// served and no connection be active — a body an attempt left unclosed
// holds its connection (over HTTP/2, its stream keeps the shared
// connection active) — and once the client's idle connections are
// closed, the upstream must have no connection left. Every request the
// adapter's client sent must carry its attempt's index in its context
// (hedgeprobe.AttemptIndexFromContext, what sse.Lanes reads under an SDK).
//
// The phases run three times, in subtests: over HTTP/1.1 on sse.Lanes,
// as sse.DefaultClient sends, and over HTTP/2 with TLS, where every
// request must have come as HTTP/2, on one sse.NewTransport (an SDK's default: a
// call's attempts share a connection) and on sse.Lanes (a connection per
// attempt index), each transport trusting the test server's certificate.
func (a Adapter[T]) CheckConnectionsReleased(t *testing.T, route func(client *http.Client, profileURL, profile string) hedgeprobe.Route[T]) {
	t.Helper()
	for _, v := range []struct {
		name, proto string
		lanes       bool
	}{{"HTTP1.1", "HTTP/1.1", true}, {"HTTP2.0", "HTTP/2.0", false}, {"HTTP2.0_lanes", "HTTP/2.0", true}} {
		t.Run(v.name, func(t *testing.T) {
			h2 := v.proto == "HTTP/2.0"
			u := startTracked(t, h2)
			var tr transport = TrustingTransport(u.server)
			if v.lanes {
				tr = &sse.Lanes{New: func() http.RoundTripper { return TrustingTransport(u.server) }}
			}
			defer tr.CloseIdleConnections()
			a.checkConnectionsReleased(t, u, tr, route)
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.protos[v.proto] == 0 || len(u.protos) != 1 {
				t.Errorf("requests by protocol %v, want all %s", u.protos, v.proto)
			}
		})
	}
}

// transport is what the checks' client sends through.
type transport interface {
	http.RoundTripper
	CloseIdleConnections()
}

// indexes counts the requests sent through it by the attempt index in
// their context (-1: none), as sse.Lanes reads it.
type indexes struct {
	transport
	mu sync.Mutex
	by map[int]int
}

func (x *indexes) RoundTrip(req *http.Request) (*http.Response, error) {
	i, ok := hedgeprobe.AttemptIndexFromContext(req.Context())
	if !ok {
		i = -1
	}
	x.mu.Lock()
	x.by[i]++
	x.mu.Unlock()
	return x.transport.RoundTrip(req)
}

func (a Adapter[T]) checkConnectionsReleased(t *testing.T, u *trackedUpstream, tr transport, route func(client *http.Client, profileURL, profile string) hedgeprobe.Route[T]) {
	// Every request the adapter (its SDK) sends must carry its attempt's
	// index, or sse.Lanes under the SDK's client would send a call's
	// attempts through one transport.
	idx := &indexes{transport: tr, by: map[int]int{}}
	defer func() {
		idx.mu.Lock()
		defer idx.mu.Unlock()
		if idx.by[-1] > 0 || idx.by[0] == 0 || idx.by[1] == 0 {
			t.Errorf("requests by the attempt index in their context (-1: none) %v, want every one with its index, primaries and hedges", idx.by)
		}
	}()
	client := &http.Client{Transport: idx}
	routes := []hedgeprobe.Route[T]{
		route(client, u.server.URL+"/p/slow-first", "slow-first"),
		route(client, u.server.URL+"/p/steady", "steady"),
	}
	// A budget of one hedge per call, so that no hedge is refused
	// however the calls interleave.
	p := a.NewProber(t, hedgeprobe.Config{HedgeAfter: 10 * time.Millisecond, MaxAttempts: 2, HedgeBudget: 1, HedgeBurst: 20})

	released := func(what string) {
		t.Helper()
		if !u.settled(u.idle) {
			u.mu.Lock()
			t.Errorf("%s: 10 s after the last call returned the upstream is %s", what, u.describe())
			u.mu.Unlock()
		}
		// Closed again at every look: a connection dialled for an
		// attempt cancelled meanwhile joins the idle pool when its
		// handshake ends, which over TLS can be after the first call.
		// One the client still holds is never idle, however often it
		// is called.
		if !u.settled(func() bool { tr.CloseIdleConnections(); return len(u.conns) == 0 }) {
			u.mu.Lock()
			t.Errorf("%s: with the client's idle connections closed the upstream is %s", what, u.describe())
			u.mu.Unlock()
		}
	}

	var mu sync.Mutex
	primariesWon, hedgesWon := 0, 0
	calls(40, func(i int) {
		s := p.Stream(context.Background(), routes...)
		for s.Next() {
		}
		err := s.Err()
		_ = s.Close()
		st := s.Stats()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("losers: call %d: %v", i, err)
		}
		switch st.WinnerRoute {
		case "slow-first":
			primariesWon++
		case "steady":
			hedgesWon++
		}
	})
	released("losers")
	u.mu.Lock()
	if got := u.answered["slow-first"]; got != primariesWon {
		t.Errorf("losers: the primary won %d calls, the upstream answered %d of its requests to their end", primariesWon, got)
	}
	u.mu.Unlock()
	if hedgesWon < 30 {
		t.Errorf("losers: the hedge won %d of 40 calls, want at least 30", hedgesWon)
	}

	u.mu.Lock()
	answeredBefore := u.answered["slow-first"]
	u.mu.Unlock()
	calls(48, func(i int) {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Duration(i%16)*time.Millisecond, cancel)
		defer stop.Stop()
		defer cancel()
		s := p.Stream(ctx, routes...)
		for s.Next() {
		}
		err := s.Err()
		_ = s.Close()
		if err != nil && !errors.Is(err, context.Canceled) {
			mu.Lock()
			t.Errorf("callers leaving: call %d: %v", i, err)
			mu.Unlock()
		}
	})
	released("callers leaving")
	u.mu.Lock()
	if got := u.answered["slow-first"] - answeredBefore; got != 0 {
		t.Errorf("callers leaving: %d requests of the primary answered to their end, though every caller left within 15 ms", got)
	}
	u.mu.Unlock()

	failing := []string{"ratelimit", "server-error", "error-mid", "disconnect"}
	steady := routes[1]
	failingRoutes := make([]hedgeprobe.Route[T], len(failing))
	for i, profile := range failing {
		failingRoutes[i] = route(client, u.server.URL+"/p/"+profile, profile)
	}
	// Without ejection, so that every call starts on its failing route
	// rather than the first few.
	pf := a.NewProber(t, hedgeprobe.Config{HedgeAfter: 10 * time.Millisecond, MaxAttempts: 2, HedgeBudget: 1, HedgeBurst: 20, EjectFailures: hedgeprobe.NoEjection})
	failedFirst := 0
	calls(48, func(i int) {
		s := pf.Stream(context.Background(), failingRoutes[i%len(failing)], steady)
		for s.Next() {
		}
		_ = s.Close()
		if st := s.Stats(); len(st.Attempts) > 0 && st.Attempts[0].Route == failing[i%len(failing)] {
			mu.Lock()
			failedFirst++
			mu.Unlock()
		}
	})
	released("failing upstreams")
	if failedFirst < 40 {
		t.Errorf("failing upstreams: %d of 48 calls started on the failing route, want at least 40", failedFirst)
	}
}

// calls runs call(i) for i in [0, n), eight at a time.
func calls(n int, call func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			call(i)
		}()
	}
	wg.Wait()
}
