package sse

import (
	"errors"
	"net/http"
	"strings"
)

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
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
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
