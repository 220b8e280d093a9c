package streamwatchconnector

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/confmap"

	"github.com/streamwatch/streamwatch/internal/stallthreshold"
	"github.com/streamwatch/streamwatch/semconv"
)

// Config is the configuration of the streamwatch connector.
type Config struct {
	// Interval is how often the cumulative metrics are sent downstream.
	// Default 15s. A flush costs one copy of at most max_series data points
	// per metric, so a shorter interval buys freshness with CPU and a
	// longer one delays every panel. Scraped, the metrics need a scrape
	// more often than this, or a flush (a new series' leading zero, an
	// exemplar) can go unseen. At least MinInterval (100ms) and written with
	// a unit: a bare number would be nanoseconds.
	Interval time.Duration `mapstructure:"interval"`

	// MaxSeries caps the series (attribute sets) each metric keeps. Past it,
	// measurements of new attribute sets go to one overflow series per metric
	// carrying only the attribute otel.metric.overflow=true, and are counted in
	// the connector's own telemetry (otelcol_connector_streamwatch_overflow).
	// Series are cumulative and never expire, so this bounds memory. Default
	// 1000. Must be at least 1.
	MaxSeries int `mapstructure:"max_series"`

	// LeadingZero sends every new series first at zero (a histogram with
	// no observations and no exemplars), and what it counts from the next
	// flush on. Prometheus's rate() and increase() count only what a series
	// gains after its first sample, so a series that first appears holding
	// its counts would be in no rate panel or alert: a route's first
	// ejection, the first stall timeout of a model, a new model's first
	// calls, all of a collector's first interval after a (re)start. The
	// cost: a new series' counts arrive one interval later, and a crash in
	// that interval loses them. It works where the backend sees every
	// flush: pushed (remote write, OTLP) it does; scraped, the scrapes must
	// come more often than Interval. A new series' first exemplars wait
	// with its counts. The last flush of a stopping collector sends every
	// count. Default true.
	LeadingZero bool `mapstructure:"leading_zero"`

	// Exemplars configures the exemplars attached to histogram data points.
	Exemplars ExemplarsConfig `mapstructure:"exemplars"`

	// StallThreshold is the threshold T used only for spans the streamwatch
	// processor did not derive (no streamwatch.derivation attribute) but
	// that still carry their raw chunk timeline: the connector then derives
	// the figures itself on the processor's path (internal/timeline). Keep
	// it equal to the processor's stall_threshold. Default 2s, or
	// STREAM__STALL_THRESHOLD_MS milliseconds when that variable is set. The
	// processor's rule applies (internal/stallthreshold): at least 1µs and a
	// whole number of microseconds, and a value that is not a duration is
	// rejected with an error naming STREAM__STALL_THRESHOLD_MS, which the
	// shipped collector config reads it from.
	StallThreshold time.Duration `mapstructure:"stall_threshold"`
	// thresholdEnv: STREAM__STALL_THRESHOLD_MS could not be used for the
	// default; Validate reports it unless stall_threshold is set.
	thresholdEnv stallthreshold.EnvError

	// Dimensions are extra attribute keys added to every metric of a span
	// that has them, looked up on the span, then on its resource (values
	// recorded as strings; keys on neither are left out). Each adds
	// cardinality, bounded by max_series. Default none. A dimension may
	// not repeat, be empty or other than UTF-8, name an attribute the
	// connector sets itself or one that holds prompt or answer text
	// (gen_ai.input.messages, gen_ai.prompt.*, …: see contentKeys), or
	// become the same Prometheus label (every character other than a
	// letter, digit or '_' turned into '_') as one of those or as le,
	// quantile, job, instance, otel_scope_* or __*, or a label of
	// underscores only: the Prometheus exporter drops a series with a
	// label twice, and a metric with an invalid label.
	Dimensions []string `mapstructure:"dimensions"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ExemplarsConfig configures exemplars.
type ExemplarsConfig struct {
	// MaxPerDataPoint is the number of exemplars (trace and span id) each
	// histogram data point keeps per flush interval; the first ones win and
	// the set is cleared at every flush (but a new series' leading zero:
	// its first two intervals share one set). 0 disables exemplars.
	// Default 5.
	MaxPerDataPoint int `mapstructure:"max_per_data_point"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ confmap.Validator   = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// builtin are the attribute keys the connector sets itself; a dimension
// may not shadow them.
var builtin = map[string]bool{
	string(semconv.GenAIProviderName):   true,
	string(semconv.GenAIRequestModel):   true,
	string(semconv.Route):               true,
	string(semconv.AttemptOutcome):      true,
	string(semconv.AttemptTrigger):      true,
	string(semconv.Outcome):             true,
	string(semconv.Stalled):             true,
	string(semconv.Derivation):          true,
	string(semconv.EventEjectionReason): true,
	string(semconv.GenAIOperationName):  true, // on the gen_ai.client.* metrics
	string(semconv.ErrorType):           true, // on gen_ai.client.operation.duration
	semconv.MetricOverflow:              true,
}

// Unmarshal decodes the configuration; a stall_threshold that is not a
// duration is reported with where it most likely came from, and an
// interval without a unit (interval: 15, or the shipped config's
// STREAMWATCH_METRICS_INTERVAL=15) is rejected instead of becoming 15ns,
// and a count with a fraction (max_series: 2.5) instead of being cut to a
// whole number. The error names every invalid key (stallthreshold.Unmarshal).
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	c.thresholdEnv.Clear(conf)
	return stallthreshold.Unmarshal(conf, c, rawChecks)
}

// rawChecks are the keys whose raw values Unmarshal checks: every count
// and duration of Config (TestConfigRawChecksCoverFields).
var rawChecks = stallthreshold.RawChecks{
	Durations: []string{"interval"},
	Counts:    []string{"max_series", "exemplars::max_per_data_point"},
}

// reservedLabels are the Prometheus label names the exporter or Prometheus
// itself puts on every series; a dimension translating to one would give a
// series the same label twice, which the Prometheus exporter cannot
// convert and drops.
var reservedLabels = map[string]bool{"le": true, "quantile": true, "job": true, "instance": true}

// contentKeys and contentPrefixes are the span attributes that hold the
// prompt, the answer, a tool call's arguments or retrieved documents, as
// instrumentations record them when their content capture is on: the GenAI
// conventions' (gen_ai.input.messages and its kin), their older
// gen_ai.prompt and gen_ai.completion (indexed, gen_ai.prompt.0.content, in
// OpenLLMetry, as are its llm.prompts and traceloop.entity.input),
// OpenInference's and Langfuse's. As a dimension, such a text would be a
// metric label on every series of the span: never a label, and unbounded
// cardinality.
var (
	contentKeys = map[string]bool{
		"gen_ai.input.messages": true, "gen_ai.output.messages": true, "gen_ai.system_instructions": true,
		"gen_ai.tool.call.arguments": true, "gen_ai.tool.call.result": true,
		"gen_ai.prompt": true, "gen_ai.completion": true,
		"input.value": true, "output.value": true, "message.content": true,
		"traceloop.entity.input": true, "traceloop.entity.output": true,
		"langfuse.observation.input": true, "langfuse.observation.output": true,
	}
	contentPrefixes = []string{
		"gen_ai.prompt.", "gen_ai.completion.",
		"llm.prompts", "llm.completions", "llm.input_messages", "llm.output_messages",
		"llm.prompt_template.variables", "retrieval.documents",
	}
)

// isContent reports whether key is one of contentKeys or under one of
// contentPrefixes.
func isContent(key string) bool {
	if contentKeys[key] {
		return true
	}
	for _, p := range contentPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// promLabel is the Prometheus label a key becomes, as the exporter's
// translation (UnderscoreEscapingWithSuffixes) makes it: every character
// that is not an ASCII letter, a digit or '_' turned into '_', and "key_"
// put before a leading digit.
func promLabel(k string) string {
	l := strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, k)
	if l != "" && l[0] >= '0' && l[0] <= '9' {
		l = "key_" + l
	}
	return l
}

// MinInterval is the shortest flush interval: shorter (a "15us" meant as
// "15s") would copy every series all the time and burn a core.
const MinInterval = 100 * time.Millisecond

// Validate checks the configuration and reports every invalid field.
func (c *Config) Validate() error {
	errs := []error{c.thresholdEnv.Err()}
	if c.Interval < MinInterval {
		errs = append(errs, fmt.Errorf("interval must be at least %s (each flush copies every series), got %s", MinInterval, c.Interval))
	}
	if c.MaxSeries < 1 {
		errs = append(errs, fmt.Errorf("max_series must be at least 1, got %d", c.MaxSeries))
	}
	if c.Exemplars.MaxPerDataPoint < 0 {
		errs = append(errs, fmt.Errorf("exemplars::max_per_data_point must not be negative, got %d", c.Exemplars.MaxPerDataPoint))
	}
	if err := stallthreshold.Check(c.StallThreshold); err != nil {
		errs = append(errs, err)
	}
	// labels maps each Prometheus label name taken to the key it comes from.
	labels := map[string]string{}
	for k := range builtin {
		labels[promLabel(k)] = k
	}
	for i, d := range c.Dimensions {
		l := promLabel(d)
		switch {
		case d == "":
			errs = append(errs, fmt.Errorf("dimensions[%d] must not be empty", i))
		case !utf8.ValidString(d):
			// It would be a label key, which no exporter can send.
			errs = append(errs, fmt.Errorf("dimensions[%d] %q is not valid UTF-8", i, d))
		case strings.Trim(l, "_") == "":
			// The exporter refuses such a label and drops the metric.
			errs = append(errs, fmt.Errorf("dimensions[%d] %q would be the Prometheus label %s, which is not a valid label name", i, d, l))
		case builtin[d]:
			errs = append(errs, fmt.Errorf("dimensions[%d] %q is already an attribute of the connector's metrics", i, d))
		case isContent(d):
			errs = append(errs, fmt.Errorf("dimensions[%d] %q holds prompt or answer text, which no metric label may carry", i, d))
		case labels[l] == d:
			errs = append(errs, fmt.Errorf("dimensions[%d] %q is listed twice", i, d))
		case labels[l] != "":
			errs = append(errs, fmt.Errorf("dimensions[%d] %q would be the Prometheus label %s, as %q is", i, d, l, labels[l]))
		case reservedLabels[l] || strings.HasPrefix(l, "otel_scope_") || strings.HasPrefix(l, "__"):
			errs = append(errs, fmt.Errorf("dimensions[%d] %q would be the Prometheus label %s, which the exporter or Prometheus sets itself", i, d, l))
		default:
			labels[l] = d
		}
	}
	return errors.Join(errs...)
}
