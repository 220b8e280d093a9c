package fakellm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the profiles file.
type Config struct {
	// Default is the profile of requests without an X-Fakellm-Profile
	// header. Required; must name a profile.
	Default string `yaml:"default"`
	// Profiles maps names to profiles.
	Profiles map[string]*Profile `yaml:"profiles"`
}

// Profile scripts the timing and the faults of one response.
type Profile struct {
	// Description says what the profile is for.
	Description string `yaml:"description"`
	// Status, when non-zero, answers every request with this HTTP status
	// (400–599) and an error body instead of a stream.
	Status int `yaml:"status"`
	// RetryAfter, with Status, is sent as Retry-After (whole seconds,
	// scaled, at least 1) and retry-after-ms (scaled).
	RetryAfter Duration `yaml:"retry_after"`
	// StatusAfter, with Status, is the wait (scaled) before the error
	// answer: an overloaded upstream takes its time to refuse, and calls
	// started together all reach it before the first refusal comes back.
	StatusAfter Duration `yaml:"status_after"`
	// TTFT is the wait between the response headers and the first content
	// chunk. The headers and the role chunk (OpenAI) or message_start
	// (Anthropic) are sent at once, as vLLM does.
	TTFT Dist `yaml:"ttft"`
	// TTFTKeepalive sends keepalives while waiting for the first chunk.
	TTFTKeepalive Keepalive `yaml:"ttft_keepalive"`
	// Interval is the wait between content chunks.
	Interval Dist `yaml:"interval"`
	// Chunks is the number of content chunks.
	Chunks int `yaml:"chunks"`
	// TokensPerChunk is the output tokens each chunk counts for in usage;
	// default 1.
	TokensPerChunk int `yaml:"tokens_per_chunk"`
	// Usage sends the usage chunk (OpenAI, when the request asked for it
	// with stream_options.include_usage) or usage on message_delta
	// (Anthropic, always). Default true.
	Usage *bool `yaml:"usage"`
	// UsageOnFinish puts the usage on the OpenAI endpoint's finish_reason
	// chunk, whether the request asked for it or not, as Mistral's API
	// does, instead of a chunk of its own.
	UsageOnFinish bool `yaml:"usage_on_finish"`
	// RefuseFields are top-level request fields the OpenAI endpoint
	// answers with a 422, as an API that refuses fields it does not know
	// does (Mistral's: "extra_forbidden", stream_options among them).
	RefuseFields []string `yaml:"refuse_fields"`
	// Silences are pauses after given chunks.
	Silences []Silence `yaml:"silences"`
	// Error sends an error payload mid-stream and ends the response.
	Error *MidError `yaml:"error"`
	// Disconnect drops the response mid-stream without its terminal event.
	Disconnect *Disconnect `yaml:"disconnect"`
	// Continuation scripts the answer to a continuation request (a
	// trailing assistant message): the switch it needs, or a refusal.
	Continuation Continuation `yaml:"continuation"`
}

// Silence is a pause in the stream: the gap after chunk AfterChunk is the
// interval plus Duration.
type Silence struct {
	// AfterChunk is the number of content chunks sent before the silence;
	// 0 is before the first, ahead of the TTFT wait (the first chunk comes
	// after both).
	AfterChunk int `yaml:"after_chunk"`
	// Duration is the length of the silence.
	Duration Dist `yaml:"duration"`
	// Keepalive sends keepalives during the silence.
	Keepalive Keepalive `yaml:"keepalive"`
}

// Keepalive is a keepalive schedule: none when Every is 0.
type Keepalive struct {
	// Every is the interval between keepalives.
	Every Duration `yaml:"every"`
	// Style is "comment" (": keepalive"), "ping" (Anthropic's
	// "event: ping"), or "auto" (default): comment on the OpenAI endpoint,
	// ping on the Anthropic one.
	Style string `yaml:"style"`
}

// MidError is an error payload sent mid-stream. A non-streaming request
// gets it as its answer, when the stream would have sent it, with the
// status the endpoint pairs with its type: 500 on the OpenAI endpoint; on
// the Anthropic endpoint Anthropic's own (529 for "overloaded_error").
type MidError struct {
	// AfterChunk is the number of content chunks sent before the error.
	AfterChunk int `yaml:"after_chunk"`
	// Type is the error type; default "server_error" (OpenAI endpoint) or
	// "overloaded_error" (Anthropic endpoint).
	Type string `yaml:"type"`
	// Code is the OpenAI error code, when set.
	Code string `yaml:"code"`
	// Message is the error message; default "fakellm: scripted error".
	Message string `yaml:"message"`
}

// Disconnect drops the stream.
type Disconnect struct {
	// AfterChunk is the number of content chunks sent before the drop.
	AfterChunk int `yaml:"after_chunk"`
	// Clean ends a stream's HTTP body normally (a clean EOF without [DONE]
	// or message_stop); otherwise the connection is cut mid-body, so the
	// client reads an unexpected EOF. A non-streaming answer is cut either
	// way: a JSON body has no clean end short of the whole answer.
	Clean bool `yaml:"clean"`
}

// Duration is a time.Duration written as "300ms", "2s" or "1m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Dist is a duration distribution: a fixed value, or a lognormal with a
// median and a sigma (of the underlying normal), optionally capped. In YAML
// a bare duration ("300ms") is fixed; a mapping is {fixed: …} or
// {median: …, sigma: …, max: …}.
type Dist struct {
	Fixed  Duration `yaml:"fixed"`
	Median Duration `yaml:"median"`
	Sigma  float64  `yaml:"sigma"`
	Max    Duration `yaml:"max"`
}

// UnmarshalYAML accepts a bare duration or a mapping.
func (d *Dist) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&d.Fixed)
	}
	type plain Dist
	return n.Decode((*plain)(d))
}

// Sample draws one duration.
func (d Dist) Sample(rng *rand.Rand) time.Duration {
	if d.Median <= 0 {
		return time.Duration(d.Fixed)
	}
	v := durationOf(float64(d.Median) * math.Exp(d.Sigma*rng.NormFloat64()))
	if d.Max > 0 && v > time.Duration(d.Max) {
		v = time.Duration(d.Max)
	}
	return v
}

// durationOf converts ns to a Duration, saturating: a heavy tail's draw
// beyond ~292 years converts to a negative Duration otherwise, which no
// cap catches and which waits not at all.
func durationOf(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// addDurations is a + b, saturating at the longest Duration.
func addDurations(a, b time.Duration) time.Duration {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

func (d Dist) validate(key string) error {
	switch {
	case d.Fixed < 0:
		return fmt.Errorf("%s.fixed: %s is negative", key, time.Duration(d.Fixed))
	case d.Median < 0:
		return fmt.Errorf("%s.median: %s is negative", key, time.Duration(d.Median))
	case d.Max < 0:
		return fmt.Errorf("%s.max: %s is negative", key, time.Duration(d.Max))
	case d.Sigma < 0 || math.IsNaN(d.Sigma):
		return fmt.Errorf("%s.sigma: %v must be >= 0", key, d.Sigma)
	case d.Fixed > 0 && d.Median > 0:
		return fmt.Errorf("%s: set fixed (%s) or median (%s), not both", key, time.Duration(d.Fixed), time.Duration(d.Median))
	}
	return nil
}

func (k Keepalive) validate(key string) error {
	switch k.Style {
	case "", "auto", "comment", "ping":
	default:
		return fmt.Errorf("%s.style: %q is not comment, ping or auto", key, k.Style)
	}
	if k.Every < 0 {
		return fmt.Errorf("%s.every: %s is negative", key, time.Duration(k.Every))
	}
	return nil
}

// LoadFile reads and validates a profiles file.
func LoadFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a profiles file. Unknown keys are errors.
func Parse(b []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parse profiles: the file is empty: it needs a default and profiles")
		}
		return nil, fmt.Errorf("parse profiles: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks every profile; messages name the key and the value.
func (c *Config) Validate() error {
	if len(c.Profiles) == 0 {
		return errors.New("profiles: none defined")
	}
	if _, ok := c.Profiles[c.Default]; !ok {
		return fmt.Errorf("default: %q is not a profile (have %s)", c.Default, strings.Join(c.Names(), ", "))
	}
	var errs []error
	for _, name := range c.Names() {
		if err := c.Profiles[name].validate("profiles." + name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Names returns the profile names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (p *Profile) validate(key string) error {
	if p == nil {
		return fmt.Errorf("%s: empty profile", key)
	}
	if p.Status != 0 && (p.Status < 400 || p.Status > 599) {
		return fmt.Errorf("%s.status: %d is not 400-599", key, p.Status)
	}
	if p.RetryAfter < 0 {
		return fmt.Errorf("%s.retry_after: %s is negative", key, time.Duration(p.RetryAfter))
	}
	if p.StatusAfter < 0 {
		return fmt.Errorf("%s.status_after: %s is negative", key, time.Duration(p.StatusAfter))
	}
	if p.StatusAfter > 0 && p.Status == 0 {
		return fmt.Errorf("%s.status_after: %s needs a status", key, time.Duration(p.StatusAfter))
	}
	if p.Chunks < 0 {
		return fmt.Errorf("%s.chunks: %d is negative", key, p.Chunks)
	}
	if p.TokensPerChunk < 0 {
		return fmt.Errorf("%s.tokens_per_chunk: %d is negative", key, p.TokensPerChunk)
	}
	if err := p.TTFT.validate(key + ".ttft"); err != nil {
		return err
	}
	if err := p.Interval.validate(key + ".interval"); err != nil {
		return err
	}
	if err := p.TTFTKeepalive.validate(key + ".ttft_keepalive"); err != nil {
		return err
	}
	for i, s := range p.Silences {
		k := fmt.Sprintf("%s.silences[%d]", key, i)
		if s.AfterChunk < 0 || s.AfterChunk > p.Chunks {
			return fmt.Errorf("%s.after_chunk: %d is outside 0..chunks (%d)", k, s.AfterChunk, p.Chunks)
		}
		if err := s.Duration.validate(k + ".duration"); err != nil {
			return err
		}
		if err := s.Keepalive.validate(k + ".keepalive"); err != nil {
			return err
		}
	}
	if e := p.Error; e != nil && (e.AfterChunk < 0 || e.AfterChunk > p.Chunks) {
		return fmt.Errorf("%s.error.after_chunk: %d is outside 0..chunks (%d)", key, e.AfterChunk, p.Chunks)
	}
	if d := p.Disconnect; d != nil && (d.AfterChunk < 0 || d.AfterChunk > p.Chunks) {
		return fmt.Errorf("%s.disconnect.after_chunk: %d is outside 0..chunks (%d)", key, d.AfterChunk, p.Chunks)
	}
	if p.UsageOnFinish && !p.usage() {
		return fmt.Errorf("%s.usage_on_finish: needs usage, which is false", key)
	}
	for i, f := range p.RefuseFields {
		k := fmt.Sprintf("%s.refuse_fields[%d]", key, i)
		if f == "" || strings.Contains(f, ".") {
			// The request is matched on its top-level keys alone.
			hint := ""
			if top, _, ok := strings.Cut(f, "."); ok && top != "" {
				hint = fmt.Sprintf(" (refuse %s)", top)
			}
			return fmt.Errorf("%s: %q is not a top-level request field%s", k, f, hint)
		}
		if slices.Index(p.RefuseFields, f) < i {
			return fmt.Errorf("%s: %q is listed twice", k, f)
		}
	}
	return p.Continuation.validate(key + ".continuation")
}

func (p *Profile) usage() bool { return p.Usage == nil || *p.Usage }

func (p *Profile) tokensPerChunk() int {
	if p.TokensPerChunk <= 0 {
		return 1
	}
	return p.TokensPerChunk
}
