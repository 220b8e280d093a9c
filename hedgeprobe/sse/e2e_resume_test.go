package sse_test

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// resumeCall runs one call and returns the answer text the caller read.
func resumeCall[T any](t *testing.T, items hedgeprobe.Items[T], cfg hedgeprobe.Config, routes ...hedgeprobe.Route[T]) adaptertest.Resumed {
	p, err := hedgeprobe.New(cfg, items)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stream(t.Context(), routes...)
	defer s.Close()
	text := ""
	for s.Next() {
		chunk, _ := items.Text(s.Current())
		text += chunk
	}
	return adaptertest.Resumed{Stats: s.Stats(), Text: text, Err: s.Err()}
}

// TestE2EResumeOpenAI: the raw OpenAI route resumes a stalled stream on
// the next route that continues, once, twice, past a refusal, or leaves it
// to the watchdog; the caller reads fakellm's script byte for byte.
func TestE2EResumeOpenAI(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[sse.ChatChunk]
			for _, r := range tc.Routes {
				req := openAIRequest(t, up.ProfileURL(r.Profile))
				if r.Continues {
					req.Continue = sse.ContinueTrailingAssistant
				}
				routes = append(routes, sse.OpenAIRoute(r.Profile, req))
			}
			resumeCall(t, sse.OpenAIItems, tc.Config, routes...).Check(t, tc)
		})
	}
}

// TestE2EResumeSwitches: continue_final_message and "prefix": true reach
// the wire — fakellm's profiles that need them answer afresh without.
func TestE2EResumeSwitches(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range []struct {
		profile string
		how     sse.Continuation
	}{
		{"steady-final-message", sse.ContinueFinalMessage},
		{"steady-prefix", sse.ContinuePrefix},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			req := openAIRequest(t, up.ProfileURL(tc.profile))
			req.Continue = tc.how
			res := resumeCall(t, sse.OpenAIItems, adaptertest.ResumeConfig,
				sse.OpenAIRoute("stall", openAIRequest(t, up.ProfileURL("stall"))),
				sse.OpenAIRoute(tc.profile, req))
			res.Check(t, adaptertest.ResumeCase{Attempts: []adaptertest.WantAttempt{
				{Trigger: hedgeprobe.TriggerPrimary, Route: "stall", Outcome: hedgeprobe.AttemptCanceled},
				{Trigger: hedgeprobe.TriggerResume, Route: tc.profile, Outcome: hedgeprobe.AttemptWinner},
			}})
		})
	}
}

// TestE2EResumeAnthropic: the raw Anthropic route resumes with a prefill;
// the delivered text ends in a space, which the prefill loses and the
// continuation repeats, and the caller reads it once.
func TestE2EResumeAnthropic(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[sse.AnthropicEvent]
			for _, r := range tc.Routes {
				routes = append(routes, sse.AnthropicRoute(r.Profile, sse.AnthropicRequest{
					BaseURL:  up.ProfileURL(r.Profile),
					APIKey:   "test",
					Model:    "claude-fake",
					Messages: []sse.Message{{Role: "user", Content: "hi"}},
					Client:   client(t),
					Prefill:  r.Continues,
				}))
			}
			resumeCall(t, sse.AnthropicItems, tc.Config, routes...).Check(t, tc)
		})
	}
}

func openAIRequest(t *testing.T, base string) sse.OpenAIRequest {
	return sse.OpenAIRequest{
		BaseURL:  base + "/v1",
		APIKey:   "test",
		Model:    "fake-model",
		Messages: []sse.Message{{Role: "user", Content: "hi"}},
		Client:   client(t),
	}
}
