package prefill

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTrim: only trailing whitespace is cut; leading and inner whitespace
// stays.
func TestTrim(t *testing.T) {
	for _, tc := range []struct{ in, sent, cut string }{
		{"lorem ipsum ", "lorem ipsum", " "},
		{"lorem ipsum", "lorem ipsum", ""},
		{" a \t\r\n \n", " a", " \t\r\n \n"},
		{"a\u00a0", "a", "\u00a0"},
		{"終わり\u3000", "終わり", "\u3000"},
		{"a\v\f\u0085\u2028\u202f\u205f\ufeff\x1f", "a", "\v\f\u0085\u2028\u202f\u205f\ufeff\x1f"},
		{"a\u200b", "a\u200b", ""}, // a zero-width space is no white space to either
		{"a\xff ", "a\xff", " "},   // invalid UTF-8 is no white space
		{"\n\n", "", "\n\n"},
		{"", "", ""},
	} {
		sent, cut := Trim(tc.in)
		if sent != tc.sent || cut != tc.cut || sent+cut != tc.in {
			t.Errorf("Trim(%q) = %q, %q; want %q, %q", tc.in, sent, cut, tc.sent, tc.cut)
		}
	}
}

// TestUncutJoin: the caller's text — the delivered prefix, then the
// continuation through Uncut — has the cut characters exactly once:
// neither repeated (the model repeats them) nor lost (it does not), in
// whatever deltas the continuation comes.
func TestUncutJoin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		delivered string   // what the caller already has
		deltas    []string // the model's continuation of the trimmed prefill
		want      string   // what the caller reads in all
	}{
		{"space repeated", "lorem ", []string{" ipsum", " dolor"}, "lorem ipsum dolor"},
		{"space not repeated", "lorem ", []string{"ipsum", " dolor"}, "lorem ipsum dolor"},
		{"newlines over several deltas", "a\n\n", []string{"\n", "", "\nb", "\n\nc"}, "a\n\nb\n\nc"},
		{"partly repeated, then its own way", "a \n", []string{" x \n"}, "a \nx \n"},
		{"another whitespace", "a ", []string{"\nb"}, "a \nb"},
		{"nothing cut", "a", []string{" b", " c"}, "a b c"},
		{"whitespace only delivered", "\n\n", []string{"\n\nHello", "\n\n"}, "\n\nHello\n\n"},
		{"repeat inside a later delta is kept", "a ", []string{"b", " "}, "a b "},
		{"ideographic space repeated", "終わり\u3000", []string{"\u3000次", "へ"}, "終わり\u3000次へ"},
		// U+3001 shares U+3000's first two bytes: none of them is lost.
		{"a character sharing the cut's first bytes", "終わり\u3000", []string{"\u3001次"}, "終わり\u3000\u3001次"},
		{"NBSP then a newline, the NBSP repeated", "a\u00a0\n", []string{"\u00a0b"}, "a\u00a0\nb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent, cut := Trim(tc.delivered)
			if strings.TrimRightFunc(sent, trailingSpace) != sent {
				t.Fatalf("sent %q ends in whitespace", sent)
			}
			u := NewUncut(cut)
			got := tc.delivered
			for _, d := range tc.deltas {
				got += u.Text(d)
			}
			if got != tc.want {
				t.Fatalf("caller reads %q, want %q", got, tc.want)
			}
			if u.Pending() && got != tc.delivered {
				t.Fatalf("still pending after the continuation went on")
			}
		})
	}
	var zero Uncut
	if zero.Pending() || zero.Text(" x") != " x" {
		t.Fatal("the zero Uncut drops something")
	}
}

// TestEcho: the repeat of the prefix is dropped however it is split; an
// answer that differs from the prefix keeps every byte, the part that
// matched given back with the first delta that differs; past the repeat
// nothing is touched.
func TestEcho(t *testing.T) {
	const prefix = "Once upon a time"
	for _, tc := range []struct {
		name   string
		deltas []string
		want   []string
	}{
		{"whole", []string{prefix + " there", " was"}, []string{" there", " was"}},
		{"in pieces", []string{"Once", " upon a", " time", " there"}, []string{"", "", "", " there"}},
		{"not repeated", []string{" there", "Once"}, []string{" there", "Once"}},
		{"differs after a match", []string{"Once upon", " there"}, []string{"", "Once upon there"}},
		{"differs within a delta", []string{"Once upon a tim", "id mouse"}, []string{"", "Once upon a timid mouse"}},
		{"empty deltas pass", []string{"", "Once upon a time", "", "!"}, []string{"", "", "", "!"}},
		{"repeated twice", []string{prefix, prefix}, []string{"", prefix}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEcho(prefix)
			var got []string
			for _, d := range tc.deltas {
				got = append(got, e.Text(d))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if e.Pending() {
				t.Fatal("still pending after the answer went on")
			}
		})
	}
	if e := NewEcho(""); e.Pending() || e.Text("x") != "x" {
		t.Fatal("an empty prefix drops something")
	}
}

// TestEchoHoldsWithoutCopying: holding back a long repeat piece by piece
// allocates nothing (a copy per piece made a 256 KiB repeat in 4-byte
// pieces quadratic: 1.8 s of CPU).
func TestEchoHoldsWithoutCopying(t *testing.T) {
	e := NewEcho(strings.Repeat("ab", 1<<20))
	if allocs := testing.AllocsPerRun(1000, func() {
		if e.Text("ab") != "" {
			t.Fatal("the repeat was not held back")
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per piece held", allocs)
	}
	if got := e.Text("abX"); !strings.HasSuffix(got, "abX") || len(got) != 2*1001+3 {
		t.Fatalf("given back %d bytes ending %q, want the 1,001 pieces held and abX", len(got), got[max(0, len(got)-5):])
	}
}

// TestUncutDropsWholeCharacters: over 20,000 pseudo-random cuts and
// deltas (white space of one to three bytes, characters sharing their
// leading bytes, stray continuation bytes), Uncut drops only a prefix of
// the delta that is whole characters of what was cut, and stops dropping
// once the delta's text goes on.
func TestUncutDropsWholeCharacters(t *testing.T) {
	pool := []string{" ", "\n", "\u00a0", "\u3000", "\u3001", "\u2028", "\u2029", "\ufeff", "a", "次", "\xe3\x80", "\x80"}
	x := uint64(1)
	next := func(n int) int { // splitmix64: the same cases on every run
		x += 0x9e3779b97f4a7c15
		z := (x ^ x>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return int((z ^ z>>31) % uint64(n))
	}
	for range 20000 {
		var delivered, delta strings.Builder
		delivered.WriteString("x")
		for range next(4) {
			delivered.WriteString(pool[next(8)]) // white space only: all of it is cut
		}
		for range next(5) {
			delta.WriteString(pool[next(len(pool))])
		}
		_, cut := Trim(delivered.String())
		u := NewUncut(cut)
		s := delta.String()
		got := u.Text(s)
		dropped, ok := strings.CutSuffix(s, got)
		if !ok || !strings.HasPrefix(cut, dropped) || !utf8.ValidString(dropped) {
			t.Fatalf("cut %q, delta %q: read %q", cut, s, got)
		}
		if got != "" && u.Pending() {
			t.Fatalf("cut %q, delta %q: still dropping after text", cut, s)
		}
	}
}

// split cuts s into deltas at the byte offsets cuts picks (each byte of
// cuts, mod the length left, is the next delta's length; 0 is one byte),
// moved back to a character's start when whole is set: an upstream's text
// deltas are decoded JSON strings, whole characters each.
func split(s string, cuts []byte, whole bool) []string {
	var out []string
	for i := 0; s != ""; i++ {
		n := len(s)
		if i < len(cuts) {
			n = 1 + int(cuts[i])%len(s)
		}
		for whole && n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// FuzzEcho: however an upstream splits its answer into deltas, the caller
// reads the answer less the prefix when it starts with the whole prefix,
// nothing when it ends within the prefix, and all of it otherwise.
func FuzzEcho(f *testing.F) {
	f.Add("lorem ipsum", "lorem ipsum dolor", []byte{3, 0, 7})
	f.Add("lorem", "lorax", []byte{2})
	f.Add("lorem ipsum", "lorem", []byte{1, 1})
	f.Add("", "anything", []byte{0})
	f.Add("終わり", "終わりです", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, prefix, answer string, cuts []byte) {
		e := NewEcho(prefix)
		var got strings.Builder
		for _, d := range split(answer, cuts, false) {
			got.WriteString(e.Text(d))
		}
		var want string
		switch {
		case strings.HasPrefix(answer, prefix):
			want = answer[len(prefix):]
		case strings.HasPrefix(prefix, answer):
			want = "" // held back, as a repeat cut short
		default:
			want = answer
		}
		if got.String() != want {
			t.Fatalf("prefix %q, answer %q in %q: read %q, want %q", prefix, answer, split(answer, cuts, false), got.String(), want)
		}
	})
}

// FuzzUncut: Trim cuts only trailing white space, whole characters, and
// sends the rest; however the continuation comes in deltas, the caller
// reads it less its longest start, in whole characters, that repeats the
// cut.
func FuzzUncut(f *testing.F) {
	f.Add("lorem ipsum \n", " \ndolor", []byte{0, 1})
	f.Add("終わり\u3000", "\u3001です", []byte{1})
	f.Add("a\u00a0", "\u00a0 b", []byte{0})
	f.Add("   ", "  x", []byte{5})
	f.Fuzz(func(t *testing.T, prefix, continuation string, cuts []byte) {
		sent, cut := Trim(prefix)
		if sent+cut != prefix {
			t.Fatalf("Trim(%q) = %q + %q", prefix, sent, cut)
		}
		if r, _ := utf8.DecodeLastRuneInString(sent); sent != "" && trailingSpace(r) {
			t.Fatalf("Trim(%q) sends %q, which ends in white space", prefix, sent)
		}
		for _, r := range cut {
			if !trailingSpace(r) {
				t.Fatalf("Trim(%q) cut %q, which holds %q", prefix, cut, r)
			}
		}
		u := NewUncut(cut)
		var got strings.Builder
		for _, d := range split(continuation, cuts, true) {
			if u.Pending() {
				d = u.Text(d)
			}
			got.WriteString(d)
		}
		// The longest start of the cut, in whole characters, that the
		// continuation repeats.
		n := 0
		for n < len(cut) {
			_, size := utf8.DecodeRuneInString(cut[n:])
			if !strings.HasPrefix(continuation[n:], cut[n:n+size]) {
				break
			}
			n += size
		}
		if want := continuation[n:]; got.String() != want {
			t.Fatalf("cut %q, continuation %q in %q: read %q, want %q", cut, continuation, split(continuation, cuts, true), got.String(), want)
		}
	})
}
