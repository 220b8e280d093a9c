package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/streamwatch/streamwatch/internal/testbed/stack"
	"github.com/streamwatch/streamwatch/internal/testbed/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listening reads the address fakellm announces, and fails at once — not
// after its timeout — when fakellm exits first (a bad -profiles file; when
// the demo chose the port, another program holding it went unnoticed).
func TestListening(t *testing.T) {
	for _, tc := range []struct {
		name, script, want, err string
	}{
		{"announced", "echo 'fakellm listening on http://127.0.0.1:5'; sleep 30", "127.0.0.1:5", ""},
		{"exited", "echo 'bind: address already in use' >&2; exit 1", "", "exited before it listened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := stack.Start(t.Context(), t.TempDir(), "fakellm", "/bin/sh", []string{"-c", tc.script}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Stop()
			start := time.Now()
			addr, err := listening(t.Context(), p, 10*time.Second)
			if addr != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("listening = %q, %v; want %q, %q", addr, err, tc.want, tc.err)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %v: waited for the timeout", time.Since(start))
			}
		})
	}
}

// A report with nothing measured says n/a, never NaN.
func TestReportWithoutFigures(t *testing.T) {
	var buf bytes.Buffer
	printCollector(&buf, families{}, workload.Totals(nil))
	_, share, _ := strings.Cut(buf.String(), "stall share of generation")
	share, _, _ = strings.Cut(share, "\n")
	if strings.Contains(buf.String(), "NaN") || strings.TrimSpace(share) != "n/a" {
		t.Fatalf("report:\n%s", buf.String())
	}
}

// -otlp takes host:port where a collector listens, and refuses, before
// the workload's 31 s, a URL, a bare name and an address where nothing
// listens.
func TestCheckOTLP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln2.Addr().String()
	ln2.Close()
	defer ln.Close()
	for addr, want := range map[string]string{
		open:             "",
		"http://" + open: "want host:port",
		"127.0.0.1":      "want host:port",
		open + "/v1":     "want host:port",
		closed:           "no collector there",
	} {
		err := checkOTLP(addr)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("checkOTLP(%q) = %v, want %q", addr, err, want)
		}
	}
}

// failingExporter fails every export.
type failingExporter struct{ sdktrace.SpanExporter }

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("connection refused")
}

// The spans an exporter failed to send are counted, so that the demo
// reports them rather than "sent".
func TestCountingExporter(t *testing.T) {
	exp := &countingExporter{SpanExporter: failingExporter{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	for range 3 {
		_, span := tp.Tracer("t").Start(context.Background(), "s")
		span.End()
	}
	if got := exp.failed.Load(); got != 3 {
		t.Fatalf("failed %d, want 3", got)
	}
}
