package sse

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

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
			seen := make(chan http.Header, 1)
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Clone()
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer target.Close()
			to := strings.Replace(target.URL, "127.0.0.1", tc.host, 1)
			first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			defer first.Close()

			route := AnthropicRoute("a", AnthropicRequest{BaseURL: first.URL, APIKey: "ak-secret", Model: "m",
				Messages: []Message{{Role: "user", Content: "hi"}}})
			src, err := route.Open(t.Context(), hedgeprobe.Attempt{})
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
			h := <-seen
			if got := h.Get("X-Api-Key"); got != tc.want {
				t.Fatalf("the target saw x-api-key %q, want %q", got, tc.want)
			}
			if h.Get("Anthropic-Version") == "" {
				t.Fatal("the other headers went missing")
			}
		})
	}
}
