// Package fakellm is the scripted upstream behind cmd/fakellm: an
// OpenAI-compatible POST /v1/chat/completions and an Anthropic POST
// /v1/messages, streaming or not, whose timing and faults follow named
// profiles from a YAML file (built in: profiles.yaml here, DefaultProfiles): a TTFT
// distribution, the inter-chunk time, the chunk count, silences with or
// without keepalives, a mid-stream error payload, a disconnect without the
// terminal event, an HTTP status with Retry-After.
//
// It continues a partial answer as the servers that resume streams do
// (docs/design.md §2 rule 10): a request whose last message is the
// assistant's, holding a prefix of the profile's script, gets only the
// rest of the script, with the script's timing after that point; a
// profile can require the OpenAI-compatible switch (continue_final_message
// or "prefix": true), repeat the partial answer before the rest (as
// Mistral does), or refuse continuations with a status (400, as models
// without prefill do). See Continuation.
//
// A request picks its profile with the X-Fakellm-Profile header, or with a
// path prefix /p/NAME (a base URL of http://host/p/NAME/v1), else the
// file's default. Options.Scale multiplies every scripted duration, so a
// test runs a 30 s silence in 30 ms at 0.001; Options.Seed makes the random
// draws repeat.
//
// Tests start it in-process:
//
//	cfg, _ := fakellm.DefaultProfiles() // or LoadFile(path) for your own
//	srv, _ := fakellm.New(fakellm.Options{Config: cfg, Scale: 0.01})
//	ts := httptest.NewServer(srv)
//	defer ts.Close()
package fakellm
