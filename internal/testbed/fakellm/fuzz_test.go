package fakellm

import (
	"encoding/json"
	"net/http"
	"testing"
	"testing/synctest"
)

// FuzzParse: any profiles file either parses into a configuration a
// server starts on, or is refused with an error; it never panics.
func FuzzParse(f *testing.F) {
	// Small seeds: the fuzzer minimizes every new input it keeps, and on
	// the 4 KB built-in file that takes most of a short run. The built-in
	// profiles are tested in TestDefaultProfiles.
	f.Add([]byte("default: a\nprofiles:\n  a: {ttft: 1ms, interval: 1ms, chunks: 1}\n"))
	f.Add([]byte("profiles:\n  a: {chunks: -1}\n"))
	f.Add([]byte("default: s\nprofiles:\n  s:\n    ttft: 300ms\n    chunks: 7\n    silences:\n      - {after_chunk: 5, duration: 3s, keepalive: {every: 1s, style: ping}}\n    continuation: {mode: prefix, status: 400}\n    disconnect: {after_chunk: 6, clean: true}\n"))
	f.Add([]byte("default: a\nprofiles:\n  a: {ttft: {lognormal: {median: 1s, sigma: 0.5}}, chunks: 3, error: {after_chunk: 4}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if _, err := New(Options{Config: cfg, Scale: 1}); err != nil {
			t.Fatalf("parsed, but a server does not start on it: %v", err)
		}
	})
}

// FuzzServe: any request body, on either endpoint and any built-in
// profile, is answered — a stream, a whole answer, the profile's scripted
// failure, or a 4xx whose JSON body says what is wrong — and never panics
// (a scripted disconnect aborts the handler on purpose; serve records it).
// The script's waits run in virtual time.
func FuzzServe(f *testing.F) {
	cfg, err := DefaultProfiles()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(false, "steady", []byte(`{"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`))
	f.Add(true, "steady", []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"lorem ip"}]}`))
	f.Add(false, "steady-final-message", []byte(`{"stream":true,"continue_final_message":true,"add_generation_prompt":false,"messages":[{"role":"assistant","content":[{"type":"text","text":"lorem "}]}]}`))
	f.Add(false, "no-prefill", []byte(`{"messages":[{"role":"assistant","content":"x"}]}`))
	f.Add(true, "error-mid", []byte(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	f.Add(false, "nope", []byte(`{`))
	f.Add(false, "stall", []byte(`[]`))
	f.Fuzz(func(t *testing.T, anthropic bool, profile string, body []byte) {
		path := "/v1/chat/completions"
		var d dialect = openaiDialect{}
		if anthropic {
			path, d = "/v1/messages", anthropicDialect{}
		}
		synctest.Test(t, func(t *testing.T) {
			s, err := New(Options{Config: cfg, Scale: 1})
			if err != nil {
				t.Fatal(err)
			}
			w := serve(t, s, path, profile, string(body))
			status := w.status
			if status == 0 {
				status = http.StatusOK // written without WriteHeader
			}
			if status < 400 {
				return
			}
			p, known := cfg.Profiles[profile]
			if profile == "" {
				p, known = cfg.Profiles[cfg.Default], true
			}
			if known && scripted(d, p, status) {
				return
			}
			if status >= 500 {
				t.Fatalf("status %d on profile %q: a request cannot cause a server error", status, profile)
			}
			if !json.Valid(w.buf.Bytes()) || len(w.buf.Bytes()) == 0 {
				t.Fatalf("status %d with a body that is not JSON: %q", status, w.buf.String())
			}
		})
	})
}

// scripted reports whether p answers some request with status by design:
// its Status, its refusal of a continuation, or its mid-stream error, which
// a request for a whole (not streamed) answer gets as a status. Any other
// 5xx is fakellm failing on the request.
func scripted(d dialect, p *Profile, status int) bool {
	if status == p.Status || (p.Continuation.Status != 0 && status == p.Continuation.Status) {
		return true
	}
	if p.Error == nil {
		return false
	}
	typ := p.Error.Type
	if typ == "" {
		typ = d.midErrorType()
	}
	return status == d.errorStatus(typ)
}
