package adaptertest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamwatch/streamwatch/hedgeprobe"
	"github.com/streamwatch/streamwatch/hedgeprobe/sse"
	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

// Resume scenarios (docs/design.md §2 rule 10): a committed stream falls
// silent and is continued on another route from the text delivered. At
// Scale the "stall" profile's silence after chunk 5 lasts 3 s (Start);
// "stall-twice" continued from chunk 5 falls silent again after chunk 10;
// "stall-before-end" falls silent after its last chunk, so a continuation
// has no content, only its opening and closing events; "no-prefill"
// refuses every continuation with a 400. Every check is on
// the caller's text and on Stream.Stats (triggers and outcomes), never on
// wall-clock durations. The margins are wide on purpose: a resume has at
// least 400 ms to deliver its first chunk, or a refusal to come, before
// another resume is due, and seconds before the stalled stream's recovery,
// so a loaded machine does not change the attempts.

// ScriptText is the text of every 40-chunk fakellm profile: what the
// caller must read, byte for byte, however many times the stream was
// resumed.
var ScriptText = fakellm.Script(40)

// ResumeConfig resumes a committed stream after 80 ms of silence, once
// (MaxAttempts 2: a slow continuation is not resumed in turn); the TTFT
// trigger is pushed out of the way.
var ResumeConfig = hedgeprobe.Config{
	ResumeAfter: 80 * time.Millisecond,
	HedgeAfter:  10 * time.Second,
	MaxAttempts: 2,
}

// RouteSpec is one route of a resume scenario: the fakellm profile it
// opens, which also names it, and whether it is built to continue (each
// adapter in its own way: a Continuation, Prefill).
type RouteSpec struct {
	Profile   string
	Continues bool
}

// WantAttempt is the trigger, route and outcome one attempt must have.
type WantAttempt struct {
	Trigger hedgeprobe.Trigger
	Route   string
	Outcome hedgeprobe.AttemptOutcome
}

// ResumeCase is a resume scenario.
type ResumeCase struct {
	// Name names the subtest.
	Name string
	// Routes are the call's routes, in order.
	Routes []RouteSpec
	// Config is the Prober's.
	Config hedgeprobe.Config
	// Attempts are the attempts the call must have made, in order.
	Attempts []WantAttempt
	// Timeout, when set, is the call's end: a stall timeout after the
	// first 5 chunks, the caller's text those chunks.
	Timeout bool
}

// ResumeCases are the scenarios every adapter runs.
var ResumeCases = []ResumeCase{
	{
		Name:   "stall resumed on the next route",
		Routes: []RouteSpec{{"stall", true}, {"steady", true}},
		Config: ResumeConfig,
		Attempts: []WantAttempt{
			{hedgeprobe.TriggerPrimary, "stall", hedgeprobe.AttemptCanceled},
			{hedgeprobe.TriggerResume, "steady", hedgeprobe.AttemptWinner},
		},
	},
	{
		// The continuation ends without content: the caller reads its
		// closing events (finish reason, usage), not a second opening —
		// anthropic-sdk-go's Message.Accumulate would start the message
		// afresh at a second message_start, and the read loops check that
		// the accumulated message holds the text read.
		Name:   "a stall before the end is closed by a continuation without content",
		Routes: []RouteSpec{{"stall-before-end", true}, {"steady", true}},
		Config: ResumeConfig,
		Attempts: []WantAttempt{
			{hedgeprobe.TriggerPrimary, "stall-before-end", hedgeprobe.AttemptCanceled},
			{hedgeprobe.TriggerResume, "steady", hedgeprobe.AttemptWinner},
		},
	},
	{
		// Resumes at 500 ms of silence: the first continuation has 500 ms
		// to start before a second would be due, and the second starts
		// 500 ms into its predecessor's 3 s silence.
		Name:   "a continuation that stalls too is resumed again",
		Routes: []RouteSpec{{"stall", true}, {"stall-twice", true}, {"steady", true}},
		Config: hedgeprobe.Config{ResumeAfter: 500 * time.Millisecond, HedgeAfter: 10 * time.Second, MaxAttempts: 3},
		Attempts: []WantAttempt{
			{hedgeprobe.TriggerPrimary, "stall", hedgeprobe.AttemptCanceled},
			{hedgeprobe.TriggerResume, "stall-twice", hedgeprobe.AttemptCanceled},
			{hedgeprobe.TriggerResume, "steady", hedgeprobe.AttemptWinner},
		},
	},
	{
		// The refusal must come within 400 ms, before the next resume is
		// due (at 800 ms), 2.2 s before the stalled stream recovers.
		Name:   "a refused continuation falls back to the next resumable route",
		Routes: []RouteSpec{{"stall", true}, {"no-prefill", true}, {"steady", true}},
		Config: hedgeprobe.Config{ResumeAfter: 400 * time.Millisecond, HedgeAfter: 10 * time.Second, MaxAttempts: 3},
		Attempts: []WantAttempt{
			{hedgeprobe.TriggerPrimary, "stall", hedgeprobe.AttemptCanceled},
			{hedgeprobe.TriggerResume, "no-prefill", hedgeprobe.AttemptFailed},
			{hedgeprobe.TriggerResume, "steady", hedgeprobe.AttemptWinner},
		},
	},
	{
		// The stalled route cannot continue and the only one that can
		// refuses: nothing rescues the call but the watchdog, 1 s into
		// the 3 s silence. The refusal must come within 400 ms: a resume
		// due at 800 ms would otherwise ask the refusing route again.
		Name:   "a refused continuation falls back to the watchdog",
		Routes: []RouteSpec{{"stall", false}, {"no-prefill", true}},
		Config: hedgeprobe.Config{
			ResumeAfter:  400 * time.Millisecond,
			StallTimeout: time.Second,
			HedgeAfter:   10 * time.Second,
			MaxAttempts:  3,
		},
		Attempts: []WantAttempt{
			{hedgeprobe.TriggerPrimary, "stall", hedgeprobe.AttemptFailed},
			{hedgeprobe.TriggerResume, "no-prefill", hedgeprobe.AttemptFailed},
		},
		Timeout: true,
	},
}

// Continuation is the way an OpenAI-compatible route of r continues: a
// trailing assistant message when r.Continues, none otherwise.
func (r RouteSpec) Continuation() sse.Continuation {
	if r.Continues {
		return sse.ContinueTrailingAssistant
	}
	return sse.ContinueNone
}

// ReadFunc is the caller's loop over a call's stream, the SDK's usual one
// in each adapter's test: it reads the stream to its end and returns the
// answer text read and the error the loop ended with. t is the test
// running the call, for checks of the loop's own.
type ReadFunc[T any] func(t testing.TB, stream *hedgeprobe.Stream[T]) (text string, err error)

// ResumeCall runs one call over routes with a Prober of cfg, reads it with
// read and returns what the caller read and the stream's Stats.
func (a Adapter[T]) ResumeCall(t testing.TB, cfg hedgeprobe.Config, read ReadFunc[T], routes ...hedgeprobe.Route[T]) Resumed {
	t.Helper()
	stream := a.NewProber(t, cfg).Stream(t.Context(), routes...)
	defer stream.Close()
	text, err := read(t, stream)
	return Resumed{Stats: stream.Stats(), Text: text, Err: err}
}

// CheckResumeCases runs a subtest per ResumeCases entry on fakellm: route
// builds each of the case's routes, read is the caller's loop, and
// Resumed.Check checks the call.
func (a Adapter[T]) CheckResumeCases(t *testing.T, route func(t *testing.T, up *Upstream, r RouteSpec) hedgeprobe.Route[T], read ReadFunc[T]) {
	t.Helper()
	up := Start(t)
	for _, tc := range ResumeCases {
		t.Run(tc.Name, func(t *testing.T) {
			var routes []hedgeprobe.Route[T]
			for _, r := range tc.Routes {
				routes = append(routes, route(t, up, r))
			}
			a.ResumeCall(t, tc.Config, read, routes...).Check(t, tc)
		})
	}
}

// CheckResumeSwitches checks that an OpenAI-compatible route's server
// switches reach the wire: the "stall" route, built with no continuation,
// is resumed on fakellm's steady-final-message, steady-prefix and
// steady-prefix-echo profiles, which continue only with their switch and
// answer afresh (the whole script again, which Resumed.Check rejects)
// without it; the last repeats the prefix before the rest, which the
// route must drop. route builds the route of a profile with a
// continuation; read is the caller's loop.
func (a Adapter[T]) CheckResumeSwitches(t *testing.T, route func(t *testing.T, up *Upstream, profile string, how sse.Continuation) hedgeprobe.Route[T], read ReadFunc[T]) {
	t.Helper()
	up := Start(t)
	for _, tc := range []struct {
		profile string
		how     sse.Continuation
	}{
		{"steady-final-message", sse.ContinueFinalMessage},
		{"steady-prefix", sse.ContinuePrefix},
		// Its answer repeats the prefix: read twice unless dropped.
		{"steady-prefix-echo", sse.ContinuePrefixEcho},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			res := a.ResumeCall(t, ResumeConfig, read,
				route(t, up, "stall", sse.ContinueNone),
				route(t, up, tc.profile, tc.how))
			res.Check(t, ResumeCase{Attempts: []WantAttempt{
				{Trigger: hedgeprobe.TriggerPrimary, Route: "stall", Outcome: hedgeprobe.AttemptCanceled},
				{Trigger: hedgeprobe.TriggerResume, Route: tc.profile, Outcome: hedgeprobe.AttemptWinner},
			}})
		})
	}
}

// CallerPrefill is the caller's own prefill in CheckResumeAfterCallerPrefill:
// the script's first three words, without the space after them (Anthropic
// refuses a prefill that ends in whitespace).
var CallerPrefill = strings.TrimRight(fakellm.Script(3), " ")

// CheckResumeAfterCallerPrefill checks a resume of a request that already
// ends in an assistant message, the caller's own prefill (CallerPrefill):
// the "stall" route, continued after its silence on "steady", must send
// the delivered text as the continuation of that message — one assistant
// message, as fakellm (like many compatible servers) continues only the
// last one and refuses a partial answer that is not a prefix of the
// script. The caller reads the rest of the script byte for byte. route
// builds the route of a profile on a request ending in CallerPrefill, as
// one that continues; read is the caller's loop.
func (a Adapter[T]) CheckResumeAfterCallerPrefill(t *testing.T, route func(t *testing.T, up *Upstream, profile string) hedgeprobe.Route[T], read ReadFunc[T]) {
	t.Helper()
	up := Start(t)
	res := a.ResumeCall(t, ResumeConfig, read, route(t, up, "stall"), route(t, up, "steady"))
	want := []WantAttempt{
		{hedgeprobe.TriggerPrimary, "stall", hedgeprobe.AttemptCanceled},
		{hedgeprobe.TriggerResume, "steady", hedgeprobe.AttemptWinner},
	}
	for i, at := range res.Stats.Attempts {
		if at.Err != nil {
			t.Logf("attempt %d: %v", i, at.Err)
		}
	}
	// What the caller has: its prefill, the script's first 3 chunks, and
	// the answer, the other 37.
	res.Text = CallerPrefill + res.Text
	res.Stats.ChunksDelivered += 3
	res.Check(t, ResumeCase{Attempts: want})
}

// Resumed is what a resume scenario's call produced.
type Resumed struct {
	// Stats are the stream's Stats after the loop.
	Stats hedgeprobe.Stats
	// Text is the answer text the caller's loop read.
	Text string
	// Err is the stream's error.
	Err error
}

// Check fails the test unless the call made the case's attempts and the
// caller read the script byte for byte (or, for a timeout case, its first
// 5 chunks and a stall timeout).
func (r Resumed) Check(t testing.TB, tc ResumeCase) {
	t.Helper()
	var got []string
	for _, a := range r.Stats.Attempts {
		got = append(got, fmt.Sprintf("%s %s %s", a.Trigger, a.Route, a.Outcome))
	}
	var want []string
	for _, a := range tc.Attempts {
		want = append(want, fmt.Sprintf("%s %s %s", a.Trigger, a.Route, a.Outcome))
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("attempts:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if tc.Timeout {
		var te *hedgeprobe.TimeoutError
		if !errors.As(r.Err, &te) || te.Kind != hedgeprobe.TimeoutStall || r.Text != fakellm.Script(5) {
			t.Fatalf("err %v, text %q: want a stall timeout after %q", r.Err, r.Text, fakellm.Script(5))
		}
		return
	}
	if r.Err != nil {
		t.Fatalf("err %v", r.Err)
	}
	if r.Text != ScriptText {
		t.Fatalf("the caller read\n  %q\nwant the script\n  %q", r.Text, ScriptText)
	}
	if r.Stats.ChunksDelivered < 40 {
		t.Fatalf("%d chunks delivered", r.Stats.ChunksDelivered)
	}
}
