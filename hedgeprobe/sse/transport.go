package sse

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// TransportOptions configures NewTransport. Zero fields take the defaults.
type TransportOptions struct {
	// KeepAliveIdle is the idle time before the first TCP keepalive probe;
	// default 15 s.
	KeepAliveIdle time.Duration
	// KeepAliveInterval is the time between probes; default 15 s.
	KeepAliveInterval time.Duration
	// KeepAliveCount is the number of unanswered probes before the
	// connection is dropped; default 4.
	KeepAliveCount int
	// UserTimeout is TCP_USER_TIMEOUT on Linux: how long sent data may stay
	// unacknowledged (keepalive probes included) before the kernel drops
	// the connection; default 75 s; negative leaves the system default. It
	// is ignored on other systems.
	UserTimeout time.Duration
	// DialTimeout bounds connection set-up; default 10 s.
	DialTimeout time.Duration
	// HTTP2PingAfter is how long an HTTP/2 connection may go without a
	// frame before a ping checks it; default KeepAliveIdle.
	// HTTP2PingTimeout is how long the ping's answer may take before the
	// connection is closed, failing every request on it; default
	// KeepAliveInterval. Their sum is how long a connection that froze
	// keeps taking new requests — other calls' attempts, which their own
	// hedges must then rescue (30 s at the defaults). Lower, a frozen
	// connection goes sooner, and a silent one (an upstream thinking, a
	// pooled connection waiting) is pinged that much more often; some
	// servers close a connection that pings often. Zero or negative
	// takes the default: the pings cannot be turned off.
	HTTP2PingAfter, HTTP2PingTimeout time.Duration
}

// NewTransport returns an *http.Transport for long streams: a clone of
// http.DefaultTransport whose connections use TCP keepalive and, on Linux,
// TCP_USER_TIMEOUT, so that a peer that died without a FIN or RST is
// noticed even when no byte will ever arrive again, and whose HTTP/2
// connections send pings when idle for the same reason; and which keeps up
// to 64 idle connections per host, not Go's 2, for a call's concurrent
// attempts. It sets no response or body timeout: the hedgeprobe watchdogs
// own those.
func NewTransport(o TransportOptions) *http.Transport {
	if o.KeepAliveIdle <= 0 {
		o.KeepAliveIdle = 15 * time.Second
	}
	if o.KeepAliveInterval <= 0 {
		o.KeepAliveInterval = 15 * time.Second
	}
	if o.KeepAliveCount <= 0 {
		o.KeepAliveCount = 4
	}
	if o.UserTimeout == 0 {
		o.UserTimeout = 75 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.HTTP2PingAfter <= 0 {
		o.HTTP2PingAfter = o.KeepAliveIdle
	}
	if o.HTTP2PingTimeout <= 0 {
		o.HTTP2PingTimeout = o.KeepAliveInterval
	}
	d := &net.Dialer{
		Timeout: o.DialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     o.KeepAliveIdle,
			Interval: o.KeepAliveInterval,
			Count:    o.KeepAliveCount,
		},
	}
	if o.UserTimeout > 0 {
		d.Control = userTimeoutControl(o.UserTimeout)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = d.DialContext
	// Go keeps 2 idle connections per host by default: a call's hedges and
	// resumes, and concurrent calls, to one HTTP/1.1 upstream would dial
	// again on the hedge's critical path.
	t.MaxIdleConnsPerHost = 64
	t.HTTP2 = &http.HTTP2Config{
		SendPingTimeout: o.HTTP2PingAfter,
		PingTimeout:     o.HTTP2PingTimeout,
	}
	return t
}

var defaultClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &Lanes{}}
})

// DefaultClient is the shared client of the route helpers: a NewTransport
// with its defaults per hedgeprobe lane (Lanes), and no Timeout.
func DefaultClient() *http.Client { return defaultClient() }

// keepOnHost returns the client a route sends with (DefaultClient when
// nil), built once per route: every header the route was given stays on
// the upstream's host (Go's client drops only Authorization) — Anthropic's
// x-api-key, Azure's api-key, a gateway's token go to no host a redirect
// names. A request sent to another host without its key fails, as one
// without its Authorization already does. A redirect it will not follow
// fails with ErrRedirect (guardRedirects).
func keepOnHost(client *http.Client, header http.Header) *http.Client {
	if client == nil {
		client = DefaultClient()
	}
	if len(header) > 0 {
		client = HeadersStayOnHost(client, slices.Collect(maps.Keys(header))...)
	}
	return guardRedirects(client)
}

// post sends one streaming request under a context of its own, derived from
// the attempt's, whose cancel the Stream's Close calls.
func post(ctx context.Context, client *http.Client, provider, url string, header http.Header, buf []byte) (*http.Response, context.CancelFunc, error) {
	if client == nil {
		client = DefaultClient()
	}
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		if cerr := parent.Err(); cerr != nil {
			// The attempt's context, not the network, ended it.
			return nil, nil, cerr
		}
		if errors.Is(err, ErrRedirect) {
			return nil, nil, &ProtocolError{Provider: provider, Err: err}
		}
		return nil, nil, &ConnectionError{Provider: provider, Err: err}
	}
	return resp, cancel, nil
}
