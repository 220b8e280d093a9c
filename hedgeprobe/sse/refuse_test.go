package sse

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// A route whose http.Client has a Timeout cut every stream that outlived
// it, and the cut read as the upstream's broken connection: transient,
// hedged and resumed, and counted against a healthy route until it was
// ejected. Every attempt of such a route now fails at once, fatally, with
// ErrClientTimeout, and sends nothing; a client without one is used.
func TestClientTimeoutRefused(t *testing.T) {
	var requests atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer ts.Close()
	msgs := []Message{{Role: "user", Content: "hi"}}
	open := map[string]func(*http.Client) error{
		"openai": func(c *http.Client) error {
			return attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: ts.URL, Model: "m", Messages: msgs, Client: c}))
		},
		"anthropic": func(c *http.Client) error {
			return attemptErr(t, AnthropicRoute("a", AnthropicRequest{BaseURL: ts.URL, Model: "m", Messages: msgs, Client: c}))
		},
	}
	for name, open := range open {
		before := requests.Load()
		err := open(&http.Client{Timeout: time.Minute})
		if !errors.Is(err, ErrClientTimeout) || hedgeprobe.IsTransient(err) {
			t.Errorf("%s, Client.Timeout 1m: %v; want a fatal error matching ErrClientTimeout", name, err)
		}
		if n := requests.Load() - before; n != 0 {
			t.Errorf("%s, Client.Timeout 1m: %d requests sent, want none", name, n)
		}
		// Without a Timeout the request goes out (and meets the 401).
		var ue *UpstreamError
		if err := open(&http.Client{}); !errors.As(err, &ue) || errors.Is(err, ErrClientTimeout) {
			t.Errorf("%s, no Timeout: %v; want the upstream's 401", name, err)
		}
	}
}

// attemptErr is the error one attempt of route ends with, at its Open or
// in its stream.
func attemptErr[T any](t *testing.T, route hedgeprobe.Route[T]) error {
	src, err := route.Open(t.Context(), hedgeprobe.Attempt{})
	if err != nil {
		return err
	}
	defer src.Close()
	for src.Next() {
	}
	return src.Err()
}

// A BaseURL that cannot be posted to failed every attempt with the
// transport's "unsupported protocol scheme", a *ConnectionError: hedged as
// transient and counted against the route, while the call said nothing
// of the cause. Every attempt of such a route now fails at once, fatally,
// with ErrInvalidBaseURL.
func TestBaseURLRefused(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}}
	for _, base := range []string{"", "api.openai.com/v1", "localhost:8080/v1", "ftp://example.com", "http://", "://x", "/v1",
		"https://h/v1?api-version=1", "https://h/v1#x", "https://h/v1?"} {
		for name, route := range map[string]func() error{
			"openai": func() error {
				return attemptErr(t, OpenAIRoute("o", OpenAIRequest{BaseURL: base, Model: "m", Messages: msgs}))
			},
			"anthropic": func() error {
				return attemptErr(t, AnthropicRoute("a", AnthropicRequest{BaseURL: base, Model: "m", Messages: msgs}))
			},
		} {
			err := route()
			if !errors.Is(err, ErrInvalidBaseURL) || hedgeprobe.IsTransient(err) || !strings.Contains(err.Error(), fmt.Sprintf("%q", base)) {
				t.Errorf("%s, BaseURL %q: %v; want a fatal error matching ErrInvalidBaseURL that quotes the URL", name, base, err)
			}
		}
	}
	// API roots that are fine: ports, IPv6 literals, a trailing slash.
	for _, base := range []string{"https://api.openai.com/v1", "https://h:443/v1/", "http://[::1]:8080/v1", "http://127.0.0.1:8080"} {
		if err := refuseBaseURL("o", base, ""); err != nil {
			t.Errorf("BaseURL %q refused: %v", base, err)
		}
	}
	// Both refusals at once, when both apply.
	err := attemptErr(t, OpenAIRoute("o", OpenAIRequest{Model: "m", Messages: msgs, Client: &http.Client{Timeout: time.Second}}))
	if !errors.Is(err, ErrInvalidBaseURL) || !errors.Is(err, ErrClientTimeout) {
		t.Errorf("no BaseURL and a Timeout: %v; want both errors", err)
	}
}
