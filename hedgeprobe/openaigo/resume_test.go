package openaigo_test

import (
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// resumeCall runs one call over routes with openai-go's usual loop and
// returns what the caller read.
func resumeCall(t *testing.T, cfg hedgeprobe.Config, routes ...hedgeprobe.Route[openaigo.Chunk]) adaptertest.Resumed {
	stream := adapter.NewProber(t, cfg).Stream(t.Context(), routes...)
	defer stream.Close()
	text := ""
	for stream.Next() {
		chunk := stream.Current()
		if len(chunk.Choices) > 0 {
			text += chunk.Choices[0].Delta.Content
		}
	}
	return adaptertest.Resumed{Stats: stream.Stats(), Text: text, Err: stream.Err()}
}

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message), once, twice, past a
// route that refuses; the caller reads the script byte for byte.
func TestResume(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[openaigo.Chunk]
			for _, r := range tc.Routes {
				o := openaigo.RouteOptions{}
				if r.Continues {
					o.Continue = sse.ContinueTrailingAssistant
				}
				routes = append(routes, openaigo.Route(r.Profile, newClient(t, up, r.Profile, false), params, o))
			}
			resumeCall(t, tc.Config, routes...).Check(t, tc)
		})
	}
}

// TestResumeSwitches: the servers' switches reach the wire — fakellm's
// steady-final-message and steady-prefix profiles continue only with
// theirs, and answer afresh (the whole script again) without it.
func TestResumeSwitches(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range []struct {
		profile string
		how     sse.Continuation
	}{
		{"steady-final-message", sse.ContinueFinalMessage},
		{"steady-prefix", sse.ContinuePrefix},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			res := resumeCall(t, adaptertest.ResumeConfig,
				openaigo.Route("stall", newClient(t, up, "stall", false), params, openaigo.RouteOptions{}),
				openaigo.Route(tc.profile, newClient(t, up, tc.profile, false), params, openaigo.RouteOptions{Continue: tc.how}))
			res.Check(t, adaptertest.ResumeCase{Attempts: []adaptertest.WantAttempt{
				{Trigger: hedgeprobe.TriggerPrimary, Route: "stall", Outcome: hedgeprobe.AttemptCanceled},
				{Trigger: hedgeprobe.TriggerResume, Route: tc.profile, Outcome: hedgeprobe.AttemptWinner},
			}})
		})
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, openaigo.Items.Text)
}
