package sse

import (
	"net/http"
	"sync"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Lanes is an http.RoundTripper that keeps one transport — one connection
// pool — per hedgeprobe lane (Attempt.Lane, read from the request's
// context with hedgeprobe.LaneFromContext), so that two attempts of one
// call that run at once never share a connection.
//
// Over HTTP/2 a transport carries every request to a host on one
// connection. A hedge or resume to the same host as the attempt it
// rescues (a route hedged on itself, two models of one provider, a resume
// on another route of the same API) would then ride that attempt's
// connection, and when the connection is what went silent — a peer gone
// without a FIN, a middlebox that dropped its state — the rescue stalls
// with it until the HTTP/2 ping timeout closes it (docs/design.md §2,
// rule 1, has the measurement). Over HTTP/1.1 a running attempt holds its
// connection alone, and Lanes changes nothing but the idle pools.
//
// A request with no lane (not made in an attempt's context) takes lane
// 0. The zero value is ready to use, each lane a NewTransport with its
// defaults; DefaultClient sends through one. A Lanes must not be copied
// after first use.
type Lanes struct {
	// New makes a lane's transport, once per lane, when a request first
	// takes it; default NewTransport(TransportOptions{}). The transports
	// must not share connections: each call of New returns a new one.
	New func() http.RoundTripper

	mu    sync.Mutex
	lanes [hedgeprobe.MaxAttemptsLimit]http.RoundTripper
}

// RoundTrip sends req through the transport of its attempt's lane.
func (l *Lanes) RoundTrip(req *http.Request) (*http.Response, error) {
	lane, _ := hedgeprobe.LaneFromContext(req.Context())
	return l.lane(lane).RoundTrip(req)
}

func (l *Lanes) lane(i int) http.RoundTripper {
	if i < 0 || i >= len(l.lanes) {
		i = 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lanes[i] == nil {
		if l.New != nil {
			l.lanes[i] = l.New()
		} else {
			l.lanes[i] = NewTransport(TransportOptions{})
		}
	}
	return l.lanes[i]
}

// CloseIdleConnections closes the idle connections of every lane's
// transport that can (http.Client.CloseIdleConnections calls it).
func (l *Lanes) CloseIdleConnections() {
	l.mu.Lock()
	lanes := l.lanes
	l.mu.Unlock()
	for _, t := range lanes {
		if c, ok := t.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}
