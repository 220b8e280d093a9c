// Package fakellmtest starts fakellm in-process for tests elsewhere in the
// module: a loopback httptest server with the testdata profiles.
package fakellmtest

import (
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

// ProfilesFile is the path of testdata/fakellm/profiles.yaml.
func ProfilesFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "testdata", "fakellm", "profiles.yaml")
}

// Start serves the testdata profiles at the given time scale on
// 127.0.0.1 and closes the server when the test ends. Its URL is the
// server root: OpenAI clients take URL+"/v1", Anthropic clients URL; a
// profile is picked per request with the X-Fakellm-Profile header or per
// client with URL+"/p/NAME".
func Start(t testing.TB, scale float64) *httptest.Server {
	t.Helper()
	cfg, err := fakellm.LoadFile(ProfilesFile())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakellm.New(fakellm.Options{Config: cfg, Scale: scale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}
