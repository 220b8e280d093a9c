package hedgeprobe

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Resume (docs/design.md §2 rule 10): a stream that falls silent is
// continued on another route from the text it had produced, and the
// continuation races the silent stream; the first to deliver its next
// content chunk wins. After commit the text is what the caller has been
// given (the transcript); before commit, the stalled attempt's items so
// far. Only text is continued: a tool call in progress, reasoning in
// progress (after the text) or an answer of nothing but reasoning is
// not. What the caller reads of a continuation (chainItems,
// continuation) is here too: the race only hands it over.

// transcript is the answer text delivered to the caller, kept for a
// resume and bounded by ResumeMaxText: past it, or after an item that
// cannot be continued, the call is not resumed.
type transcript struct {
	b      strings.Builder
	max    int
	broken ResumeSkip // why the text cannot be continued; "" while it can
	// closed: the last item after the text was a control item (see
	// closeAnswer) or content without text (reasoning, a citation), until
	// more text comes.
	closed bool
}

// skip returns why the transcript cannot be continued now, or "".
func (t *transcript) skip() ResumeSkip {
	if t.broken != "" {
		return t.broken
	}
	if t.b.Len() == 0 || t.closed {
		return ResumeNotResumable
	}
	return ""
}

// appendText appends s, or breaks the transcript when ok is false or the
// bound is passed.
func (t *transcript) appendText(s string, ok bool) {
	switch {
	case t.broken != "":
	case !ok:
		t.broken = ResumeNotResumable
	case t.b.Len()+len(s) > t.max:
		t.broken = ResumeTooLong
		t.b = strings.Builder{} // the text is of no use any more
	case s == "":
		// Content without text (reasoning, a citation). After the text,
		// the stream is in something that is not the answer's text — a
		// server thinking again between two parts of its answer — and a
		// continuation of the text would abandon it half written, as it
		// would a tool call: closed until more text comes. Before the
		// text it opens nothing.
		if t.b.Len() > 0 {
			t.closed = true
		}
	default:
		t.b.WriteString(s)
		t.closed = false
	}
}

// closeAnswer records a control item. After the text it may end the
// answer (a finish reason, usage), and text continued past it would follow
// the answer's end: the transcript cannot be continued until more text
// comes (a control item can also sit between two parts of an answer: the
// end of one content block before the next, a usage-only chunk of a server
// that reports usage as it goes). Before any text (a role chunk, a
// message start) it changes nothing.
func (t *transcript) closeAnswer() {
	if t.b.Len() > 0 {
		t.closed = true
	}
}

// textOf returns the text of items, or why it cannot be continued, or
// the error of a panicking Text.
func textOf[T any](text func(T) (string, bool), items []item[T], max int) (string, ResumeSkip, error) {
	var t transcript
	t.max = max
	for _, it := range items {
		switch it.kind {
		case Content:
			s, ok, err := textSafe(text, it.v)
			if err != nil {
				return "", "", err
			}
			t.appendText(s, ok)
		case Control:
			t.closeAnswer()
		}
	}
	if skip := t.skip(); skip != "" {
		return "", skip, nil
	}
	return t.b.String(), "", nil
}

// relabelSafe calls Items.Relabel; a panic becomes an error wrapping
// ErrExtractorPanic.
func relabelSafe[T any](relabel func(answer, v T) T, answer, v T) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, "relabel", r)
		}
	}()
	return relabel(answer, v), nil
}

// followsSafe calls Items.Follows; a panic becomes an error wrapping
// ErrExtractorPanic.
func followsSafe[T any](follows func(T) bool, v T) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, "follows", r)
		}
	}()
	return follows(v), nil
}

// openingSafe calls Items.Opening; a panic becomes an error wrapping
// ErrExtractorPanic.
func openingSafe[T any](opening func(T) bool, v T) (opens bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, "opening", r)
		}
	}()
	return opening(v), nil
}

// textSafe calls Items.Text; a panic becomes an error wrapping
// ErrExtractorPanic.
func textSafe[T any](text func(T) (string, bool), v T) (s string, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicked(ErrExtractorPanic, "text", r)
		}
	}()
	s, ok = text(v)
	return s, ok, nil
}

// refusals remembers the routes that refused a continuation, until when.
type refusals struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// add records that route refused at now, not to be asked until until.
// The refusals that have ended go: a route that refused once and is
// never asked again must not stay for the Prober's life.
func (r *refusals) add(route string, now, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = make(map[string]time.Time)
	}
	for name, u := range r.until {
		if !now.Before(u) {
			delete(r.until, name)
		}
	}
	r.until[route] = until
}

func (r *refusals) refused(route string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.until[route]
	if ok && !now.Before(u) {
		delete(r.until, route)
		return false
	}
	return ok
}

func anyContinues[T any](routes []Route[T]) bool {
	for i := range routes {
		if routes[i].Continues {
			return true
		}
	}
	return false
}

// resumeRoute returns the route for a resume of attempt a: the next route
// that Continues, has not refused a continuation lately, could build this
// call's continuation when asked before, and health admits,
// after the route of a's latest resume (one that stayed silent or failed
// is not asked again while a third route can be), else after a's own; a's
// own route comes last, after the latest resume's (a's silence is the
// older one, yet it is where the call first failed; with one route that
// can continue, it is asked again: the silence may be one replica's).
// avoid, when set, is not asked at all.
func (s *Stream[T]) resumeRoute(a *attempt[T], avoid *Route[T]) (int, bool) {
	now := time.Now()
	after := a.route
	for i := len(s.attempts) - 1; i > a.idx; i-- {
		if r := s.attempts[i]; r.trigger == TriggerResume && r.of == a {
			after = r.route
			break
		}
	}
	from, own := 0, 0
	for i := range s.routes {
		if &s.routes[i] == after {
			from = i + 1
		}
		if &s.routes[i] == a.route {
			own = i
		}
	}
	for i := range len(s.routes) + 1 {
		j := (from + i) % len(s.routes)
		if i == len(s.routes) {
			j = own // skipped in the round, tried at its end
		} else if j == own {
			continue
		}
		r := &s.routes[j]
		if r == avoid || !r.Continues || s.race.cannotBuild[r.Name] || s.p.refusals.refused(r.Name, now) {
			continue
		}
		if s.admit(r.Name, now, false) {
			return j, true
		}
	}
	return 0, false
}

// resumeBeforeCommit launches a resume of the stalled attempt n, which has
// not committed: the continuation of the text n has received so far. It
// reports false when n cannot be resumed (the stall trigger then starts
// over on a fresh attempt).
func (s *Stream[T]) resumeBeforeCommit(n *attempt[T]) bool {
	if !s.race.resumable {
		return false
	}
	text, skip, err := textOf(s.p.items.Text, chainItems(n), s.p.cfg.ResumeMaxText)
	if err != nil {
		s.finish(err, OutcomeError)
		return true
	}
	if skip != "" {
		return false
	}
	i, ok := s.resumeRoute(n, nil)
	if !ok {
		return false
	}
	s.launch(launch[T]{trigger: TriggerResume, route: i, of: n, parent: n, parentItems: len(n.buf),
		parentContent: n.chainContent(), prefix: text})
	return true
}

// resumeAfterCommit launches a resume of the committed stream: the
// continuation of what the caller has been given. A resume that cannot be
// launched is reported (a resume.skipped event, or a throttle), and the
// stall watchdog remains. avoid, when set, is the route of the resume
// racing the stream that just failed: the relaunch at once does not ask it
// again, and when no other route can take it nothing is launched or
// reported — the next resume comes at the usual cadence. It reports
// whether an attempt launched.
func (s *Stream[T]) resumeAfterCommit(avoid *Route[T]) bool {
	w := s.race.winner
	skip := s.out.text.skip()
	i, ok := 0, false
	switch {
	case !s.canLaunch():
		skip = ResumeMaxAttempts
	case skip != "":
	default:
		if i, ok = s.resumeRoute(w, avoid); !ok {
			if avoid != nil {
				return false
			}
			skip = ResumeNoRoute
		}
	}
	if skip != "" {
		s.obs.resume(ResumeEvent{Context: s.ctx, Attempt: len(s.attempts), Of: w.idx,
			DeliveredChunks: s.out.delivered, Skipped: skip, Elapsed: s.since()})
		return false
	}
	return s.launch(launch[T]{trigger: TriggerResume, route: i, of: w, prefix: s.out.text.b.String(),
		delivered: s.out.delivered})
}

// chainItems returns what the caller reads of a: its parent's items up to
// where a continues them, then its own (continuation's, for a resume).
func chainItems[T any](a *attempt[T]) []item[T] {
	var out []item[T]
	if p := a.parent; p != nil {
		out = chainItems(p)
		out = out[:len(out)-(len(p.buf)-a.parentItems)]
	}
	own := a.buf
	if a.trigger == TriggerResume {
		own = continuation(a)
	}
	return append(out, own...)
}

// continuation returns what the caller reads of a resume attempt's own
// items: not the opening of an answer, which the caller already has from
// the attempt it continues. With Items.Opening, the opening is what it
// says opens (OpenAI's role chunk; Anthropic's message_start and the start
// of block 0) before the first content: the caller reads the rest from the
// first content or the first other Control item, so a continuation that
// ended without content (the answer was complete at the prefix) gives the
// caller only its closing items (finish reason, usage), and one that
// closes its first block before any content gives the caller that block's
// end and what starts after it (Anthropic: an empty text block ended,
// then a thinking block 1, whose start carries no content).
// Without Items.Opening the opening is everything before the
// first content chunk or, without content, as many Control items as the
// answer's own opening had, which fails where the routes open differently
// (a server that sends no role chunk continuing one that does would lose
// its finish reason). A second opening would make anthropic-sdk-go's
// Message.Accumulate start the message afresh. A continuation that
// follows the answer (Items.Follows) reaches the caller from the item
// that begins what follows (the start of its first block), with or
// without content, after the closing items it sent before that item
// (early usage), without its opening.
func continuation[T any](a *attempt[T]) []item[T] {
	if a.follows {
		// Nothing before followAt is content: what the caller reads of
		// it is its closing items.
		return append(slices.Clip(afterOpening(a.buf[:a.followAt])), a.buf[a.followAt:]...)
	}
	if a.openAsked {
		return afterOpening(a.buf)
	}
	if a.firstItem >= 0 {
		return a.buf[a.firstItem:]
	}
	answer := a
	for answer.trigger == TriggerResume && answer.of != nil {
		answer = answer.of
	}
	skip := answer.opening
	for i, it := range a.buf {
		if skip == 0 {
			return a.buf[i:]
		}
		if it.kind == Control {
			skip--
		}
	}
	return nil
}

// afterOpening returns what the caller reads of items, a continuation's
// with Items.Opening asked: from its first content or first closing item,
// withoutOpening; nil when it has neither.
func afterOpening[T any](items []item[T]) []item[T] {
	for i, it := range items {
		if it.kind == Content || it.kind == Control && !it.opens {
			return withoutOpening(items[i:])
		}
	}
	return nil
}

// withoutOpening returns items, a continuation from its first content or
// first closing item, without the opening items that come after that
// but before the first content: a server that sends usage before the
// start of its first block (Anthropic) must not have that start reach the
// caller, whose answer has it already. Without such items it is items.
func withoutOpening[T any](items []item[T]) []item[T] {
	for i, it := range items {
		if it.kind == Content {
			return items
		}
		if it.kind == Control && it.opens {
			// Only items before the first content are marked opens.
			out := slices.Clip(items[:i])
			for _, it := range items[i+1:] {
				if !it.opens {
					out = append(out, it)
				}
			}
			return out
		}
	}
	return items
}
