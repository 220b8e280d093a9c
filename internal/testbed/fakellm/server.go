package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ProfileHeader selects the profile of one request. A path prefix
// /p/NAME (a base URL of http://host/p/NAME/v1) selects profile NAME and
// wins over the header.
const ProfileHeader = "X-Fakellm-Profile"

// SeedHeader, when set to an unsigned integer, seeds the request's random
// draws instead of the server seed and its request counter, so a single
// request repeats exactly whatever else runs concurrently.
const SeedHeader = "X-Fakellm-Seed"

// Options configures a Server.
type Options struct {
	// Config holds the profiles and the default. Required.
	Config *Config
	// Scale multiplies every scripted duration: 0.01 runs 100× faster.
	// Default 1.
	Scale float64
	// Seed seeds the random draws (TTFT, intervals, silences); request n
	// of the server draws from (Seed, n).
	Seed uint64
	// Logger gets one line per request; nil logs nothing.
	Logger *slog.Logger
}

// Server is the fakellm upstream: an http.Handler serving POST
// /v1/chat/completions (OpenAI-compatible, streaming or not) and POST
// /v1/messages (Anthropic, streaming or not) with scripted timing. It is
// safe for concurrent use. Handlers stop when the request's context ends.
type Server struct {
	cfg   *Config
	scale float64
	seed  uint64
	log   *slog.Logger
	reqs  atomic.Uint64
	ids   atomic.Uint64
}

// New returns a Server. It fails when the config does not validate.
func New(o Options) (*Server, error) {
	if o.Config == nil {
		return nil, fmt.Errorf("fakellm: no config")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Scale <= 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0) {
		o.Scale = 1
	}
	return &Server{cfg: o.Config, scale: o.Scale, seed: o.Seed, log: o.Logger}, nil
}

// ServeHTTP routes the two endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, profile := r.URL.Path, r.Header.Get(ProfileHeader)
	if rest, ok := strings.CutPrefix(path, "/p/"); ok {
		// A base URL of http://host/p/NAME/v1 picks profile NAME, for
		// clients that cannot set a header per route.
		name, tail, _ := strings.Cut(rest, "/")
		profile, path = name, "/"+tail
	}
	var d dialect
	switch strings.TrimSuffix(path, "/") {
	case "/v1/chat/completions", "/chat/completions":
		d = openaiDialect{}
	case "/v1/messages":
		d = anthropicDialect{}
	default:
		http.Error(w, `{"error":{"type":"not_found_error","message":"fakellm serves /v1/chat/completions and /v1/messages"}}`, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, `{"error":{"type":"invalid_request_error","message":"use POST"}}`, http.StatusMethodNotAllowed)
		return
	}
	start := time.Now()
	rec := &record{profile: profile, status: http.StatusOK, continued: -1}
	if rec.profile == "" {
		rec.profile = s.cfg.Default
	}
	defer func() {
		// A deliberate cut (http.ErrAbortHandler) is logged, then re-raised.
		p := recover()
		s.logRequest(r, rec, time.Since(start))
		if p != nil {
			panic(p)
		}
	}()
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		rec.status, rec.outcome = http.StatusBadRequest, "bad_request"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", "fakellm: body is not JSON: "+err.Error())
		return
	}
	rec.stream, rec.model = req.Stream, req.Model
	p, ok := s.cfg.Profiles[rec.profile]
	if !ok {
		rec.status, rec.outcome = http.StatusBadRequest, "unknown_profile"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("fakellm: unknown profile %q (have %s)", rec.profile, strings.Join(s.cfg.Names(), ", ")))
		return
	}
	run := &run{
		srv:   s,
		p:     p,
		d:     d,
		w:     w,
		ctx:   r.Context(),
		rng:   s.rng(r),
		req:   req,
		rec:   rec,
		id:    s.ids.Add(1),
		model: req.Model,
	}
	if run.model == "" {
		run.model = "fakellm"
	}
	if p.Status != 0 {
		run.fail()
		return
	}
	cont, err := continuation(&req, d, p)
	if err != nil {
		rec.status, rec.outcome = http.StatusBadRequest, "bad_continuation"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", "fakellm: "+err.Error())
		return
	}
	if cont != nil {
		rec.continued = cont.from
		if p.Continuation.Status != 0 {
			run.refuse()
			return
		}
		run.cont = cont
	}
	if req.Stream {
		run.stream()
		return
	}
	run.whole()
}

func (s *Server) rng(r *http.Request) *rand.Rand {
	n := s.reqs.Add(1)
	if v, err := strconv.ParseUint(r.Header.Get(SeedHeader), 10, 64); err == nil {
		return rand.New(rand.NewPCG(v, 0))
	}
	return rand.New(rand.NewPCG(s.seed, n))
}

// record is what the request's log line says.
type record struct {
	profile, model, outcome string
	stream                  bool
	status, chunks          int
	keepalives              int
	continued               int // the first chunk of a continuation; -1 for a fresh answer
}

func (s *Server) logRequest(r *http.Request, rec *record, d time.Duration) {
	if s.log == nil {
		return
	}
	s.log.Info("request",
		"method", r.Method, "path", r.URL.Path, "profile", rec.profile, "model", rec.model,
		"stream", rec.stream, "status", rec.status, "chunks", rec.chunks,
		"keepalives", rec.keepalives, "continued_from", rec.continued, "outcome", rec.outcome,
		"duration", d.Round(time.Millisecond))
}

// request is the part of a request body fakellm reads.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Messages are read for a continuation: a trailing assistant message.
	Messages []message `json:"messages"`
	// ContinueFinalMessage and AddGenerationPrompt are vLLM's and
	// SGLang's switch to continue the trailing assistant message.
	ContinueFinalMessage bool  `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

func writeError(w http.ResponseWriter, d dialect, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(d.errorBody(typ, code, msg))
}

// run is one request being served.
type run struct {
	srv   *Server
	p     *Profile
	d     dialect
	w     http.ResponseWriter
	ctx   context.Context
	rng   *rand.Rand
	req   request
	rec   *record
	id    uint64
	model string
	due   time.Time // when the scripted wait in progress ends
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
	return time.Duration(float64(d) * r.srv.scale)
}

// fail answers with the profile's status.
func (r *run) fail() {
	p := r.p
	r.rec.status, r.rec.outcome = p.Status, "status"
	if ra := r.scaled(time.Duration(p.RetryAfter)); ra > 0 {
		r.w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ra.Seconds())))))
		r.w.Header().Set("Retry-After-Ms", strconv.FormatInt(max(1, ra.Milliseconds()), 10))
	}
	typ := r.d.statusType(p.Status)
	writeError(r.w, r.d, p.Status, typ, typ, fmt.Sprintf("fakellm: scripted %d %s", p.Status, http.StatusText(p.Status)))
}

// sleep waits d (scaled) and, when ka.Every > 0, sends keepalives every
// ka.Every (scaled) meanwhile. It reports false when the request ended.
//
// Waits run against the script's own clock (r.due), not from the moment
// sleep is called, so timer and write overheads do not add up over a long
// stream: chunk n goes out at its scripted offset, late by one wake-up at
// most.
func (r *run) sleep(d time.Duration, ka Keepalive) bool {
	if r.due.IsZero() {
		r.due = time.Now()
	}
	r.due = r.due.Add(r.scaled(d))
	deadline := time.NewTimer(time.Until(r.due))
	defer deadline.Stop()
	var tick <-chan time.Time
	every := r.scaled(time.Duration(ka.Every))
	if ka.Every > 0 && every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	sent := 0
	for {
		select {
		case <-r.ctx.Done():
			return false
		case <-deadline.C:
			// A server running behind its script (a loaded machine, a
			// small scale) reaches the deadline before the first tick: a
			// silence the script gives keepalives still shows one.
			if sent == 0 && tick != nil && r.scaled(d) >= every {
				r.keepalive(ka)
			}
			return true
		case <-tick:
			r.keepalive(ka)
			sent++
		}
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
	if r.cont == nil && !r.boundary(0) {
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
		if !r.boundary(i + 1) {
			return
		}
	}
	r.d.finish(r)
	r.rec.outcome = "done"
}

// whole serves a non-streaming request: it waits as long as the stream
// would have taken, then answers with the whole message.
func (r *run) whole() {
	total := r.p.TTFT.Sample(r.rng)
	for i := r.first() + 1; i < r.p.Chunks; i++ {
		total += r.p.Interval.Sample(r.rng)
	}
	for _, s := range r.p.Silences {
		if r.cont == nil || s.AfterChunk > r.first() {
			total += s.Duration.Sample(r.rng)
		}
	}
	if !r.sleep(total, Keepalive{}) {
		r.rec.outcome = "canceled"
		return
	}
	if r.p.Error != nil {
		r.rec.status, r.rec.outcome = http.StatusInternalServerError, "error"
		writeError(r.w, r.d, http.StatusInternalServerError, r.d.midErrorType(), "", "fakellm: scripted error")
		return
	}
	if r.p.Disconnect != nil {
		r.rec.outcome = "disconnect"
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
