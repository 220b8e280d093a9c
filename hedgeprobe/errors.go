package hedgeprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors, for errors.Is.
var (
	// ErrTimeout matches every TimeoutError.
	ErrTimeout = errors.New("hedgeprobe: timeout")
	// ErrTTFTTimeout matches a TimeoutError of kind TimeoutTTFT.
	ErrTTFTTimeout = errors.New("hedgeprobe: ttft timeout")
	// ErrStallTimeout matches a TimeoutError of kind TimeoutStall.
	ErrStallTimeout = errors.New("hedgeprobe: stall timeout")
	// ErrNoRoutes is the error of a Stream given no route.
	ErrNoRoutes = errors.New("hedgeprobe: no routes")
	// ErrInvalidRoute is wrapped by the error of a Stream given a route
	// without a Name or an Open function, or with a Name, Provider or
	// Model that is not valid UTF-8.
	ErrInvalidRoute = errors.New("hedgeprobe: invalid route")
	// ErrClassifierPanic is wrapped by the error of a call whose
	// classifier panicked.
	ErrClassifierPanic = errors.New("hedgeprobe: classifier panicked")
	// ErrOpenPanic is wrapped by the error of an attempt whose Route.Open
	// panicked; it is fatal.
	ErrOpenPanic = errors.New("hedgeprobe: route open panicked")
	// ErrNilSource is the error of an attempt whose Open returned neither
	// a Source nor an error; it is fatal.
	ErrNilSource = errors.New("hedgeprobe: route open returned a nil source")
	// ErrSourcePanic is wrapped by the error of an attempt whose Source
	// panicked in Next, Current or Err, on its reading goroutine or in
	// the caller's Next after commit, or whose error (from Source.Err or
	// Route.Open) panics in its own methods, as a typed nil pointer
	// returned as an error does; it is fatal. (A panic in Close is
	// ignored, like its error.)
	ErrSourcePanic = errors.New("hedgeprobe: source panicked")
	// ErrExtractorPanic is wrapped by the error of a call whose Items
	// function panicked (OutputTokens, InputTokens, ResponseModel,
	// ResponseID, FinishReasons, Text, Relabel, RelabelAfter, Follows or
	// Opening; Classify has ErrClassifierPanic); it is fatal.
	ErrExtractorPanic = errors.New("hedgeprobe: an Items function panicked")
	// ErrCannotContinue is wrapped by the error Route.Open returns for a
	// resume attempt whose continuation request it cannot build (the
	// conversation has a shape the adapter cannot extend, say): the resume
	// attempt ends there and is reported skipped with the reason "build"
	// (ResumeBuild), the route is not taken to have refused (other calls
	// still ask it), it is not asked to continue this call again, and the
	// call goes on.
	ErrCannotContinue = errors.New("hedgeprobe: cannot build a continuation")
)

// TimeoutKind says which watchdog fired.
type TimeoutKind string

// Values of TimeoutKind.
const (
	// TimeoutTTFT: no content chunk by Config.TTFTTimeout.
	TimeoutTTFT TimeoutKind = "ttft"
	// TimeoutStall: no content chunk for Config.StallTimeout after one.
	TimeoutStall TimeoutKind = "stall"
)

// TimeoutError is the error of a call a watchdog ended (docs/design.md §2 rule 7).
// It reports Timeout() == true and Transient() == true, so the caller's
// retry or fallback chain takes over, and matches ErrTimeout and
// ErrTTFTTimeout or ErrStallTimeout with errors.Is.
type TimeoutError struct {
	// Kind is which watchdog fired.
	Kind TimeoutKind
	// After is the watchdog's configured timeout (the field cannot be named
	// Timeout: that is the method net.Error callers look for).
	After time.Duration
	// Attempt is the index of the attempt the error is about: the
	// committed one for a stall after commit, the stalled one for a stall
	// before commit (an attempt with content, then StallTimeout of
	// silence; it ends the call only when no other attempt carries it
	// on, with nothing delivered), the newest live one for a TTFT
	// timeout.
	Attempt int
	// Route and Model name that attempt's route.
	Route, Model string
	// ChunksReceived is the number of content chunks that attempt received.
	ChunksReceived int64
	// ChunksDelivered is the number of content chunks the whole call
	// delivered to the caller before the error, from every attempt it
	// read (after a resume, more than Attempt received); they stay
	// delivered.
	ChunksDelivered int64
	// Truncated is true when content was delivered before the error: the
	// caller holds a partial answer — or, where the stream fell silent
	// after its last finish reason (before the usage chunk or [DONE]),
	// the whole text without what would have followed it: hedgeprobe
	// does not read finish reasons to tell the two apart, and such a
	// silence is a stall all the same (nothing it holds is resumable).
	Truncated bool
}

// Error describes the timeout.
func (e *TimeoutError) Error() string {
	// The two counts have different scopes — the attempt's and the
	// call's — and after a resume they differ widely, so the message
	// names each one's scope.
	s := fmt.Sprintf("hedgeprobe: %s timeout after %v on route %q model %q: attempt %d received %d content chunks, the caller %d",
		e.Kind, e.After, e.Route, e.Model, e.Attempt, e.ChunksReceived, e.ChunksDelivered)
	if e.Truncated {
		s += " (truncated)"
	}
	return s
}

// Timeout reports true.
func (e *TimeoutError) Timeout() bool { return true }

// Transient reports true: a new call may well succeed.
func (e *TimeoutError) Transient() bool { return true }

// Is matches ErrTimeout and the sentinel of the error's Kind.
func (e *TimeoutError) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return true
	case ErrTTFTTimeout:
		return e.Kind == TimeoutTTFT
	case ErrStallTimeout:
		return e.Kind == TimeoutStall
	}
	return false
}

// IsTransient reports whether err may not repeat on another attempt, so a
// hedge or a retry is worth launching. In order: nil is not; an error
// implementing TransientError in the chain decides; a RetryAfterError
// (429, 503) is; context.Canceled is not (the caller gave up);
// context.DeadlineExceeded, a net.Error, io.ErrUnexpectedEOF, a connection
// reset, refused or broken pipe are. Anything else is fatal: an upstream
// adapter marks 429 and 5xx by implementing TransientError.
//
// When the caller's own context ends, Stream.Err is that context's error;
// a deadline is then reported transient like an upstream's timeout, so a
// retry loop checks its own context first.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if te, ok := errors.AsType[TransientError](err); ok {
		return te.Transient()
	}
	if _, ok := errors.AsType[RetryAfterError](err); ok {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return false
}

// vetError returns err, an error the route's Open or Source returned, once its
// methods have been seen to work: every method hedgeprobe may call on it
// or on an error in its chain (see exercise). A method that panics — a
// typed nil pointer returned as an error, or wrapped in one, is the usual
// case — would otherwise panic later on the caller's goroutine, in a
// classification or a span's error.type, where no recover guards; the
// attempt fails instead with an error wrapping ErrSourcePanic, which no
// longer wraps err.
func vetError(route string, err error) (vetted error) {
	if err == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			vetted = panicked(ErrSourcePanic, fmt.Sprintf("route %q: a method of its error panicked", route), r)
		}
	}()
	exercise(err)
	return err
}

// panicError is a recovered panic of code hedgeprobe calls: kind is the
// sentinel it matches (ErrOpenPanic, ErrSourcePanic, ErrClassifierPanic or
// ErrExtractorPanic), where says where it happened ("" or `route "a"`,
// "token count", …). Error quotes the panic's value, for the caller
// (Stream.Err) and its logs; the spans record StatusText, which does not:
// a value the caller's code panicked with can quote the item it was given
// — answer text — while the message of one of Go's runtime errors (an
// index out of range, a nil map) cannot. It builds both texts itself, so
// a status never depends on finding the value inside the message.
type panicError struct {
	kind          error
	where         string
	value, status string
}

// panicked describes the panic r recovered as kind, where. It formats the
// value once, here, under a recover of its own: formatting calls the
// value's Error or String method — the caller's code, which fmt guards
// against a first panic but not against one in formatting that panic's
// value. A value that cannot be formatted is named by its type. Only the
// runtime's own errors keep their message in the status: a caller's type
// that implements runtime.Error is the caller's text.
func panicked(kind error, where string, r any) (e *panicError) {
	e = &panicError{kind: kind, where: where, status: fmt.Sprintf("a panic value of type %T", r)}
	e.value = e.status
	defer func() {
		if recover() != nil {
			e.value = e.status
		}
	}()
	if re, ok := r.(runtime.Error); ok && strings.HasPrefix(strings.TrimPrefix(fmt.Sprintf("%T", r), "*"), "runtime.") {
		e.status = re.Error()
	}
	e.value = fmt.Sprint(r)
	return e
}

func (e *panicError) Error() string { return e.text(e.value) }

// StatusText is Error with the value's type, or a runtime error's
// message, in place of the value.
func (e *panicError) StatusText() string { return e.text(e.status) }

// Unwrap returns kind: errors.Is(err, ErrSourcePanic) and the like.
func (e *panicError) Unwrap() error { return e.kind }

func (e *panicError) text(value string) string {
	if e.where == "" {
		return e.kind.Error() + ": " + value
	}
	return e.kind.Error() + ": " + e.where + ": " + value
}

// maxChain bounds the errors walkErrors visits: a chain that long (or
// one that loops) is not walked to its end.
const maxChain = 64

// walkErrors calls visit on err and, where visit returns true, on the
// errors it wraps (Unwrap, one or many), depth first, on at most
// maxChain errors in all. It returns false where it stopped short.
func walkErrors(err error, visit func(error) (descend bool)) bool {
	budget := maxChain
	var walk func(error) bool
	walk = func(e error) bool {
		if e == nil {
			return true
		}
		if budget--; budget < 0 {
			return false
		}
		if !visit(e) {
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	return walk(err)
}

// exercise calls, on err and on every error in its chain, each method that
// errors.Is, errors.As and hedgeprobe's classifications call (IsTransient,
// retryAfter, outcomeOf, errorType, isPanic, statusText): Error,
// Transient, RetryAfter, ErrorType, StatusText, Is, As (with each target
// those ask for) and Unwrap. Calling the classifications alone would not
// do: each stops at its first match, and a method deeper in the chain that
// another one reaches would go untried.
func exercise(err error) {
	walkErrors(err, func(err error) bool {
		_ = err.Error()
		if e, ok := err.(TransientError); ok {
			_ = e.Transient()
		}
		if e, ok := err.(RetryAfterError); ok {
			_ = e.RetryAfter()
		}
		if e, ok := err.(errorTyper); ok {
			_ = e.ErrorType()
		}
		if e, ok := err.(statusTexter); ok {
			_ = e.StatusText()
		}
		if e, ok := err.(interface{ Is(error) bool }); ok {
			_ = e.Is(ErrCannotContinue)
		}
		if e, ok := err.(interface{ As(any) bool }); ok {
			var te *TimeoutError
			var et errorTyper
			var st statusTexter
			_, _, _ = e.As(&te), e.As(&et), e.As(&st)
		}
		return true
	})
}

// retryAfter returns the Retry-After hint in err's chain, or 0.
func retryAfter(err error) time.Duration {
	if ra, ok := errors.AsType[RetryAfterError](err); ok {
		return max(ra.RetryAfter(), 0)
	}
	return 0
}
