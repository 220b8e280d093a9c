package sse

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// redirected opens route once against a server that redirects every
// request (307) to a target on host (another name for the same loopback
// server, or the same), and returns the headers the target saw; the
// target answers 401, which the open must report.
func redirected[T any](t *testing.T, host string, route func(base string) hedgeprobe.Route[T]) http.Header {
	t.Helper()
	seen := make(chan http.Header, 1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer target.Close()
	to := strings.Replace(target.URL, "127.0.0.1", host, 1)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	src, err := route(first.URL).Open(t.Context(), hedgeprobe.Attempt{})
	if err == nil {
		for src.Next() {
		}
		err = src.Err()
		src.Close()
	}
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.StatusCode != http.StatusUnauthorized {
		t.Fatalf("err %v, want the target's 401", err)
	}
	return <-seen
}

// Regression (outside review): the Anthropic routes' x-api-key went along
// a redirect to another host, where Go's client drops the OpenAI routes'
// Authorization. It now stays on the host it was meant for (and its
// subdomains), as Authorization does.
func TestAPIKeyNotSentToAnotherHost(t *testing.T) {
	for name, tc := range map[string]struct {
		host string // the redirect's host, for the same loopback server
		want string // the key the target sees
	}{
		"another host":  {"localhost", ""},
		"the same host": {"127.0.0.1", "ak-secret"},
	} {
		t.Run(name, func(t *testing.T) {
			h := redirected(t, tc.host, func(base string) hedgeprobe.Route[AnthropicEvent] {
				return AnthropicRoute("a", AnthropicRequest{BaseURL: base, APIKey: "ak-secret", Model: "m",
					Messages: []Message{{Role: "user", Content: "hi"}}})
			})
			if got := h.Get("X-Api-Key"); got != tc.want {
				t.Fatalf("the target saw x-api-key %q, want %q", got, tc.want)
			}
			// The route's other headers go where its key goes.
			if got := h.Get("Anthropic-Version") != ""; got != (tc.want != "") {
				t.Fatalf("the target saw anthropic-version: %v", got)
			}
		})
	}
}

// Regression (outside review): an OpenAI route's own headers — Azure's
// api-key, a gateway's token — went along a redirect to another host;
// only Authorization, which Go drops itself, stayed behind.
func TestRouteHeadersNotSentToAnotherHost(t *testing.T) {
	for name, tc := range map[string]struct {
		host string
		want string
	}{
		"another host":  {"localhost", ""},
		"the same host": {"127.0.0.1", "azure-secret"},
	} {
		t.Run(name, func(t *testing.T) {
			h := redirected(t, tc.host, func(base string) hedgeprobe.Route[ChatChunk] {
				return OpenAIRoute("a", OpenAIRequest{BaseURL: base, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}},
					Header: http.Header{"Api-Key": {"azure-secret"}, "X-Gateway-Token": {"azure-secret"}}})
			})
			for _, name := range []string{"Api-Key", "X-Gateway-Token"} {
				if got := h.Get(name); got != tc.want {
					t.Errorf("the target saw %s %q, want %q", name, got, tc.want)
				}
			}
		})
	}
}

// TestAPIKeyStaysOffAfterAnotherHost: a chain that leaves the first host
// and comes back to it does not bring the key back (the host in the middle
// could send it anywhere under the first), as Go keeps Authorization off.
func TestAPIKeyStaysOffAfterAnotherHost(t *testing.T) {
	seen := make(chan http.Header, 1)
	last := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer last.Close()
	middle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, last.URL+r.URL.Path, http.StatusTemporaryRedirect) // back to 127.0.0.1
	}))
	defer middle.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(middle.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	client := HeadersStayOnHost(&http.Client{}, "X-Api-Key")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, first.URL+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", "ak-secret")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-seen; h.Get("X-Api-Key") != "" {
		t.Fatalf("the key came back on the third hop: %q", h.Get("X-Api-Key"))
	}
}

// TestSameSite: a host is the first one, or a subdomain of it; an IPv6
// zone that ends like a subdomain is not (Go's own rule).
func TestSameSite(t *testing.T) {
	for _, tc := range []struct {
		host, initial string
		want          bool
	}{
		{"api.anthropic.com", "api.anthropic.com", true},
		{"EU.api.anthropic.com", "api.anthropic.com", true},
		{"evilapi.anthropic.com", "api.anthropic.com", false},
		{"anthropic.com", "api.anthropic.com", false},
		{"::1%.api.anthropic.com", "api.anthropic.com", false},
		{"::1", "::1", true},
	} {
		if got := sameSite(tc.host, tc.initial); got != tc.want {
			t.Errorf("sameSite(%q, %q) = %v", tc.host, tc.initial, got)
		}
	}
}

// Regression (outside review): a redirect loop, or a redirect to a scheme
// the client cannot fetch, failed as a *ConnectionError — transient, so the
// call hedged onto the same redirects and counted them against the route's
// health. Both are fatal *ProtocolErrors matching ErrRedirect now, on routes
// with headers of their own (HeadersStayOnHost's policy) and without.
func TestRedirectNotFollowedIsFatal(t *testing.T) {
	var loop *httptest.Server
	loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer loop.Close()
	ftp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://127.0.0.1/x", http.StatusTemporaryRedirect)
	}))
	defer ftp.Close()
	msgs := []Message{{Role: "user", Content: "hi"}}
	for _, base := range []string{loop.URL, ftp.URL} {
		for name, err := range map[string]error{
			"openai":             attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: base, Model: "m", Messages: msgs})),
			"openai, a header":   attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: base, Model: "m", Messages: msgs, Header: http.Header{"Api-Key": {"k"}}})),
			"anthropic":          attemptErr(t, AnthropicRoute("a", AnthropicRequest{BaseURL: base, Model: "m", Messages: msgs})),
			"openai, own client": attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: base, Model: "m", Messages: msgs, Client: &http.Client{}})),
		} {
			var pe *ProtocolError
			if !errors.Is(err, ErrRedirect) || !errors.As(err, &pe) || hedgeprobe.IsTransient(err) {
				t.Errorf("%s, %s: %v; want a fatal *ProtocolError matching ErrRedirect", name, base, err)
			}
		}
	}
}

// The client's own CheckRedirect decides first (a review: the scheme was
// checked before it): with http.ErrUseLastResponse the redirect itself is
// the answer, to ftp:// as to http://.
func TestRedirectOwnPolicyFirst(t *testing.T) {
	ftp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://127.0.0.1/x", http.StatusTemporaryRedirect)
	}))
	defer ftp.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	err := attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: ftp.URL, Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, Client: client}))
	var ue *UpstreamError
	if !errors.As(err, &ue) || ue.StatusCode != http.StatusTemporaryRedirect || errors.Is(err, ErrRedirect) {
		t.Fatalf("%T %v; want the 307 as the upstream's answer", err, err)
	}
}
