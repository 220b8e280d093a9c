package sse

import (
	"net/http"
	"sync"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// Lanes is an http.RoundTripper that sends the i-th attempt of every
// hedged call through the i-th of its transports (the attempt's index,
// from the request's context: hedgeprobe.AttemptIndexFromContext), so
// that no two attempts of one call share a connection.
//
// Over HTTP/2 a transport carries every request to a host on one
// connection, and keeps it after a stream on it is reset. A hedge or
// resume to the same host as an attempt before it (a route hedged on
// itself, two models of one provider, a resume on another route of the
// same API) would then ride that attempt's connection — running, failed
// or cancelled — and when the connection is what went silent (a peer gone
// without a FIN, a middlebox that dropped its state), the rescue stalls
// with it until the HTTP/2 ping timeout closes it (docs/design.md §2,
// rule 1, has the measurement).
//
// Requests to http:// URLs, and requests of no attempt, all take the
// first transport: Go's transport speaks HTTP/1.1 there (unless its
// Protocols turn on unencrypted HTTP/2), where a running request has its
// connection to itself, and one pool of idle connections spares a hedge a
// dial. To an https upstream, the price of lanes is that a hedge or
// resume finds an idle connection only among those earlier attempts of
// its index left, so it dials (a TCP and TLS handshake on its critical
// path) more often than one shared pool would make it.
//
// The zero value is ready to use, each transport a NewTransport with its
// defaults; DefaultClient sends through one. A Lanes must not be copied
// after first use.
type Lanes struct {
	// New makes a lane's transport, when a request first needs it;
	// default NewTransport(TransportOptions{}). Each call must return a
	// transport of its own: lanes that share one share its connections.
	New func() http.RoundTripper

	mu    sync.Mutex
	lanes [hedgeprobe.MaxAttemptsLimit]http.RoundTripper
}

// RoundTrip sends req through the transport of its attempt's lane.
func (l *Lanes) RoundTrip(req *http.Request) (*http.Response, error) {
	lane := 0
	if req.URL != nil && req.URL.Scheme == "https" {
		// An index out of range cannot come from hedgeprobe, whose calls
		// make at most MaxAttemptsLimit attempts.
		if i, ok := hedgeprobe.AttemptIndexFromContext(req.Context()); ok && i >= 0 && i < len(l.lanes) {
			lane = i
		}
	}
	return l.lane(lane).RoundTrip(req)
}

func (l *Lanes) lane(i int) http.RoundTripper {
	l.mu.Lock()
	rt := l.lanes[i]
	l.mu.Unlock()
	if rt != nil {
		return rt
	}
	// Made outside the lock, so that a slow New holds up no other lane;
	// of two made at once for one lane, the first stored is kept and
	// the other, which has sent nothing, dropped.
	var made http.RoundTripper
	if l.New != nil {
		made = l.New()
	} else {
		made = NewTransport(TransportOptions{})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lanes[i] == nil {
		l.lanes[i] = made
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
		closeIdle(t)
	}
}

// closeIdle closes rt's idle connections when it can.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
