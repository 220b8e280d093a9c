package sse

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// The route settings every attempt would fail on are refused at the
// attempt's Open with a fatal error that says what is wrong: sent, the
// request would fail in a way that reads as the upstream's (a transient
// failure, hedged, resumed and counted against a healthy route until it
// is ejected), and the call would say nothing of the cause. Fatal as a
// 401 is (docs/design.md §2 rule 2), it ends the call from whichever
// attempt meets it, a hedge's too: a misconfigured backup route shows on
// the first call that hedges to it, not never.

// ErrClientTimeout is matched (errors.Is) by the error every attempt of a
// route fails with when its Client has a Timeout. net/http's Timeout
// bounds the whole exchange, body included, so it would cut every stream
// that lasts longer, and the cut would read as the upstream's broken
// connection: a transient failure, hedged, resumed and counted against a
// healthy route until it is ejected. The call's length is bounded by
// hedgeprobe's watchdogs (StallTimeout, TTFTTimeout) and the caller's
// context instead.
var ErrClientTimeout = errors.New("sse: the route's http.Client has a Timeout")

// refuseTimeout is the error of a route whose client has a Timeout: a
// fatal one, so the first call says what is wrong, where a cut stream
// would pass for the upstream's failure. nil for a client without one.
func refuseTimeout(route string, client *http.Client) error {
	if client.Timeout <= 0 {
		return nil
	}
	return fmt.Errorf("%w (%v, route %s): it cuts every stream that outlives it; set it to 0 and bound the call with the context or hedgeprobe's watchdogs",
		ErrClientTimeout, client.Timeout, route)
}

// ErrInvalidBaseURL is matched (errors.Is) by the error every attempt of a
// route fails with when its BaseURL is not an absolute http or https URL
// without a query (empty, say, or without its scheme): its request could
// not be sent, or would go to the wrong path, and
// the transport's error ("unsupported protocol scheme") would pass for a
// broken connection.
var ErrInvalidBaseURL = errors.New("sse: the route's BaseURL is not an absolute http(s) URL")

// refuseBaseURL is the error of a route whose BaseURL cannot be posted
// to; example is the API root the request type expects. nil for a URL
// with an http(s) scheme and a host, and no query or fragment (the route
// appends its path to the whole string).
func refuseBaseURL(route, baseURL, example string) error {
	u, err := url.Parse(baseURL)
	// A query or fragment would end up before the path the route appends.
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery {
		return nil
	}
	return fmt.Errorf("%w: %q (route %s): want the API root, such as %q, without a query", ErrInvalidBaseURL, baseURL, route, example)
}
