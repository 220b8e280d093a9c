package fakellm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
)

// Continuation scripts how a profile answers a continuation request: a
// request whose last message is the assistant's, carrying the beginning of
// the answer (docs/design.md §2 rule 10). fakellm continues it when that
// text is a prefix of the profile's script: it streams only the rest, with
// the script's own timing from there on — the TTFT, then the intervals,
// silences, error and disconnect that lie after the prefix (a silence at
// the very point the prefix ends is the one the continuation rescues, so
// it is not replayed).
type Continuation struct {
	// Mode is the switch the OpenAI endpoint needs to continue, as the
	// servers that do: "trailing" (default; a trailing assistant message
	// suffices, as llama.cpp and Ollama), "final_message"
	// ("continue_final_message": true, as vLLM and SGLang; with
	// "add_generation_prompt": true as well it answers 400, as vLLM does),
	// or "prefix" ("prefix": true on the message, as DeepSeek and
	// Mistral). A request without the switch gets a fresh answer: the
	// whole script. The Anthropic endpoint always continues a trailing
	// assistant message (a prefill).
	Mode string `yaml:"mode"`
	// Echo makes the OpenAI endpoint's continuation repeat the partial
	// answer in its first content chunk, before the rest of the script,
	// as Mistral's answer to a "prefix": true message does.
	Echo bool `yaml:"echo"`
	// Status, when non-zero, answers every continuation request with this
	// HTTP status (400–599): a model that refuses prefill, as newer
	// Claude models do with 400.
	Status int `yaml:"status"`
}

// Values of Continuation.Mode.
const (
	ModeTrailing     = "trailing"
	ModeFinalMessage = "final_message"
	ModePrefix       = "prefix"
)

func (c Continuation) validate(key string) error {
	switch c.Mode {
	case "", ModeTrailing, ModeFinalMessage, ModePrefix:
	default:
		return fmt.Errorf("%s.mode: %q is not trailing, final_message or prefix", key, c.Mode)
	}
	if c.Status != 0 && (c.Status < 400 || c.Status > 599) {
		return fmt.Errorf("%s.status: %d is not 400-599", key, c.Status)
	}
	return nil
}

// message is the part of a request message fakellm reads.
type message struct {
	Role string `json:"role"`
	// Content is a string, or an array of content blocks or parts whose
	// "text" fields make the text.
	Content json.RawMessage `json:"content"`
	// Prefix is DeepSeek's and Mistral's switch on a trailing assistant
	// message.
	Prefix bool `json:"prefix"`
}

// text returns the message's text content.
func (m message) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// continued is where a continuation starts in the script.
type continued struct {
	// from is the index of the first chunk sent.
	from int
	// head is the text of chunk from: the part of it the prefix did not
	// cover (when that part is only whitespace, it leads the next chunk
	// instead, as a tokenizer puts a space before a word).
	head string
	// rescued is the boundary (content chunks sent) where the prefix ends:
	// what the script does there and before is not replayed. It is from,
	// or from+1 when the head is the last chunk's trailing whitespace only
	// (a prefill trimmed of it, as Anthropic requires): the prefix then
	// ends after all the content.
	rescued int
	// prefix is the partial answer the request carried.
	prefix string
}

// echo makes the first chunk sent repeat the prefix before its own text,
// as Mistral's API does. A prefix that is the whole script leaves no chunk
// to carry the echo: the last one is sent again, as the echo alone, and
// rescued stays past every chunk, so no fault of the script replays.
func (c *continued) echo(chunks int) {
	if c.from == chunks && chunks > 0 {
		c.from, c.head = chunks-1, ""
	}
	c.head = c.prefix + c.head
}

// Script is the text of the first n content chunks of every profile's
// answer: what a client reads from a profile of n chunks, continued or
// not.
func Script(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(word(i))
	}
	return b.String()
}

// asksContinuation reports whether req asks dialect d under profile p to
// continue a partial answer: its last message is the assistant's, with the
// switch the profile's mode needs. A non-nil error is a 400 to answer:
// on the Anthropic endpoint, a prefill that ends in whitespace, which
// Anthropic refuses so (a client that forgets to trim it fails here as
// it would there).
func asksContinuation(req *request, d dialect, p *Profile) (bool, error) {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != "assistant" {
		return false, nil
	}
	if _, isAnthropic := d.(anthropicDialect); isAnthropic {
		text, err := req.Messages[n-1].text()
		if err != nil {
			return false, fmt.Errorf("last message: %w", err)
		}
		if strings.TrimRightFunc(text, unicode.IsSpace) != text {
			return false, errors.New("messages: final assistant content cannot end with trailing whitespace")
		}
	}
	if _, isOpenAI := d.(openaiDialect); isOpenAI {
		switch p.Continuation.Mode {
		case ModeFinalMessage:
			if req.ContinueFinalMessage && (req.AddGenerationPrompt == nil || *req.AddGenerationPrompt) {
				return false, fmt.Errorf("continue_final_message and add_generation_prompt cannot both be true")
			}
			return req.ContinueFinalMessage, nil
		case ModePrefix:
			return req.Messages[n-1].Prefix, nil
		}
	}
	return true, nil
}

// continuation reports where a request that asks to continue (see
// asksContinuation) starts in profile p's script. A non-nil error is a
// 400 to answer: the partial answer is not a prefix of the script.
func continuation(req *request, p *Profile) (*continued, error) {
	prefix, err := req.Messages[len(req.Messages)-1].text()
	if err != nil {
		return nil, fmt.Errorf("last message: %w", err)
	}
	script := Script(p.Chunks)
	if !strings.HasPrefix(script, prefix) {
		at := 0
		for at < len(prefix) && at < len(script) && prefix[at] == script[at] {
			at++
		}
		return nil, fmt.Errorf("the assistant's partial answer (%d bytes) is not a prefix of the script: they differ at byte %d", len(prefix), at)
	}
	c := &continued{from: p.Chunks, prefix: prefix}
	off := 0
	for i := range p.Chunks {
		w := word(i)
		if off+len(w) > len(prefix) {
			c.from, c.head = i, w[len(prefix)-off:]
			break
		}
		off += len(w)
	}
	c.rescued = c.from
	switch {
	case strings.TrimSpace(c.head) != "" || c.from == p.Chunks:
	case c.from+1 < p.Chunks:
		c.from++
		c.head += word(c.from)
		c.rescued = c.from
	default:
		c.rescued = c.from + 1
	}
	return c, nil
}

// refuse answers a continuation request with the profile's continuation
// status.
func (r *run) refuse() {
	st := r.p.Continuation.Status
	r.rec.status, r.rec.outcome = st, "continuation_refused"
	typ := r.d.statusType(st)
	writeError(r.w, r.d, st, typ, typ, fmt.Sprintf("fakellm: scripted %d %s: this model does not support assistant message prefill", st, http.StatusText(st)))
}
