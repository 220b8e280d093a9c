package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// exportMethod is the OTLP/gRPC traces method.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// MaxDuration bounds every Send.
const MaxDuration = 10 * time.Minute

// Options configure Send.
type Options struct {
	// Targets are OTLP/gRPC host:port addresses, loopback only. Request
	// number n (counted over the whole run) goes to Targets[n mod len], so
	// a test knows what each target was sent.
	Targets []string
	// Requests are sent in order, round and round: request n is
	// Requests[n mod len].
	Requests []Request
	// Senders are the concurrent senders, each with its own connection to
	// every target. Default 1.
	Senders int
	// Duration stops the run after this long (at most MaxDuration).
	Duration time.Duration
	// MaxRequests stops the run after this many requests (0: no count
	// bound, then Duration must be set).
	MaxRequests int64
	// Rate, when positive, sends at most this many requests per second
	// (open loop); otherwise each sender sends its next request as soon as
	// the last is acknowledged (closed loop).
	Rate float64
	// Timeout bounds one request. Default 30 s.
	Timeout time.Duration
}

// Result is what a Send achieved.
type Result struct {
	// Sent is what the targets acknowledged, in total and per target.
	Sent      Counts
	PerTarget []Counts
	// Refused counts requests a target refused with a retryable status
	// (the memory limiter's, or a full queue); they are not in Sent.
	Refused int64
	// Rejected counts spans a target acknowledged as rejected (OTLP partial
	// success); they are still in Sent.
	Rejected int64
	Elapsed  time.Duration
}

// CheckLoopback returns an error unless addr is a loopback host:port.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("loadgen: target %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("loadgen: target %q is not a loopback address; load is only sent to this machine", addr)
}

// Send sends opts.Requests to opts.Targets until a bound is reached or ctx
// ends, and returns what was acknowledged. It fails on the first request
// that fails for another reason than a refusal.
func Send(ctx context.Context, opts Options) (Result, error) {
	if len(opts.Targets) == 0 || len(opts.Requests) == 0 {
		return Result{}, errors.New("loadgen: no target or no request")
	}
	for _, t := range opts.Targets {
		if err := CheckLoopback(t); err != nil {
			return Result{}, err
		}
	}
	if opts.Duration <= 0 && opts.MaxRequests <= 0 {
		return Result{}, errors.New("loadgen: set Duration or MaxRequests")
	}
	if opts.Duration <= 0 || opts.Duration > MaxDuration {
		opts.Duration = MaxDuration
	}
	if opts.Senders < 1 {
		opts.Senders = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()

	conns := make([][]*grpc.ClientConn, opts.Senders)
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				c.Close()
			}
		}
	}()
	for s := range conns {
		for _, t := range opts.Targets {
			c, err := grpc.NewClient("passthrough:///"+t, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return Result{}, err
			}
			conns[s] = append(conns[s], c)
		}
	}

	var tokens <-chan struct{}
	if opts.Rate > 0 {
		tokens = pace(ctx, opts.Rate)
	}
	r := run{opts: opts, per: make([]Counts, len(opts.Targets))}
	start := time.Now()
	var wg sync.WaitGroup
	for s := range opts.Senders {
		wg.Go(func() { r.sender(ctx, conns[s], tokens) })
	}
	wg.Wait()
	res := Result{PerTarget: r.per, Refused: r.refused.Load(), Rejected: r.rejected.Load(), Elapsed: time.Since(start)}
	for _, c := range r.per {
		res.Sent.Add(c)
	}
	return res, r.err
}

// pace yields rate tokens a second until ctx ends.
func pace(ctx context.Context, rate float64) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		start := time.Now()
		for n := 0; ; n++ {
			due := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(due)):
			}
			select {
			case <-ctx.Done():
				return
			case ch <- struct{}{}:
			}
		}
	}()
	return ch
}

// run is the shared state of one Send.
type run struct {
	opts     Options
	next     atomic.Int64
	refused  atomic.Int64
	rejected atomic.Int64

	mu  sync.Mutex
	per []Counts
	err error
}

func (r *run) sender(ctx context.Context, conns []*grpc.ClientConn, tokens <-chan struct{}) {
	var resp []byte
	for ctx.Err() == nil {
		if tokens != nil {
			select {
			case <-ctx.Done():
				return
			case <-tokens:
			}
		}
		n := r.next.Add(1) - 1
		if r.opts.MaxRequests > 0 && n >= r.opts.MaxRequests {
			return
		}
		req := r.opts.Requests[n%int64(len(r.opts.Requests))]
		target := int(n % int64(len(conns)))
		rctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
		err := conns[target].Invoke(rctx, exportMethod, req.Body, &resp, grpc.ForceCodec(rawCodec{}))
		runEnded := ctx.Err() != nil
		if dl, ok := rctx.Deadline(); ok && !runEnded {
			// The server enforces the deadline too, and may answer a hair
			// before our own timer fires: the run's deadline is the
			// request's when it comes first.
			end, _ := ctx.Deadline()
			runEnded = !end.After(dl) && time.Until(end) < time.Second
		}
		cancel()
		if err != nil {
			switch status.Code(err) {
			case codes.ResourceExhausted, codes.Unavailable:
				r.refused.Add(1)
				continue
			case codes.Canceled, codes.DeadlineExceeded:
				if runEnded {
					return // the run's own end, not a failure
				}
			}
			r.fail(fmt.Errorf("loadgen: request %d to %s: %w", n, r.opts.Targets[target], err))
			return
		}
		er := ptraceotlp.NewExportResponse()
		if err := er.UnmarshalProto(resp); err == nil {
			r.rejected.Add(er.PartialSuccess().RejectedSpans())
		}
		r.mu.Lock()
		r.per[target].Add(req.Counts)
		r.mu.Unlock()
	}
}

func (r *run) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// rawCodec sends pre-marshalled requests as they are and keeps responses
// as bytes, so the generator spends no CPU marshalling on a machine it
// shares with the collector it measures.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("loadgen: raw codec cannot marshal %T", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("loadgen: raw codec cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// Name is "proto": the bytes are protobuf, and the server picks its codec
// by this name.
func (rawCodec) Name() string { return "proto" }
