package ollama

import (
	"fmt"
	"strings"
)

// ModelName is the name the tiny model is created under.
const ModelName = "streamwatch-tiny"

// Seed is the sampling seed the Modelfile fixes. With temperature 0 the
// choice of the next token is greedy and the seed does not matter; it is
// fixed anyway so a request that raises the temperature still gets the
// same text on every server.
const Seed = 42

// Template is the Modelfile's chat template. A conversation renders as
//
//	user: <content>
//	assistant:<content>
//	…
//	assistant:
//
// and the model writes after the final "assistant:". When the last message
// is the assistant's, it is left open — no newline after it, and no new
// "assistant:" — so the model continues that message (a prefill): the
// continuation is the same tokens it would have generated had it written
// the prefix itself, because the tiny model's words tokenize back into
// the tokens that spelled them (see NewVocabulary).
const Template = `{{- range $i, $m := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if eq $m.Role "assistant" }}assistant:{{ $m.Content }}{{ if not $last }}
{{ end }}
{{- else }}{{ $m.Role }}: {{ $m.Content }}
{{ if $last }}assistant:{{ end }}
{{- end }}
{{- end }}`

// Modelfile returns the Modelfile that serves the GGUF file at ggufPath
// under Template, greedy (temperature 0) with Seed, a 4096-token context,
// no repeat penalty (it would make a continuation depend on how much of
// the history the sampler saw), and one CPU thread per runner, so two
// servers share a 2-core machine without fighting.
func Modelfile(ggufPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", ggufPath)
	fmt.Fprintf(&b, "TEMPLATE \"\"\"%s\"\"\"\n", Template)
	for _, p := range [][2]string{
		{"temperature", "0"},
		{"seed", fmt.Sprint(Seed)},
		{"num_ctx", fmt.Sprint(modelContext)},
		{"repeat_penalty", "1"},
		{"num_thread", "1"},
	} {
		fmt.Fprintf(&b, "PARAMETER %s %s\n", p[0], p[1])
	}
	return b.String()
}
