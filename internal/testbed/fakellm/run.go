package fakellm

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// One request being served: its script, its clock, what it writes.

// run is one request being served.
type run struct {
	// created is the response's creation time, in Unix seconds: OpenAI
	// gives every chunk of a stream the same.
	created int64
	srv     *Server
	p       *Profile
	d       dialect
	w       http.ResponseWriter
	ctx     context.Context
	rng     *rand.Rand
	req     request
	rec     *record
	id      uint64
	model   string
	due     time.Time // when the scripted wait in progress ends
	// cont is where a continuation starts; nil for a fresh answer.
	cont *continued
}

// first is the index of the first content chunk the run sends.
func (r *run) first() int {
	if r.cont != nil {
		return r.cont.from
	}
	return 0
}

// replays reports whether the run plays what the script does after n
// content chunks: a fresh answer plays all of it, a continuation only what
// lies after the point its prefix ends.
func (r *run) replays(n int) bool { return r.cont == nil || n > r.cont.rescued }

// text is the text of content chunk i.
func (r *run) text(i int) string {
	if r.cont != nil && i == r.cont.from {
		return r.cont.head
	}
	return word(i)
}

// answer is the text of the whole response: the script, or its rest.
func (r *run) answer() string {
	var b strings.Builder
	for i := r.first(); i < r.p.Chunks; i++ {
		b.WriteString(r.text(i))
	}
	return b.String()
}

func (r *run) scaled(d time.Duration) time.Duration {
	return durationOf(float64(d) * r.srv.scale)
}

// fail answers with the profile's status.
func (r *run) fail() {
	p := r.p
	if p.StatusAfter > 0 && !r.sleep(time.Duration(p.StatusAfter), Keepalive{}) {
		r.rec.status, r.rec.outcome = 0, "canceled" // nothing was sent
		return
	}
	r.rec.status, r.rec.outcome = p.Status, "status"
	if ra := r.scaled(time.Duration(p.RetryAfter)); ra > 0 {
		r.w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ra.Seconds())))))
		r.w.Header().Set("Retry-After-Ms", strconv.FormatInt(max(1, ra.Milliseconds()), 10))
	}
	typ := r.d.statusType(p.Status)
	writeError(r.w, r.d, p.Status, typ, typ, fmt.Sprintf("fakellm: scripted %d %s", p.Status, http.StatusText(p.Status)))
}

// sleep waits d (scaled) and, when ka.Every > 0, sends keepalives every
// ka.Every (scaled) meanwhile, strictly before the wait ends: a 30s
// silence with keepalives every 1s sends 29, the same on every run. It
// reports false when the request ended.
//
// Waits run against the script's own clock (r.due), not from the moment
// sleep is called, so timer and write overheads do not add up over a long
// stream: chunk n goes out at its scripted offset, late by one wake-up at
// most.
func (r *run) sleep(d time.Duration, ka Keepalive) bool {
	start := time.Now()
	if r.due.IsZero() {
		r.due = start
	}
	r.due = r.due.Add(r.scaled(d))
	every := r.scaled(time.Duration(ka.Every))
	if ka.Every <= 0 || every <= 0 {
		every = 0
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for sent := 0; ; sent++ {
		// The next keepalive, unless the wait ends first (or with it).
		next, last := start.Add(time.Duration(sent+1)*every), false
		if every == 0 || !next.Before(r.due) {
			next, last = r.due, true
		}
		t.Reset(time.Until(next))
		select {
		case <-r.ctx.Done():
			return false
		case <-t.C:
		}
		if last {
			// A server running behind its script (a loaded machine, a
			// small scale) reaches the deadline before the first
			// keepalive: a silence the script gives keepalives still
			// shows one. A silence no longer than the period has none
			// strictly inside it, so it shows none.
			if sent == 0 && every > 0 && r.scaled(d) > every {
				r.keepalive(ka)
			}
			return true
		}
		r.keepalive(ka)
	}
}

// keepalive sends one keepalive in ka's style.
func (r *run) keepalive(ka Keepalive) {
	style := ka.Style
	if style == "" || style == "auto" {
		style = r.d.keepaliveStyle()
	}
	if style == "ping" {
		r.write("ping", []byte(`{"type": "ping"}`))
	} else {
		r.writeRaw(": keepalive\n\n")
	}
	r.rec.keepalives++
}

func (r *run) writeRaw(s string) {
	_, _ = io.WriteString(r.w, s)
	_ = http.NewResponseController(r.w).Flush()
}

// write sends one event; an empty name sends a data-only event.
func (r *run) write(event string, data []byte) {
	var b strings.Builder
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	r.writeRaw(b.String())
}

// boundary runs what the profile scripts after n content chunks: silences,
// then an error payload or a disconnect. It reports false when the stream
// must end now.
func (r *run) boundary(n int) bool {
	for _, s := range r.p.Silences {
		if s.AfterChunk == n {
			if !r.sleep(s.Duration.Sample(r.rng), s.Keepalive) {
				r.rec.outcome = "canceled"
				return false
			}
		}
	}
	if e := r.p.Error; e != nil && e.AfterChunk == n {
		typ, msg := e.Type, e.Message
		if typ == "" {
			typ = r.d.midErrorType()
		}
		if msg == "" {
			msg = "fakellm: scripted error"
		}
		r.d.writeMidError(r, typ, e.Code, msg)
		r.rec.outcome = "error_payload"
		return false
	}
	if dc := r.p.Disconnect; dc != nil && dc.AfterChunk == n {
		if dc.Clean {
			r.rec.outcome = "disconnect_clean"
			return false
		}
		r.rec.outcome = "disconnect"
		// Cut the connection mid-body: the client sees no terminating
		// chunk, hence an unexpected EOF.
		panic(http.ErrAbortHandler)
	}
	return true
}

func (r *run) stream() {
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	r.w.WriteHeader(http.StatusOK)
	r.d.start(r)
	// A continuation starts after its prefix: what the script does at that
	// point (the silence the continuation rescues) is not replayed.
	first := r.first()
	if r.replays(0) && !r.boundary(0) {
		return
	}
	if !r.sleep(r.p.TTFT.Sample(r.rng), r.p.TTFTKeepalive) {
		r.rec.outcome = "canceled"
		return
	}
	for i := first; i < r.p.Chunks; i++ {
		if i > first && !r.sleep(r.p.Interval.Sample(r.rng), Keepalive{}) {
			r.rec.outcome = "canceled"
			return
		}
		r.d.content(r, i)
		r.rec.chunks++
		if r.replays(i+1) && !r.boundary(i+1) {
			return
		}
	}
	r.d.finish(r)
	r.rec.outcome = "done"
}

// whole serves a non-streaming request: it waits as long as the stream
// would have taken to end — at its last chunk, or at the first fault it
// plays — then answers with the whole message, or the fault.
func (r *run) whole() {
	// A fault the continuation is past is not replayed, as in a stream.
	// At one boundary the error comes before the disconnect, as boundary
	// runs them.
	end := r.p.Chunks
	var midErr *MidError
	if e := r.p.Error; e != nil && r.replays(e.AfterChunk) {
		end, midErr = e.AfterChunk, e
	}
	dc := r.p.Disconnect
	if dc != nil && (!r.replays(dc.AfterChunk) || (midErr != nil && dc.AfterChunk >= end)) {
		dc = nil
	}
	if dc != nil {
		end, midErr = dc.AfterChunk, nil
	}
	fault := midErr != nil || dc != nil
	var total time.Duration
	// A stream that fails before its first chunk never waits the TTFT.
	if !fault || end > 0 {
		total = addDurations(total, r.p.TTFT.Sample(r.rng))
	}
	for i := r.first() + 1; i < end; i++ {
		total = addDurations(total, r.p.Interval.Sample(r.rng))
	}
	for _, s := range r.p.Silences {
		if s.AfterChunk <= end && r.replays(s.AfterChunk) {
			total = addDurations(total, s.Duration.Sample(r.rng))
		}
	}
	if !r.sleep(total, Keepalive{}) {
		r.rec.status, r.rec.outcome = 0, "canceled" // nothing was sent
		return
	}
	if midErr != nil {
		typ, msg := midErr.Type, midErr.Message
		if typ == "" {
			typ = r.d.midErrorType()
		}
		if msg == "" {
			msg = "fakellm: scripted error"
		}
		st := r.d.errorStatus(typ)
		r.rec.status, r.rec.outcome = st, "error"
		writeError(r.w, r.d, st, typ, midErr.Code, msg)
		return
	}
	// Either disconnect cuts the connection: a JSON body has no clean end
	// short of its whole answer.
	if dc != nil {
		r.rec.status, r.rec.outcome = 0, "disconnect" // cut before the status line
		panic(http.ErrAbortHandler)
	}
	r.rec.chunks, r.rec.outcome = r.p.Chunks-r.first(), "done"
	r.w.Header().Set("Content-Type", "application/json")
	_, _ = r.w.Write(r.d.whole(r))
}

// word is the text of content chunk i: a deterministic lorem ipsum.
func word(i int) string {
	return words[i%len(words)] + " "
}

var words = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do
eiusmod tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis
nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat`)
