package sse

import (
	"net"
	"net/http"
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
		SendPingTimeout: o.KeepAliveIdle,
		PingTimeout:     o.KeepAliveInterval,
	}
	return t
}

var defaultClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: NewTransport(TransportOptions{})}
})

// DefaultClient is the shared client of the route helpers: NewTransport
// with its defaults and no Timeout.
func DefaultClient() *http.Client { return defaultClient() }
