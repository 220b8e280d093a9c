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
// Requests of no attempt take the first transport. Every request of an
// attempt takes its lane, whatever its scheme and protocol: a lane cannot
// tell what a transport will speak (h2c, unencrypted HTTP/2, perhaps
// behind a wrapper). Over HTTP/1.1 a running request has its connection
// to itself, so there lanes guard nothing and only cost: a hedge or
// resume finds an idle connection only among those earlier attempts of
// its index left, so it may dial (a TCP and, to https, a TLS handshake on
// its critical path) where one shared pool had an idle connection. Where
// hedges come often, that is a few dials in hundreds of calls; where they
// come further apart than a pool keeps its idle connections (90 s), every
// hedge and resume dials. docs/design.md §2, rule 1, has the figures.
//
// The zero value is ready to use, each transport a NewTransport with its
// defaults; DefaultClient sends through one. A Lanes must not be copied
// after first use.
type Lanes struct {
	// New makes a lane's transport, once per lane, when a request first
	// needs it; default NewTransport(TransportOptions{}). Each call must
	// return a transport of its own: lanes that share one share its
	// connections. Calls for different lanes may run at once.
	New func() http.RoundTripper

	lanes [hedgeprobe.MaxAttemptsLimit]lane
}

// lane is one of a Lanes' transports, made when first needed.
type lane struct {
	mu sync.Mutex
	rt http.RoundTripper
}

// RoundTrip sends req through the transport of its attempt's lane.
func (l *Lanes) RoundTrip(req *http.Request) (*http.Response, error) {
	// An index out of range cannot come from hedgeprobe, whose calls make
	// at most MaxAttemptsLimit attempts.
	i, ok := hedgeprobe.AttemptIndexFromContext(req.Context())
	if !ok || i < 0 || i >= len(l.lanes) {
		i = 0
	}
	return l.lane(i).RoundTrip(req)
}

// lane returns lane i's transport, made under that lane's lock alone: a
// slow New holds up the requests of its own lane, not the others'.
func (l *Lanes) lane(i int) http.RoundTripper {
	ln := &l.lanes[i]
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.rt == nil {
		if l.New != nil {
			ln.rt = l.New()
		} else {
			ln.rt = NewTransport(TransportOptions{})
		}
	}
	return ln.rt
}

// CloseIdleConnections closes the idle connections of every lane's
// transport that can (http.Client.CloseIdleConnections calls it).
func (l *Lanes) CloseIdleConnections() {
	for i := range l.lanes {
		ln := &l.lanes[i]
		ln.mu.Lock()
		rt := ln.rt
		ln.mu.Unlock()
		closeIdle(rt)
	}
}

// closeIdle closes rt's idle connections when it can.
func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
