// Package prefill prepares a partial answer for Anthropic's prefill (a
// trailing assistant message the model continues) and mends the
// continuation, for the resume attempts of hedgeprobe/sse and
// hedgeprobe/anthropicgo (docs/design.md §2 rule 10); and drops the prefix
// an upstream repeats before its continuation (Echo), for hedgeprobe/sse
// and hedgeprobe/openaigo; and tells a request no continuation can carry
// on (ManyChoices).
//
// Anthropic refuses a final assistant message that ends in whitespace, so
// the whitespace at the end of the delivered text is cut before it is sent
// (Trim). The caller already has it, and the model usually starts its
// continuation with it again: Uncut drops it from the continuation's
// start, as far as the continuation repeats it, so the caller reads the
// cut characters exactly once.
package prefill

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/streamwatch/streamwatch/hedgeprobe"
)

// trailingSpace reports whether r is cut from the end of a prefill.
// Anthropic does not document which characters its check counts; the
// clients that strip a prefill for it use Python's str.rstrip or
// JavaScript's trimEnd, which between them strip Unicode's white space
// (NBSP and the ideographic space U+3000 too), U+001C–U+001F and U+FEFF.
// All of them are cut. Cutting one the check would have let through
// loses no text — the caller keeps what was delivered, and Uncut drops
// only what the continuation repeats — but the model does not see it, and
// may begin with white space of its own (a space after a cut NBSP), which
// the caller then reads after the cut character, as after any cut
// white space. Leaving one the check refuses would cost the resume and
// turn the route away for ResumeRefusedFor.
func trailingSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\uFEFF' || (r >= 0x1c && r <= 0x1f)
}

// Trim splits a partial answer into what may be sent as the prefill and
// the trailing whitespace cut from it. sent is empty when prefix is
// nothing but whitespace: the request is then sent without a prefill (an
// empty assistant message is refused too), and the model's answer,
// continued from nothing, loses the whitespace the caller has.
func Trim(prefix string) (sent, cut string) {
	sent = strings.TrimRightFunc(prefix, trailingSpace)
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
// character that is not the next one cut), nothing more is dropped. It
// compares whole characters: U+3001 after a cut U+3000 shares its first
// two bytes, and loses none of them.
func (u *Uncut) Text(s string) string {
	for u.cut != "" && s != "" {
		_, n := utf8.DecodeRuneInString(u.cut) // cut is whole characters: Trim cut them
		if !strings.HasPrefix(s, u.cut[:n]) {
			break
		}
		s, u.cut = s[n:], u.cut[n:]
	}
	if s != "" {
		u.cut = ""
	}
	return s
}

// Echo drops from the start of a continuation the prefix an upstream
// repeats before it (Mistral's "prefix": true answers so). Text that
// matches the prefix so far is held back until the whole prefix has come,
// and is then dropped — or until the continuation differs from it, and is
// then given back before the text that differs. So an answer that differs
// from the prefix within its length keeps every byte; one that starts with
// the whole prefix, or ends within it, is taken as repeating it. Give it
// each text delta in turn.
type Echo struct {
	prefix string
	at     int  // bytes of prefix matched so far: the text held back
	done   bool // the repeat was dropped, or the continuation went its own way
}

// NewEcho returns an Echo of prefix.
func NewEcho(prefix string) *Echo { return &Echo{prefix: prefix, done: prefix == ""} }

// Pending reports whether the repeat is still being looked for: until
// then each text delta must go through Text.
func (e *Echo) Pending() bool { return !e.done }

// Text returns what of the text delta s the caller reads.
func (e *Echo) Text(s string) string {
	if e.done || s == "" {
		return s
	}
	rest := e.prefix[e.at:]
	n := 0
	for n < len(s) && n < len(rest) && s[n] == rest[n] {
		n++
	}
	switch {
	case n == len(rest): // the repeat is complete
		e.done = true
		return s[n:]
	case n == len(s): // all of s repeats the prefix: held
		e.at += n
		return ""
	default: // the continuation goes its own way: what was held first
		e.done = true
		return e.prefix[:e.at] + s
	}
}

// ErrEchoAfterPrefill is why an upstream that repeats the prefix is not
// asked to continue a request that ends in an assistant message: its
// first answer repeated that message, so the delivered text starts with
// it, and which part of it to send again cannot be told from the text
// alone.
var ErrEchoAfterPrefill = errors.New("the request ends in an assistant message, which an upstream that repeats the prefix repeated in the delivered text too")

// EchoDropped is the Source of a resume attempt on an upstream that
// repeats the prefix: each item's text, as Text reads it, goes through
// Echo, and WithText returns the item with what is left (an item whose
// text is held back goes on, empty). Text returns "" for an item with no
// text; WithText must not modify the item it is given, which its Source
// may still hold.
type EchoDropped[T any] struct {
	hedgeprobe.Source[T]
	Echo     *Echo
	Text     func(T) string
	WithText func(T, string) T
	cur      T
}

// Next reads the next item, less what the continuation repeats.
func (d *EchoDropped[T]) Next() bool {
	if !d.Source.Next() {
		return false
	}
	d.cur = d.Source.Current()
	if d.Echo.Pending() {
		if s := d.Text(d.cur); s != "" {
			d.cur = d.WithText(d.cur, d.Echo.Text(s))
		}
	}
	return true
}

// Current returns the item Next read.
func (d *EchoDropped[T]) Current() T { return d.cur }

// Thinks reports whether an Anthropic "thinking" parameter, in any form
// that marshals to its JSON, turns extended thinking on, with which
// Anthropic takes no prefill: a type other than "disabled". Absent, null
// or without a type is off; one that cannot be read counts as on.
func Thinks(v any) bool {
	if v == nil {
		return false
	}
	b, err := json.Marshal(v)
	var t struct {
		Type string `json:"type"`
	}
	if err != nil || json.Unmarshal(b, &t) != nil {
		return true
	}
	return t.Type != "" && t.Type != "disabled"
}

// ManyChoices reports whether request fields (a raw body's, or extra
// fields an SDK sends beside its own) ask for more than one choice: an
// "n" of any numeric type above 1. No continuation carries several
// answers on, so such a request is never resumed. (An "n" that is not a
// number counts as many: the upstream will refuse the request anyway.)
func ManyChoices(fields map[string]any) bool {
	v, ok := fields["n"]
	if !ok || v == nil {
		return false
	}
	n, ok := Number(v)
	if !ok {
		return true
	}
	f, err := n.Float64()
	return err != nil || f > 1
}

// Number reads a request field's value as the request sends it, through
// JSON, so that every Go type a caller may give (int, int64, float64,
// json.Number…) reads alike; false when the value is no JSON number.
func Number(v any) (json.Number, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var n any
	if d.Decode(&n) != nil {
		return "", false
	}
	num, ok := n.(json.Number)
	return num, ok
}
