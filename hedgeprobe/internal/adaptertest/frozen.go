package adaptertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

// TrustingTransport is an sse.NewTransport that trusts srv's certificate,
// when srv has one (started with StartTLS), and still offers HTTP/2 there:
// a TLS configuration of one's own turns HTTP/2 off unless
// ForceAttemptHTTP2, which the transport keeps from http.DefaultTransport.
func TrustingTransport(srv *httptest.Server) *http.Transport {
	tr := sse.NewTransport(sse.TransportOptions{})
	if c := srv.Certificate(); c != nil {
		roots := x509.NewCertPool()
		roots.AddCert(c)
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	return tr
}

// FreezingProxy forwards TCP connections on 127.0.0.1 to a backend. Its
// first connection stops forwarding to the client once it has carried
// a set number of bytes there, and stays open: to the client, a
// connection gone silent with no FIN or RST, as one through a middlebox
// that lost its state. (What the client sends still reaches the server,
// which answers into the void.)
type FreezingProxy struct {
	ln    net.Listener
	conns atomic.Int32
}

// StartFreezingProxy starts a proxy to backend (host:port) whose first
// connection freezes after limit bytes to the client. It and every
// connection it made close when the test ends.
func StartFreezingProxy(t testing.TB, backend string, limit int64) *FreezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FreezingProxy{ln: ln}
	var (
		mu     sync.Mutex
		open   []net.Conn
		closed bool
		wg     sync.WaitGroup
		stop   = make(chan struct{})
	)
	// track keeps c and b to close at the end, unless the end has come:
	// a connection accepted while the cleanup runs (Go's transport goes on
	// dialling for a cancelled attempt) must not outlive it.
	track := func(c, b net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			open = append(open, c, b)
		}
		return !closed
	}
	t.Cleanup(func() {
		ln.Close()
		close(stop)
		mu.Lock()
		closed = true
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			if !track(c, b) {
				c.Close()
				b.Close()
				continue
			}
			frozen := p.conns.Add(1) == 1
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(b, c)
			}()
			go func() {
				defer wg.Done()
				if frozen {
					_, _ = io.CopyN(c, b, limit)
					<-stop
					return
				}
				_, _ = io.Copy(c, b)
			}()
		}
	}()
	return p
}

// Addr is the proxy's host:port.
func (p *FreezingProxy) Addr() string { return p.ln.Addr().String() }

// Conns is the number of connections the proxy has forwarded.
func (p *FreezingProxy) Conns() int { return int(p.conns.Load()) }

// frozenChunks is the length of the answer in CheckFrozenConnectionRescue:
// content chunks 10 ms apart, ~20 KB on the wire, several times what the
// frozen connection lets through.
const frozenChunks = 100

// CheckFrozenConnectionRescue checks, over HTTP/2 with TLS through the
// adapter's SDK, that a rescue on the same host escapes a connection that
// froze mid-answer when the SDK's client sends through sse.Lanes, and
// rides it when the client has one transport (an SDK's default). route
// builds the adapter's route as for CheckConnectionsReleased.
//
// Each call is Buffered on one route to fakellm, 100 chunks 10 ms apart,
// behind a FreezingProxy that freezes the first connection after 6,000
// bytes (the handshakes and the first chunks); after 300 ms of silence
// the stall trigger hedges to the same route.
//
//   - One transport: the hedge is sent on the frozen connection (the proxy
//     sees one connection), gets no chunk, and the call ends at its 3 s
//     deadline with nothing delivered. This proves the SDK's requests go
//     over HTTP/2 through the client it was given, and that the freeze
//     bites.
//   - sse.Lanes: the hedge takes a second connection and wins; the
//     caller reads all 100 chunks.
func (a Adapter[T]) CheckFrozenConnectionRescue(t *testing.T, route func(client *http.Client, profileURL, profile string) hedgeprobe.Route[T]) {
	t.Helper()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	long := *cfg.Profiles["steady"]
	long.TTFT = fakellm.Dist{Fixed: fakellm.Duration(10 * time.Millisecond)}
	long.Interval = fakellm.Dist{Fixed: fakellm.Duration(10 * time.Millisecond)}
	long.Chunks = frozenChunks
	cfg.Profiles["long"] = &long
	llm, err := fakellm.New(fakellm.Options{Config: cfg, Scale: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(llm)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// HedgeAfter far away: the stall trigger alone may launch the hedge.
	stallHedge := hedgeprobe.Config{Delivery: hedgeprobe.Buffered, StallAfter: 300 * time.Millisecond, HedgeAfter: 10 * time.Second, MaxAttempts: 2}

	// frozenCall is what one call of the check made.
	type frozenCall struct {
		stats   hedgeprobe.Stats
		content int // content chunks the caller read
		err     error
		proxy   *FreezingProxy
	}
	call := func(t *testing.T, rt transport, timeout time.Duration) frozenCall {
		t.Helper()
		defer rt.CloseIdleConnections()
		proxy := StartFreezingProxy(t, srv.Listener.Addr().String(), 6000)
		r := route(&http.Client{Transport: rt}, "https://"+proxy.Addr()+"/p/long", "long")
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		s := a.NewProber(t, stallHedge).Stream(ctx, r)
		defer s.Close()
		n := 0
		for s.Next() {
			if a.Items.Classify(s.Current()) == hedgeprobe.Content {
				n++
			}
		}
		return frozenCall{s.Stats(), n, s.Err(), proxy}
	}
	t.Run("one transport", func(t *testing.T) {
		c := call(t, TrustingTransport(srv), 3*time.Second)
		st, n, err := c.stats, c.content, c.err
		if len(st.Attempts) == 0 || st.Attempts[0].ContentChunks == 0 {
			t.Fatalf("attempts %+v: the primary got no chunk before the freeze, so no stall hedge followed it; a slow handshake?", st.Attempts)
		}
		if !errors.Is(err, context.DeadlineExceeded) || n != 0 {
			t.Fatalf("err %v, %d chunks delivered: want the call's deadline and none", err, n)
		}
		if len(st.Attempts) != 2 || st.Attempts[1].Trigger != hedgeprobe.TriggerStall || st.Attempts[1].ContentChunks != 0 {
			t.Fatalf("attempts %+v: want a stall hedge that got nothing", st.Attempts)
		}
		if got := c.proxy.Conns(); got != 1 {
			t.Fatalf("%d connections, want the hedge on the primary's", got)
		}
	})
	t.Run("lanes", func(t *testing.T) {
		c := call(t, &sse.Lanes{New: func() http.RoundTripper { return TrustingTransport(srv) }}, 20*time.Second)
		st, n, err := c.stats, c.content, c.err
		if err != nil || n != frozenChunks {
			t.Fatalf("err %v, %d chunks delivered: want the whole answer, %d chunks", err, n, frozenChunks)
		}
		if st.Winner != 1 || st.Attempts[1].Trigger != hedgeprobe.TriggerStall {
			t.Fatalf("winner %d, attempts %+v: want the stall hedge to win", st.Winner, st.Attempts)
		}
		if got := st.Attempts[0].ContentChunks; got == 0 || got >= frozenChunks {
			t.Fatalf("the primary got %d chunks: want its connection to freeze mid-answer", got)
		}
		if got := c.proxy.Conns(); got != 2 {
			t.Fatalf("%d connections, want one per lane", got)
		}
		t.Logf("the primary froze after %d chunks", st.Attempts[0].ContentChunks)
	})
}
