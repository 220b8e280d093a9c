package goopenai_test

import (
	"errors"
	"io"
	"testing"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"
	"github.com/streamwatch/streamwatch/hedgeprobe/internal/adaptertest"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
)

// resumeCall runs one call over routes with go-openai's Recv loop and
// returns what the caller read.
func resumeCall(t *testing.T, cfg hedgeprobe.Config, routes ...hedgeprobe.Route[goopenai.Chunk]) adaptertest.Resumed {
	hs := adapter.NewProber(t, cfg).Stream(t.Context(), routes...)
	stream := goopenai.NewReceiver(hs)
	defer stream.Close()
	text := ""
	var err error
	for {
		var resp goopenai.Chunk
		resp, err = stream.Recv()
		if err != nil {
			break
		}
		if len(resp.Choices) > 0 {
			text += resp.Choices[0].Delta.Content
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return adaptertest.Resumed{Stats: hs.Stats(), Text: text, Err: err}
}

// TestResume: a stream that falls silent after commit is continued on the
// next route that can (a trailing assistant message, the one way go-openai
// can send), once, twice, past a route that refuses; the caller reads the
// script byte for byte.
func TestResume(t *testing.T) {
	up := adaptertest.Start(t)
	for _, tc := range adaptertest.ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[goopenai.Chunk]
			for _, r := range tc.Routes {
				o := goopenai.RouteOptions{}
				if r.Continues {
					o.Continue = sse.ContinueTrailingAssistant
				}
				routes = append(routes, goopenai.Route(r.Profile, newClient(t, up, r.Profile, false), req, o))
			}
			resumeCall(t, tc.Config, routes...).Check(t, tc)
		})
	}
}

// TestContinuationUnsupported: a switch go-openai cannot send fails every
// attempt with ErrContinuation, fatally, instead of resuming into an
// answer that starts afresh.
func TestContinuationUnsupported(t *testing.T) {
	up := adaptertest.Start(t)
	for _, how := range []sse.Continuation{sse.ContinueFinalMessage, sse.ContinuePrefix} {
		r := goopenai.Route("steady", newClient(t, up, "steady", false), req, goopenai.RouteOptions{Continue: how})
		res := resumeCall(t, adaptertest.ResumeConfig, r)
		if !errors.Is(res.Err, goopenai.ErrContinuation) || hedgeprobe.IsTransient(res.Err) || len(res.Stats.Attempts) != 1 {
			t.Fatalf("continuation %d: err %v, %d attempts", how, res.Err, len(res.Stats.Attempts))
		}
	}
}

// TestItemsText: content and refusal are answer text; reasoning is
// content but not text; a tool-call or function-call fragment cannot be
// continued.
func TestItemsText(t *testing.T) {
	adaptertest.CheckChatText(t, goopenai.Items.Text)
}
