package sse

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrRedirect is matched (errors.Is) by the error of an attempt whose
// redirects a raw route will not follow: past the tenth, or to a scheme
// other than http and https. It comes in a *ProtocolError, which is fatal:
// the same request meets the same redirects at every attempt, and a
// transient error would have hedged onto it again and counted it against
// the route's health.
var ErrRedirect = errors.New("sse: redirect not followed")

// maxRedirects is Go's client's default limit.
const maxRedirects = 10

// guardRedirects returns a copy of client whose redirects to a scheme
// other than http and https, or past the tenth, fail with ErrRedirect —
// where the client's own CheckRedirect, which decides first, lets them.
func guardRedirects(client *http.Client) *http.Client {
	c := *client
	check := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if check != nil {
			if err := check(req, via); err != nil {
				return err // http.ErrUseLastResponse passes as it is
			}
		}
		if s := req.URL.Scheme; s != "http" && s != "https" {
			return fmt.Errorf("%w: to a %q URL", ErrRedirect, s)
		}
		if check != nil {
			return nil // the client's own policy decided the count
		}
		return tooMany(via)
	}
	return &c
}

// tooMany is Go's default redirect policy, with ErrRedirect.
func tooMany(via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: stopped after %d redirects", ErrRedirect, maxRedirects)
	}
	return nil
}

// apiKeyHeader carries Anthropic's API key.
const apiKeyHeader = "X-Api-Key"

// HeadersStayOnHost returns a copy of client (http.DefaultClient when nil)
// whose redirects to another host (not the same one or a subdomain of it)
// go without the headers names. Go's client drops Authorization on such a
// redirect, but it cannot know that a header of another name holds a
// secret: Anthropic's x-api-key, Azure OpenAI's api-key (the raw routes
// do this for every header they send; go-openai sends api-key itself:
// build its HTTPClient with this). The client's own CheckRedirect, or
// Go's default of at most 10 redirects, still decides whether to follow.
func HeadersStayOnHost(client *http.Client, names ...string) *http.Client {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	check := client.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// Once a hop left the first host the headers stay off, as Go keeps
		// Authorization off: the host in the middle may send the chain back
		// to any subdomain of the first.
		off := !sameSite(req.URL.Hostname(), via[0].URL.Hostname())
		for _, r := range via[1:] {
			off = off || !sameSite(r.URL.Hostname(), via[0].URL.Hostname())
		}
		if off {
			for _, name := range names {
				req.Header.Del(name)
			}
		}
		if check != nil {
			return check(req, via)
		}
		return tooMany(via)
	}
	return &c
}

// sameSite reports whether host is initial or a subdomain of it, where Go's
// client keeps Authorization on a redirect. An IPv6 literal or zone
// (a ':' or '%') is no subdomain of anything: "::1%.example.com" would
// otherwise end in ".example.com".
func sameSite(host, initial string) bool {
	host, initial = strings.ToLower(host), strings.ToLower(initial)
	if host == initial {
		return true
	}
	return !strings.ContainsAny(host, ":%") && strings.HasSuffix(host, "."+initial)
}
