// Package prefill prepares a partial answer for Anthropic's prefill (a
// trailing assistant message the model continues) and mends the
// continuation, for the resume attempts of hedgeprobe/sse and
// hedgeprobe/anthropicgo (docs/design.md §2 rule 10).
//
// Anthropic refuses a final assistant message that ends in whitespace, so
// the whitespace at the end of the delivered text is cut before it is sent
// (Trim). The caller already has it, and the model usually starts its
// continuation with it again: Uncut drops it from the continuation's
// start, as far as the continuation repeats it, so the caller reads the
// cut characters exactly once.
package prefill

import "strings"

// whitespace is what Anthropic counts as trailing whitespace.
const whitespace = " \t\r\n"

// Trim splits a partial answer into what may be sent as the prefill and
// the trailing whitespace cut from it. sent is empty when prefix is
// nothing but whitespace: the request is then sent without a prefill (an
// empty assistant message is refused too), and the model's answer,
// continued from nothing, loses the whitespace the caller has.
func Trim(prefix string) (sent, cut string) {
	sent = strings.TrimRight(prefix, whitespace)
	return sent, prefix[len(sent):]
}

// Uncut drops from the start of a continuation what the caller already
// has: the whitespace Trim cut, as far as the continuation repeats it.
// Give it each text delta of the continuation in turn. The zero Uncut
// drops nothing.
type Uncut struct{ cut string }

// NewUncut returns an Uncut of the whitespace Trim cut.
func NewUncut(cut string) *Uncut { return &Uncut{cut: cut} }

// Pending reports whether there is still something to drop: until then
// each text delta must go through Text.
func (u *Uncut) Pending() bool { return u.cut != "" }

// Text returns what is left of the text delta s once the repeated
// whitespace is dropped. When the continuation goes its own way (a
// character that is not the next one cut), nothing more is dropped.
func (u *Uncut) Text(s string) string {
	for u.cut != "" && s != "" && s[0] == u.cut[0] {
		s, u.cut = s[1:], u.cut[1:]
	}
	if s != "" {
		u.cut = ""
	}
	return s
}
