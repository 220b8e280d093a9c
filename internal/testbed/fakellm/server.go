package fakellm

import (
	"encoding/json"
	"errors"
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
	start := time.Now()
	path, profile := r.URL.Path, r.Header.Get(ProfileHeader)
	if rest, ok := strings.CutPrefix(path, "/p/"); ok {
		// A base URL of http://host/p/NAME/v1 picks profile NAME, for
		// clients that cannot set a header per route.
		name, tail, _ := strings.Cut(rest, "/")
		profile, path = name, "/"+tail
	}
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
	var d dialect
	switch strings.TrimSuffix(path, "/") {
	case "/v1/chat/completions", "/chat/completions":
		d = openaiDialect{}
	case "/v1/messages":
		d = anthropicDialect{}
	default:
		rec.status, rec.outcome = http.StatusNotFound, "not_found"
		writeError(w, openaiDialect{}, http.StatusNotFound, "not_found_error", "", "fakellm serves /v1/chat/completions and /v1/messages")
		return
	}
	if r.Method != http.MethodPost {
		rec.status, rec.outcome = http.StatusMethodNotAllowed, "method_not_allowed"
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, d, http.StatusMethodNotAllowed, "invalid_request_error", "", "use POST")
		return
	}
	raw, err := readObject(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		status, typ := http.StatusBadRequest, "invalid_request_error"
		rec.outcome = "bad_request"
		if errors.As(err, new(*http.MaxBytesError)) {
			// As the APIs do: 413, which Anthropic's types request_too_large.
			status, rec.outcome = http.StatusRequestEntityTooLarge, "too_large"
			if _, ok := d.(anthropicDialect); ok {
				typ = "request_too_large"
			}
		}
		rec.status = status
		writeError(w, d, status, typ, "", "fakellm: "+err.Error())
		return
	}
	var req request
	// A field of the wrong type is answered after a profile's own status,
	// as a malformed message is (request.check).
	typeErr := json.Unmarshal(raw, &req)
	rec.stream, rec.model = req.Stream, req.Model
	p, ok := s.cfg.Profiles[rec.profile]
	if !ok {
		rec.status, rec.outcome = http.StatusBadRequest, "unknown_profile"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("fakellm: unknown profile %q (have %s)", rec.profile, strings.Join(s.cfg.Names(), ", ")))
		return
	}
	run := &run{
		created: start.Unix(),
		srv:     s,
		p:       p,
		d:       d,
		w:       w,
		ctx:     r.Context(),
		rng:     s.rng(r),
		req:     req,
		rec:     rec,
		id:      s.ids.Add(1),
		model:   req.Model,
	}
	if run.model == "" {
		run.model = "fakellm"
	}
	if p.Status != 0 {
		run.fail()
		return
	}
	// After a profile's own status, which plays an upstream that answers
	// so whatever it is sent.
	if typeErr != nil {
		rec.status, rec.outcome = http.StatusBadRequest, "bad_request"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", "fakellm: a field of the request has the wrong type: "+typeErr.Error())
		return
	}
	if err := req.check(); err != nil {
		rec.status, rec.outcome = http.StatusBadRequest, "bad_request"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", "fakellm: "+err.Error())
		return
	}
	if field := refused(raw, d, p); field != "" {
		rec.status, rec.outcome = http.StatusUnprocessableEntity, "refused_field"
		writeError(w, d, http.StatusUnprocessableEntity, "invalid_request_error", "extra_forbidden",
			"fakellm: body."+field+": Extra inputs are not permitted")
		return
	}
	asks, err := asksContinuation(&req, d, p)
	if err == nil && asks {
		// A model that refuses prefill refuses any, whatever its text:
		// the refusal comes before the text is read.
		if p.Continuation.Status != 0 {
			run.refuse()
			return
		}
		run.cont, err = continuation(&req, p)
		if _, isOpenAI := d.(openaiDialect); err == nil && isOpenAI && p.Continuation.Echo {
			run.cont.echo(p.Chunks)
		}
	}
	if err != nil {
		rec.status, rec.outcome = http.StatusBadRequest, "bad_continuation"
		writeError(w, d, http.StatusBadRequest, "invalid_request_error", "", "fakellm: "+err.Error())
		return
	}
	if run.cont != nil {
		rec.continued = run.cont.from
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
	// Messages are checked (request.check) and read for a continuation:
	// a trailing assistant message.
	Messages []message `json:"messages"`
	// ContinueFinalMessage and AddGenerationPrompt are vLLM's and
	// SGLang's switch to continue the trailing assistant message.
	ContinueFinalMessage bool  `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

// check refuses what OpenAI's and Anthropic's APIs refuse before they
// generate anything: no messages, or a message without a role (null
// included). A client that loses its messages — a continuation built
// wrong — then fails against fakellm as it would against them.
func (r *request) check() error {
	if len(r.Messages) == 0 {
		return errors.New(`"messages" is missing or empty`)
	}
	for i, m := range r.Messages {
		if m.Role == "" {
			return fmt.Errorf("messages[%d] has no role", i)
		}
	}
	return nil
}

// refused returns the first of the profile's RefuseFields the request
// body has at its top level, on the OpenAI endpoint; "" when none.
func refused(raw json.RawMessage, d dialect, p *Profile) string {
	if _, isOpenAI := d.(openaiDialect); !isOpenAI || len(p.RefuseFields) == 0 {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return ""
	}
	for _, f := range p.RefuseFields {
		if _, ok := fields[f]; ok {
			return f
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, d dialect, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(d.errorBody(typ, code, msg))
}

// maxBody is the largest request body served, 8 MiB: far more than a test
// sends, and a bound on what a runaway client makes the server hold.
const maxBody = 8 << 20

// readObject reads a body that is one JSON object and nothing
// more, as an API server would: null, an array, or a second value after
// the object is an error, not a request with every field unset.
func readObject(body io.Reader) (json.RawMessage, error) {
	const notObject = "body is not one JSON object: "
	dec := json.NewDecoder(body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if e := tooLarge(err); e != nil {
			return nil, e
		}
		return nil, errors.New(notObject + err.Error())
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf(notObject+"it is %s", raw[:min(len(raw), 20)])
	}
	if _, err := dec.Token(); err != io.EOF {
		// What follows the object may be what runs past the limit.
		if e := tooLarge(err); e != nil {
			return nil, e
		}
		return nil, errors.New(notObject + "more follows the object")
	}
	return raw, nil
}

// tooLarge returns the error of a body past its limit when err is
// http.MaxBytesReader's, nil otherwise.
func tooLarge(err error) error {
	var mb *http.MaxBytesError
	if !errors.As(err, &mb) {
		return nil
	}
	return fmt.Errorf("the body is larger than %d bytes: %w", mb.Limit, err)
}
