package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// dialect writes one provider's wire format.
type dialect interface {
	// start sends what precedes the first content chunk.
	start(r *run)
	// content sends content chunk i.
	content(r *run, i int)
	// finish sends the end of a complete stream.
	finish(r *run)
	writeMidError(r *run, typ, code, msg string)
	whole(r *run) []byte
	errorBody(typ, code, msg string) []byte
	statusType(status int) string
	// errorStatus is the HTTP status of a non-streaming answer that fails
	// with a scripted error of type typ (a stream has sent its 200 by then
	// and carries the error in a payload).
	errorStatus(typ string) int
	midErrorType() string
	keepaliveStyle() string
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

type openaiDialect struct{}

func (openaiDialect) chunk(r *run, choices []map[string]any, usage map[string]any) []byte {
	c := map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fakellm-%d", r.id),
		"object":  "chat.completion.chunk",
		"created": r.created,
		"model":   r.model,
		"choices": choices,
	}
	if usage != nil {
		c["usage"] = usage
	}
	return mustJSON(c)
}

func (d openaiDialect) start(r *run) {
	r.write("", d.chunk(r, []map[string]any{{
		"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil,
	}}, nil))
}

func (d openaiDialect) content(r *run, i int) {
	r.write("", d.chunk(r, []map[string]any{{
		"index": 0, "delta": map[string]any{"content": r.text(i)}, "finish_reason": nil,
	}}, nil))
}

func (r *run) outputTokens() int { return r.rec.chunks * r.p.tokensPerChunk() }

func (d openaiDialect) usage(r *run) map[string]any {
	return map[string]any{
		"prompt_tokens": 10, "completion_tokens": r.outputTokens(),
		"total_tokens": 10 + r.outputTokens(),
	}
}

func (d openaiDialect) finish(r *run) {
	var usage map[string]any
	if r.p.usage() && r.p.UsageOnFinish {
		usage = d.usage(r)
	}
	r.write("", d.chunk(r, []map[string]any{{
		"index": 0, "delta": map[string]any{}, "finish_reason": "stop",
	}}, usage))
	if r.p.usage() && !r.p.UsageOnFinish && r.req.StreamOptions != nil && r.req.StreamOptions.IncludeUsage {
		r.write("", d.chunk(r, []map[string]any{}, d.usage(r)))
	}
	r.writeRaw("data: [DONE]\n\n")
}

func (d openaiDialect) writeMidError(r *run, typ, code, msg string) {
	r.write("", d.errorBody(typ, code, msg))
}

func (d openaiDialect) whole(r *run) []byte {
	return mustJSON(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fakellm-%d", r.id),
		"object":  "chat.completion",
		"created": r.created,
		"model":   r.model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": r.answer()},
			"finish_reason": "stop",
		}},
		"usage": d.usage(r),
	})
}

func (openaiDialect) errorBody(typ, code, msg string) []byte {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	return mustJSON(map[string]any{"error": e})
}

func (openaiDialect) statusType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "invalid_api_key"
	}
	return "invalid_request_error"
}

// errorStatus is 500: OpenAI's error types do not name a status (a rate
// limit is a code, not a type), and a scripted error is the server's.
func (openaiDialect) errorStatus(string) int { return http.StatusInternalServerError }

func (openaiDialect) midErrorType() string   { return "server_error" }
func (openaiDialect) keepaliveStyle() string { return "comment" }

type anthropicDialect struct{}

func (anthropicDialect) start(r *run) {
	r.write("message_start", mustJSON(map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": fmt.Sprintf("msg_fakellm_%d", r.id), "type": "message", "role": "assistant",
			"model": r.model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 1},
		},
	}))
	r.write("content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
}

func (anthropicDialect) content(r *run, i int) {
	r.write("content_block_delta", mustJSON(map[string]any{
		"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": r.text(i)},
	}))
}

func (anthropicDialect) finish(r *run) {
	r.write("content_block_stop", []byte(`{"type":"content_block_stop","index":0}`))
	delta := map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
	}
	if r.p.usage() {
		delta["usage"] = map[string]any{"output_tokens": r.outputTokens()}
	}
	r.write("message_delta", mustJSON(delta))
	r.write("message_stop", []byte(`{"type":"message_stop"}`))
}

func (d anthropicDialect) writeMidError(r *run, typ, _, msg string) {
	r.write("error", d.errorBody(typ, "", msg))
}

func (anthropicDialect) whole(r *run) []byte {
	return mustJSON(map[string]any{
		"id": fmt.Sprintf("msg_fakellm_%d", r.id), "type": "message", "role": "assistant",
		"model":         r.model,
		"content":       []map[string]any{{"type": "text", "text": r.answer()}},
		"stop_reason":   "end_turn",
		"stop_sequence": nil,
		"usage":         map[string]any{"input_tokens": 10, "output_tokens": r.outputTokens()},
	})
}

func (anthropicDialect) errorBody(typ, _, msg string) []byte {
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func (anthropicDialect) statusType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// errorStatus is the status Anthropic's API pairs with each error type;
// 500 for a type it does not list.
func (anthropicDialect) errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return http.StatusInternalServerError
}

func (anthropicDialect) midErrorType() string   { return "overloaded_error" }
func (anthropicDialect) keepaliveStyle() string { return "ping" }
