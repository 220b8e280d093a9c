package hedgeprobe

// How a failed span describes its error: the low-cardinality error.type,
// and a status description that leaves out what can quote the prompt or
// the answer (docs/telemetry.md).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// errorType returns a low-cardinality error.type for err: the watchdog
// kind, "canceled", "deadline_exceeded", "classifier_panic", "open_panic",
// "source_panic", "extractor_panic", the value of
// an ErrorType() string method anywhere in the chain (adapters can report
// "429" or "rate_limit"), else the Go type of the outermost error that is
// not a plain fmt.Errorf wrapper — without a generic type's arguments,
// and "_OTHER" for an unnamed type ("struct { error }"): a metric label
// the connector takes as a code.
func errorType(err error) string {
	if err == nil {
		return "_OTHER"
	}
	if te, ok := errors.AsType[*TimeoutError](err); ok {
		return string(te.Kind) + "_timeout"
	}
	if et, ok := errors.AsType[errorTyper](err); ok {
		if s := et.ErrorType(); s != "" {
			return validUTF8(s)
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, ErrClassifierPanic):
		return "classifier_panic"
	case errors.Is(err, ErrOpenPanic):
		return "open_panic"
	case errors.Is(err, ErrSourcePanic):
		return "source_panic"
	case errors.Is(err, ErrExtractorPanic):
		return "extractor_panic"
	}
	for {
		t := fmt.Sprintf("%T", err)
		u := errors.Unwrap(err)
		if t != "*fmt.wrapError" || u == nil {
			return typeName(t)
		}
		err = u
	}
}

// typeName is a %T name as an error.type: "*pkg.E" for "*pkg.E[int,string]"
// (one series per generic type, and no ',' or space, which no code has),
// "_OTHER" for an unnamed type.
func typeName(t string) string {
	if i := strings.IndexByte(t, '['); i > 0 {
		t = t[:i]
	}
	if strings.ContainsAny(t, " {}") {
		return "_OTHER"
	}
	return t
}

// statusTexter is an error with a text for span statuses of its own,
// without what Error quotes of the upstream's words (sse.UpstreamError).
type statusTexter interface {
	error
	StatusText() string
}

// StatusText returns err's text as hedgeprobe's spans record it in their
// status: without an upstream's message, a panic's value, or anything else
// in it that can quote the prompt or the answer (an error that cannot be
// told apart gives its type alone), valid UTF-8, at most 4 KiB; "" for
// nil. Error keeps all of it: log StatusText where the log must not hold
// what the caller sent or was sent — the error of a hook's AttemptEvent,
// say.
func StatusText(err error) string {
	if err == nil {
		return ""
	}
	return statusText(err)
}

// statusText is an error's text as a span's status description: its
// Error, but for each error in its tree that has a StatusText (whose text
// stands in for its Error there: an upstream's message can quote the
// prompt or the answer, and a panic's value the item it was given, which
// spans do not record); valid UTF-8, and at most maxStatusText bytes, cut
// between characters. Where such an error's text cannot be told apart in
// the whole — the tree is too large to walk, or a wrapper formats it
// otherwise — the status fails closed: withheld says what kind of error
// it was, and quotes nothing.
func statusText(err error) string {
	s, ok := leaveOut(err)
	if !ok {
		s = withheld(err)
	}
	s = validUTF8(s)
	if len(s) <= maxStatusText {
		return s
	}
	i := maxStatusText
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// leaveOut returns err's text with each StatusText in place of its
// error's text, or false where one's text is not found in it.
func leaveOut(err error) (string, bool) {
	s := err.Error()
	quoting, walked := statusTexters(err)
	if !walked {
		return "", false
	}
	// The longest first: a text that holds another is replaced whole.
	slices.SortStableFunc(quoting, func(a, b statusTexter) int { return len(b.Error()) - len(a.Error()) })
	for _, st := range quoting {
		quote, repl := st.Error(), st.StatusText()
		switch n := strings.Count(s, quote); {
		case quote == "":
		case n == 1:
			s = strings.Replace(s, quote, repl, 1)
		case n > 1:
			// Which occurrence is the error's own cannot be told: a
			// mangled status is better than one that quotes the answer.
			s = strings.ReplaceAll(s, quote, repl)
		default:
			return "", false
		}
	}
	return s, true
}

// statusTexters returns the errors in err's tree that have a StatusText —
// not those under one, whose text its own covers — and whether the whole
// tree was walked (at most maxChain errors: a chain that long, or one
// that loops, is not). An error that gives one only through its As method
// counts too, as errors.As would find it.
func statusTexters(err error) (found []statusTexter, walked bool) {
	walked = walkErrors(err, func(e error) bool {
		if st, ok := e.(statusTexter); ok {
			found = append(found, st)
			return false
		}
		if a, ok := e.(interface{ As(any) bool }); ok {
			var st statusTexter
			if a.As(&st) && st != nil {
				found = append(found, st)
				return false
			}
		}
		return true
	})
	return found, walked
}

// withheld is the status of an error whose quoted words could not be left
// out of its text: its error.type, and what became of the text.
func withheld(err error) string {
	return errorType(err) + ": the error's text is withheld: it quotes words spans do not record, which could not be told apart from the rest"
}

// maxStatusText caps a span's status description.
const maxStatusText = 4 << 10

// validUTF8 returns s with its invalid UTF-8 replaced. OTLP sends span
// statuses and attributes as protobuf strings, and a string that is not
// UTF-8 fails the export of its whole batch; error texts and response
// models come from upstreams and sources hedgeprobe does not control.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// errorTyper is an error that names its own error.type.
type errorTyper interface {
	error
	ErrorType() string
}
