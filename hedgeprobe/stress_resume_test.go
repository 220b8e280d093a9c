package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamwatch/streamwatch/semconv"
)

// Exactly once, under stress: TestResumeExactlyOnceStress runs 600 calls
// per mode over three routes that each answer the same 30-word text — from
// the word the resume prefix ends at — with a random silence (sometimes
// filled with keepalives), so resumes happen, race their stalled streams
// and chain. The modes: Streaming, Streaming holding 5 chunks, Buffered,
// a slow caller. The chaotic modes add
// refusals, 429s with Retry-After and 503s on open, 502s mid-stream,
// ejections, and a Close or a cancel at a random time. Every call: the
// caller's text is a prefix of the whole text (once, in order, never
// interleaved) and the whole text when the call is ok; one span per
// attempt, none left running; each attempt span's received and delivered
// counts are its Stats', delivered ≤ received, summed they are the call's,
// and the caller's view has one offset per delivered chunk.
func TestResumeExactlyOnceStress(t *testing.T) {
	words := make([]string, 30)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	script := strings.Join(words, "")
	for _, mode := range []string{"streaming", "hold", "buffered", "slow", "chaos", "chaoshold", "wild"} {
		chaotic := strings.HasPrefix(mode, "chaos") || mode == "wild"
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				scripts := rand.New(rand.NewPCG(3, 5))
				var scriptsMu sync.Mutex
				caller := rand.New(rand.NewPCG(9, 1))
				route := func(name string) Route[chunk] {
					return Route[chunk]{Name: name, Model: "m", Continues: true, Open: func(ctx context.Context, a Attempt) (Source[chunk], error) {
						k := len(strings.Fields(a.Prefix))
						if a.Prefix != strings.Join(words[:k], "") {
							return nil, fmt.Errorf("prefix %q does not end at a word of the text", a.Prefix)
						}
						// Open runs on its attempt's goroutine: two can overlap.
						scriptsMu.Lock()
						stallAt, stallFor := scripts.IntN(40), time.Duration(scripts.IntN(80))*100*time.Millisecond
						keepalives := scripts.IntN(2) == 0
						chaos, failAt := scripts.IntN(20), scripts.IntN(40)
						scriptsMu.Unlock()
						if chaotic {
							switch {
							case chaos == 0 && a.Trigger == TriggerResume:
								return nil, &statusErr{code: 400}
							case chaos == 1:
								return nil, &statusErr{code: 429, after: time.Duration(failAt) * time.Second}
							case chaos == 2:
								return nil, &statusErr{code: 503}
							}
						}
						steps := []step{control(50*time.Millisecond, "role")}
						for i, w := range words[k:] {
							d := 100 * time.Millisecond
							if i == 0 {
								d = 300 * time.Millisecond
							}
							if i == stallAt {
								if keepalives {
									for range int(stallFor / (500 * time.Millisecond)) {
										steps = append(steps, keepalive(500*time.Millisecond))
									}
									d += stallFor % (500 * time.Millisecond)
								} else {
									d += stallFor
								}
							}
							steps = append(steps, content(d, w))
							if chaotic && chaos == 3 && i == failAt {
								steps = append(steps, fail(50*time.Millisecond, &statusErr{code: 502}))
							}
						}
						steps = append(steps, control(100*time.Millisecond, "stop"))
						return &scripted{route: name, ctx: ctx, steps: steps, closed: make(chan struct{})}, nil
					}}
				}
				cfg := Config{HedgeAfter: time.Hour, ResumeAfter: time.Second, StallTimeout: 4 * time.Second,
					MaxAttempts: 5, HedgeBudget: 1}
				switch mode {
				case "hold":
					cfg.HoldChunks, cfg.StallAfter = 5, time.Second
				case "chaoshold":
					cfg.HoldChunks, cfg.StallAfter = 3, time.Second
					cfg.EjectFailures, cfg.EjectBase, cfg.EjectMax = 1, time.Second, 5*time.Second
				case "wild":
					cfg.HedgeAfter, cfg.TTFTTimeout = 700*time.Millisecond, 6*time.Second
					cfg.MaxAttempts, cfg.HedgeBudget, cfg.HedgeBurst = 3, 0.3, 2
					cfg.EjectFailures, cfg.EjectBase, cfg.EjectMax = 2, 2*time.Second, 10*time.Second
				case "buffered":
					cfg.Delivery, cfg.StallAfter = Buffered, time.Second
				}
				p, exp := recorded(t, cfg, withText())
				ok, resumed, outcomes := 0, 0, map[Outcome]int{}
				for range 600 {
					ctx, cancel := context.WithCancel(t.Context())
					s := p.Stream(ctx, route("a"), route("b"), route("c"))
					if chaotic && caller.IntN(10) == 0 {
						d := time.Duration(caller.IntN(100)) * 100 * time.Millisecond
						if caller.IntN(2) == 0 {
							time.AfterFunc(d, func() { s.Close() })
						} else {
							time.AfterFunc(d, cancel)
						}
					}
					var b strings.Builder
					for s.Next() {
						if c := s.Current(); c.Kind == Content {
							b.WriteString(c.Text)
						}
						if mode == "slow" && caller.IntN(10) == 0 {
							time.Sleep(time.Duration(caller.IntN(30)) * 100 * time.Millisecond)
						}
					}
					text, st := b.String(), s.Stats()
					if !strings.HasPrefix(script, text) {
						t.Fatalf("caller read %q: not a prefix of the text", text)
					}
					call, atts := spansOf(t, exp)
					if len(atts) != len(st.Attempts) {
						t.Fatalf("%d attempt spans for %d attempts", len(atts), len(st.Attempts))
					}
					if v, ok := attrOf(call.Attributes, semconv.CallerChunkOffsetsUs); st.ChunksDelivered > 0 && (!ok || int64(len(v.AsInt64Slice())) != st.ChunksDelivered) {
						t.Fatalf("caller's view %v for %d chunks delivered", v.AsInt64Slice(), st.ChunksDelivered)
					}
					var sum int64
					resumes := false
					for i, a := range st.Attempts {
						sum += a.ChunksDelivered
						if a.ChunksDelivered > a.ContentChunks {
							t.Fatalf("attempt %d delivered %d of %d", i, a.ChunksDelivered, a.ContentChunks)
						}
						d := mustAttr(t, atts[i], semconv.ChunksDelivered).AsInt64()
						c := mustAttr(t, atts[i], semconv.ChunkCount).AsInt64()
						if d != a.ChunksDelivered || c != a.ContentChunks {
							t.Fatalf("attempt %d span: delivered %d, received %d; stats %+v", i, d, c, a)
						}
						if a.Outcome == AttemptRunning {
							t.Fatalf("attempt %d still running after the call ended", i)
						}
						resumes = resumes || a.Trigger == TriggerResume
					}
					if resumes {
						resumed++
					}
					if sum != st.ChunksDelivered {
						t.Fatalf("attempts delivered %d, the call %d: %+v", sum, st.ChunksDelivered, st)
					}
					exp.Reset()
					cancel()
					time.Sleep(time.Minute) // every reader gone before the next call
					outcomes[st.Outcome]++
					switch {
					case st.Outcome == OutcomeOK:
						ok++
						if text != script {
							t.Fatalf("ok call read %q", text)
						}
					case !chaotic && !errors.Is(s.Err(), ErrStallTimeout):
						t.Fatalf("outcome %q, err %v: only stall timeouts fail without chaos", st.Outcome, s.Err())
					}
				}
				if least := map[bool]int{false: 540, true: 300}[chaotic]; ok < least || resumed < 100 {
					t.Errorf("%d calls ok (want %d), %d with resumes (want 100): the load no longer exercises resume", ok, least, resumed)
				}
				t.Logf("%s: 600 calls, %d ok, %d with resumes, outcomes %v", mode, ok, resumed, outcomes)
			})
		})
	}
}
