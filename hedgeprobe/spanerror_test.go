package hedgeprobe

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// quotingError is an error whose Error quotes words spans must not record
// and whose StatusText leaves them out, as sse.UpstreamError's does.
type quotingError struct{ quote string }

func (e quotingError) Error() string      { return e.quote }
func (e quotingError) StatusText() string { return "[left out]" }

// asQuoting exposes a quotingError through its As method alone, as an
// SDK's error type can.
type asQuoting struct{ q quotingError }

func (e asQuoting) Error() string { return "sdk: " + e.q.Error() }
func (e asQuoting) As(target any) bool {
	if p, ok := target.(*statusTexter); ok {
		*p = e.q
		return true
	}
	return false
}

// requoting formats the error it wraps otherwise than its Error.
type requoting struct{ err error }

func (e requoting) Error() string { return fmt.Sprintf("wrapped: %q", e.err.Error()) }
func (e requoting) Unwrap() error { return e.err }

// TestStatusTextLeavesQuotesOut: every error in the tree with a
// StatusText has its text replaced, wherever it stands — every copy where
// it occurs more than once, the longest first where one holds another —
// and where one's text cannot be found, or the tree is too large to walk,
// the status says what kind of error it was and quotes nothing.
func TestStatusTextLeavesQuotesOut(t *testing.T) {
	withheld := ": the error's text is withheld: it quotes words spans do not record, which could not be told apart from the rest"
	var deep error = quotingError{"SECRET"}
	for range 70 {
		deep = fmt.Errorf("w: %w", deep)
	}
	wide := make([]error, 70)
	for i := range wide {
		wide[i] = errors.New("x")
	}
	wide = append(wide, quotingError{"SECRET"})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("route %q: %w", "a", quotingError{"SECRET"}), `route "a": [left out]`},
		{fmt.Errorf("%w (after 3 chunks)", quotingError{"SECRET"}), `[left out] (after 3 chunks)`},
		{fmt.Errorf("%w: failed at SECRET", quotingError{"SECRET"}), `[left out]: failed at [left out]`},
		{fmt.Errorf("route %q: %w", "a", quotingError{"a"}), `route "[left out]": [left out]`},
		{fmt.Errorf("%w, route %q", quotingError{"a"}, "a"), `[left out], route "[left out]"`},
		{errors.Join(quotingError{"ONE"}, fmt.Errorf("wrapped: %w", quotingError{"TWO"})), "[left out]\nwrapped: [left out]"},
		{errors.Join(quotingError{"SECRET"}, quotingError{"TOP SECRET"}), "[left out]\n[left out]"},
		{errors.Join(quotingError{"SECRET"}, quotingError{"SECRET TAIL"}), "[left out]\n[left out]"},
		{fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", quotingError{""})), "outer: inner: "},
		{asQuoting{quotingError{"SECRET"}}, "sdk: [left out]"},
		{requoting{quotingError{"SECRET \"x\""}}, "hedgeprobe.requoting" + withheld},
		{deep, "hedgeprobe.quotingError" + withheld},
		{errors.Join(wide...), "*errors.joinError" + withheld},
		{errors.New("plain"), "plain"},
	} {
		if got := statusText(tc.err); got != tc.want {
			t.Errorf("statusText(%.60q) = %q, want %q", tc.err.Error(), got, tc.want)
		}
	}
}

// unprintable panics in String with itself: fmt quotes a first panic in a
// String method, but re-panics on one while formatting that panic's value.
type unprintable struct{}

func (unprintable) String() string { panic(unprintable{}) }

// lookalike is a caller's type that implements runtime.Error.
type lookalike string

func (l lookalike) Error() string { return string(l) }
func (lookalike) RuntimeError()   {}

// TestPanickedFormatsOnce: a panic's value is formatted when it is
// recovered, and a value that cannot be formatted is named by its type
// instead of panicking again where the error is read (Err, the spans);
// only the runtime's own errors keep their message in the status.
func TestPanickedFormatsOnce(t *testing.T) {
	var re runtime.Error
	func() {
		defer func() { re = recover().(runtime.Error) }()
		at := func(s []int, i int) int { return s[i] }
		at(nil, 3)
	}()
	for _, tc := range []struct {
		value        any
		text, status string
	}{
		{unprintable{}, "a panic value of type hedgeprobe.unprintable", "a panic value of type hedgeprobe.unprintable"},
		{re, re.Error(), re.Error()},
		{"he", "he", "a panic value of type string"},
		{lookalike("SECRET"), "SECRET", "a panic value of type hedgeprobe.lookalike"},
	} {
		e := panicked(ErrExtractorPanic, "token count", tc.value)
		want := "hedgeprobe: an Items function panicked: token count: "
		if e.Error() != want+tc.text || e.StatusText() != want+tc.status || !errors.Is(e, ErrExtractorPanic) {
			t.Errorf("%T: Error %q, StatusText %q, want %q and %q", tc.value, e.Error(), e.StatusText(), want+tc.text, want+tc.status)
		}
	}
	if e := panicked(ErrClassifierPanic, "", "x"); e.Error() != ErrClassifierPanic.Error()+": x" {
		t.Errorf("no where: %q", e.Error())
	}
}

// asPanics is an error whose As panics for the targets statusText and
// errorType ask for (a status texter, an error typer), not for others.
type asPanics struct{}

func (asPanics) Error() string { return "upstream failed" }
func (asPanics) As(target any) bool {
	switch target.(type) {
	case *statusTexter, *errorTyper:
		panic("As")
	}
	return false
}

// TestVetErrorTriesEveryAsTarget: a Source's error is checked with every
// As target hedgeprobe's span code asks for, so a method that panics on
// one fails the attempt (ErrSourcePanic) instead of panicking where a span
// ends, on the caller's goroutine.
func TestVetErrorTriesEveryAsTarget(t *testing.T) {
	if err := vetError("a", asPanics{}); !errors.Is(err, ErrSourcePanic) {
		t.Fatalf("vetError = %v, want ErrSourcePanic", err)
	}
}

// StatusText is the status's text, for the caller's logs; nil has none.
func TestStatusTextExported(t *testing.T) {
	if got := StatusText(nil); got != "" {
		t.Errorf("StatusText(nil) = %q, want \"\"", got)
	}
	err := fmt.Errorf("route %q: %w", "a", quotingError{"SECRET"})
	if got, want := StatusText(err), statusText(err); got != want || got != `route "a": [left out]` {
		t.Errorf("StatusText = %q, want the span status's %q", got, want)
	}
}

// genericError is an error of a generic type, whose %T holds its type
// arguments.
type genericError[K comparable, V any] struct{ _ map[K]V }

func (genericError[K, V]) Error() string { return "generic" }

// An error's Go type as error.type is a name the connector takes as a
// code: a generic type's arguments (with a ',' and spaces) and an unnamed
// type became _OTHER there, counted as text.
func TestErrorTypeOfGoTypes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{genericError[int, map[string]struct{}]{}, "hedgeprobe.genericError"},
		{&genericError[int, string]{}, "*hedgeprobe.genericError"},
		{struct{ error }{errors.New("x")}, "_OTHER"},
		{fmt.Errorf("w: %w", errors.New("x")), "*errors.errorString"},
	} {
		if got := errorType(tc.err); got != tc.want {
			t.Errorf("errorType(%T) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
