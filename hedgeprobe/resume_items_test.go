package hedgeprobe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A continuation can end without content: the answer was complete at
// the prefix, and the stalled stream only owed its closing items. The
// caller then reads the continuation's closing items, not its opening
// (what Items.Opening says opens; without it, as many Control items as
// the answer's own opening), after commit and before (Buffered): a second
// opening would make an accumulator such as anthropic-sdk-go's
// (message_start) start the message afresh. Routes that open differently
// need Items.Opening: a continuation without a role chunk after an answer
// with one would lose its finish reason, and one with a role chunk after
// an answer without would deliver a second opening.
func TestResumeEndsWithoutContent(t *testing.T) {
	openAI := func(after time.Duration) []step {
		return []step{keepalive(after), control(50*time.Millisecond, "role"),
			control(10*time.Millisecond, "stop"), control(10*time.Millisecond, "usage")}
	}
	anthropic := func(after time.Duration) []step {
		return []step{control(after, "message_start"), keepalive(10 * time.Millisecond), control(10*time.Millisecond, "block_start"),
			control(10*time.Millisecond, "block_stop"), control(10*time.Millisecond, "message_delta"), control(0, "message_stop")}
	}
	opens := func(i *Items[chunk]) {
		i.Opening = func(c chunk) bool { return c.Text == "role" || c.Text == "message_start" || c.Text == "block_start" }
	}
	for _, tc := range []struct {
		name        string
		delivery    Delivery
		stallAfter  time.Duration
		a, b        []step
		want        string
		openingOnly bool // only right with Items.Opening
	}{
		{"after commit", Streaming, 0,
			[]step{control(0, "role"), content(time.Second, "Done."), keepalive(500 * time.Millisecond), hang()}, openAI(50 * time.Millisecond),
			"[role Done. stop usage]", false},
		{"before commit (Buffered)", Buffered, time.Second,
			[]step{control(0, "role"), content(time.Second, "Done."), keepalive(500 * time.Millisecond), hang()}, openAI(50 * time.Millisecond),
			"[role Done. stop usage]", false},
		{"two opening items", Streaming, 0,
			[]step{control(0, "message_start"), control(0, "block_start"), content(time.Second, "Done."), hang()}, anthropic(50 * time.Millisecond),
			"[message_start block_start Done. block_stop message_delta message_stop]", false},
		{"a continuation without the answer's role chunk", Streaming, 0,
			[]step{control(0, "role"), content(time.Second, "Done."), hang()},
			[]step{control(50*time.Millisecond, "stop"), control(10*time.Millisecond, "usage")},
			"[role Done. stop usage]", true},
		{"an answer without a role chunk", Streaming, 0,
			[]step{content(time.Second, "Done."), hang()}, openAI(50 * time.Millisecond),
			"[Done. stop usage]", true},
	} {
		for _, opening := range []bool{true, false} {
			if tc.openingOnly && !opening {
				continue
			}
			t.Run(fmt.Sprintf("%s/opening=%v", tc.name, opening), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a, b := continuing("a", tc.a), continuing("b", tc.b)
					cfg := resumeCfg()
					cfg.Delivery, cfg.StallAfter = tc.delivery, tc.stallAfter
					opts := []any{withText()}
					if opening {
						opts = append(opts, itemsOpt(opens))
					}
					s := mustNew(t, cfg, opts...).Stream(t.Context(), a.route(), b.route())
					g := drain(s, time.Now())
					if g.err != nil {
						t.Fatalf("err %v", g.err)
					}
					var items []string
					for i, k := range g.kinds {
						if k != Keepalive {
							items = append(items, g.texts[i])
						}
					}
					if fmt.Sprint(items) != tc.want {
						t.Fatalf("caller read %v, want %s: the continuation's opening must not be delivered, its closing must", items, tc.want)
					}
					if asked := b.attempts(); len(asked) != 1 || asked[0].Prefix != "Done." || asked[0].Trigger != TriggerResume {
						t.Fatalf("b asked %+v", asked)
					}
					if st := s.Stats(); st.Outcome != OutcomeOK || st.Winner != 1 || st.Attempts[0].Outcome != AttemptCanceled ||
						st.Attempts[1].Outcome != AttemptWinner || st.ChunksDelivered != 1 {
						t.Fatalf("stats %+v", st)
					}
				})
			})
		}
	}
	// A panic in Items.Opening fails the call, as one in Items.Text does.
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{control(0, "role"), content(time.Second, "Done."), hang()})
			b := continuing("b", openAI(50*time.Millisecond))
			s := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Opening = func(chunk) bool { panic("opening") }
			})).Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "Done." || s.Stats().Outcome != OutcomeError {
				t.Fatalf("text %q err %v outcome %s, want Done. and ErrExtractorPanic", joined(g), g.err, s.Stats().Outcome)
			}
		})
	})
}

// A continuation that begins something other than the answer's text
// (Items.Follows: on Anthropic, the start of a block that is not text)
// follows the answer: it reaches the caller from that item on — its
// opening before it dropped, with or without content —, relabelled by
// Items.RelabelAfter (Relabel without it). Follows is asked while the
// continuation's items open (Items.Opening) and about the first that does
// not: a text block that begins with content that is no text (a citation)
// continues the answer, and so does an empty text block closed before a
// tool call. Without Follows nothing follows.
func TestResumeFollows(t *testing.T) {
	answer := []step{control(0, "role"), content(time.Second, "A"), hang()}
	cont := func(items ...step) []step {
		return append([]step{control(50*time.Millisecond, "role")}, items...)
	}
	ms := 10 * time.Millisecond
	for _, tc := range []struct {
		name      string
		b         []step
		follows   bool // Items.Follows set
		after     bool // Items.RelabelAfter set
		read      string
		relabels  string // which function, answer|item, per call
		delivered int64  // content chunks the caller read
	}{
		{"a tool call first", cont(control(ms, "block_start:tool"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A block_start:tool tool:f stop]", "[after A|block_start:tool after A|tool:f after A|stop]", 2},
		{"thinking first, then text", cont(control(ms, "block_start:think"), content(ms, "think:hm"), control(ms, "block_stop"),
			control(ms, "block_start1:text"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A block_start:think think:hm block_stop block_start1:text B stop]",
			"[after A|block_start:think after A|think:hm after A|block_stop after A|block_start1:text after A|B after A|stop]", 3},
		// Usage sent before the first block's start (closing, not
		// opening) does not end the asking: the block that follows is
		// still found, and the usage reaches the caller before it.
		{"usage, then a tool call", cont(control(ms, "usage"), control(ms, "block_start:tool"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A usage block_start:tool tool:f stop]", "[after A|usage after A|block_start:tool after A|tool:f after A|stop]", 2},
		// The same with a keepalive (read as "") and the role again after
		// the usage, and no content: the keepalive reaches the caller (as
		// any after the cut), the second opening does not.
		{"usage, a keepalive, the role again, then no content", cont(control(ms, "usage"), keepalive(ms), control(ms, "role"), control(ms, "block_start:redacted"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A usage  block_start:redacted block_stop stop]", "[after A|usage after A| after A|block_start:redacted after A|block_stop after A|stop]", 1},
		{"no content", cont(control(ms, "block_start:redacted"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A block_start:redacted block_stop stop]", "[after A|block_start:redacted after A|block_stop after A|stop]", 1},
		{"no RelabelAfter", cont(control(ms, "block_start:tool"), content(ms, "tool:f")), true, false,
			"[role A block_start:tool tool:f]", "[relabel A|block_start:tool relabel A|tool:f]", 2},
		// A text block continues the answer's, whatever its first content.
		{"a text block that begins with a citation", cont(control(ms, "block_start:text"), content(ms, "cite:"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A cite: B stop]", "[relabel A|cite: relabel A|B relabel A|stop]", 3},
		// Usage before the first block's start reaches the caller, the
		// start does not: the answer's block is started already.
		{"usage, then text", cont(control(ms, "usage"), control(ms, "block_start:text"), content(ms, "B"), control(ms, "stop")), true, true,
			"[role A usage B stop]", "[relabel A|usage relabel A|B relabel A|stop]", 2},
		// The empty block's end is the answer's block's; what starts
		// after it (block 1: "block_start1:") neither opens nor follows
		// the answer, and reaches the caller, its start included where
		// that carries no content (a thinking block's; a tool call's
		// carries its name).
		{"an empty text block, then a tool call", cont(control(ms, "block_start:text"), control(ms, "block_stop"), content(ms, "tool:f"), control(ms, "stop")), true, true,
			"[role A block_stop tool:f stop]", "[relabel A|block_stop relabel A|tool:f relabel A|stop]", 2},
		{"an empty text block, then thinking", cont(control(ms, "block_start:text"), control(ms, "block_stop"),
			control(ms, "block_start1:think"), content(ms, "think:hm"), control(ms, "block_stop"), control(ms, "stop")), true, true,
			"[role A block_stop block_start1:think think:hm block_stop stop]",
			"[relabel A|block_stop relabel A|block_start1:think relabel A|think:hm relabel A|block_stop relabel A|stop]", 2},
		{"without Follows", cont(control(ms, "block_start:tool"), content(ms, "tool:f")), false, true,
			"[role A tool:f]", "[relabel A|tool:f]", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := continuing("a", answer), continuing("b", tc.b)
				var relabels []string
				p := mustNew(t, resumeCfg(), itemsOpt(func(i *Items[chunk]) {
					i.Text = func(c chunk) (string, bool) {
						switch {
						case strings.HasPrefix(c.Text, "tool:"):
							return "", false
						case strings.Contains(c.Text, ":"): // reasoning, a citation: no answer text
							return "", true
						}
						return c.Text, true
					}
					// "block_start:" starts block 0, "block_start1:" block 1.
					i.Opening = func(c chunk) bool { return c.Text == "role" || strings.HasPrefix(c.Text, "block_start:") }
					if tc.follows {
						i.Follows = func(c chunk) bool {
							return strings.HasPrefix(c.Text, "block_start:") && c.Text != "block_start:text"
						}
					}
					i.Relabel = func(answer, v chunk) chunk {
						relabels = append(relabels, "relabel "+answer.Text+"|"+v.Text)
						return v
					}
					if tc.after {
						i.RelabelAfter = func(answer, v chunk) chunk {
							relabels = append(relabels, "after "+answer.Text+"|"+v.Text)
							return v
						}
					}
				}))
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if g.err != nil || fmt.Sprint(g.texts) != tc.read {
					t.Fatalf("caller read %v, err %v; want %s", g.texts, g.err, tc.read)
				}
				if fmt.Sprint(relabels) != tc.relabels {
					t.Fatalf("relabelled %v, want %s", relabels, tc.relabels)
				}
				if st := s.Stats(); st.Outcome != OutcomeOK || st.Winner != 1 || st.Attempts[1].Trigger != TriggerResume || st.ChunksDelivered != tc.delivered {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
	// A panic in Follows fails the call; it is asked before the item is
	// recorded, so the continuation's span counts what its timeline holds.
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", answer)
			b := continuing("b", cont(content(ms, "B")))
			s := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Opening = func(c chunk) bool { return c.Text == "role" }
				i.Follows = func(c chunk) bool {
					if c.Kind == Content {
						panic("follows")
					}
					return false
				}
			})).Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "A" || s.Stats().Outcome != OutcomeError {
				t.Fatalf("text %q err %v outcome %s, want A and ErrExtractorPanic", joined(g), g.err, s.Stats().Outcome)
			}
			if st := s.Stats(); st.Attempts[1].ContentChunks != 0 {
				t.Fatalf("the continuation counted %d content chunks: its item failed before it counted", st.Attempts[1].ContentChunks)
			}
		})
	})
}

// Items.Relabel gives a continuation's items the labels of the answer it
// continues: each continuation's answer is the latest content item the
// caller read before its first item, relabelled in turn after a second
// resume, before commit and after, and only a continuation's items are
// relabelled. A panic in it fails the call, and the item is not read.
func TestResumeRelabel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      func(*Config)
		a, b     [][]step
		text     string
		relabels string // answer|item, per call of Relabel
	}{
		{"after commit, twice", func(*Config) {},
			[][]step{{content(time.Second, "A"), hang()}, {content(100*time.Millisecond, "C")}},
			[][]step{{content(100*time.Millisecond, "B"), hang()}},
			"ABC", "[A|B B|C]"},
		{"before commit (Buffered)", func(c *Config) { c.Delivery, c.StallAfter = Buffered, time.Second },
			[][]step{{control(500*time.Millisecond, "role"), content(500*time.Millisecond, "A"), content(10*time.Millisecond, "B"), hang()}},
			[][]step{{control(50*time.Millisecond, "role"), content(50*time.Millisecond, "C"), control(10*time.Millisecond, "stop")}},
			"ABC", "[B|C B|stop]"},
		{"a hedge's items are its own", func(c *Config) { c.HedgeAfter = 500 * time.Millisecond },
			[][]step{{content(time.Second, "A")}},
			[][]step{{content(100*time.Millisecond, "B")}},
			"B", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := continuing("a", tc.a...), continuing("b", tc.b...)
				cfg := resumeCfg()
				tc.cfg(&cfg)
				var relabels []string
				p := mustNew(t, cfg, withText(), itemsOpt(func(i *Items[chunk]) {
					i.Relabel = func(answer, v chunk) chunk {
						relabels = append(relabels, answer.Text+"|"+v.Text)
						v.Route = answer.Route
						return v
					}
				}))
				s := p.Stream(t.Context(), a.route(), b.route())
				g := drain(s, time.Now())
				if g.err != nil || joined(g) != tc.text {
					t.Fatalf("text %q err %v", joined(g), g.err)
				}
				if fmt.Sprint(relabels) != tc.relabels {
					t.Fatalf("Relabel called with %v, want %s", relabels, tc.relabels)
				}
				if want := len(g.kinds); tc.relabels != "[]" && g.from["a"] != want {
					t.Fatalf("items read by route %v: every item must carry the answer's labels", g.from)
				}
			})
		})
	}
	t.Run("panic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			a := continuing("a", []step{content(time.Second, "A"), hang()})
			b := continuing("b", []step{content(100*time.Millisecond, "B"), content(10*time.Millisecond, "C")})
			p := mustNew(t, resumeCfg(), withText(), itemsOpt(func(i *Items[chunk]) {
				i.Relabel = func(answer, v chunk) chunk { panic("relabel") }
			}))
			s := p.Stream(t.Context(), a.route(), b.route())
			g := drain(s, time.Now())
			if !errors.Is(g.err, ErrExtractorPanic) || joined(g) != "A" {
				t.Fatalf("text %q err %v, want A and ErrExtractorPanic", joined(g), g.err)
			}
			if st := s.Stats(); st.Outcome != OutcomeError || st.ChunksDelivered != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	})
}
