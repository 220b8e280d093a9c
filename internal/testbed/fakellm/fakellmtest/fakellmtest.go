// Package fakellmtest starts fakellm in-process for tests elsewhere in the
// module: a loopback httptest server with the built-in profiles.
package fakellmtest

import (
	"net/http/httptest"
	"testing"

	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

// Start serves the built-in profiles at the given time scale on
// 127.0.0.1 and closes the server when the test ends. Its URL is the
// server root: OpenAI clients take URL+"/v1", Anthropic clients URL; a
// profile is picked per request with the X-Fakellm-Profile header or per
// client with URL+"/p/NAME".
func Start(t testing.TB, scale float64) *httptest.Server {
	t.Helper()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	return StartConfig(t, cfg, scale)
}

// StartConfig is Start with profiles of the test's own, such as the
// built-in ones with some durations changed.
func StartConfig(t testing.TB, cfg *fakellm.Config, scale float64) *httptest.Server {
	t.Helper()
	srv, err := fakellm.New(fakellm.Options{Config: cfg, Scale: scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}
