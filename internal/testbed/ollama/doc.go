// Package ollama runs Ollama (github.com/ollama/ollama, built from the Go
// module proxy by `make ollama`) as a real upstream for the end-to-end
// suite: it writes a tiny llama model of its own as a GGUF file
// (WriteModel), the Modelfile that serves it (Modelfile), and starts and
// stops `ollama serve` on a free 127.0.0.1 port with its own model
// directory (Start), with a handle on the runner process that generates
// the tokens, to stop and continue it (Server.Pause).
//
// See docs/ollama.md for how the binary is built and what the model is.
package ollama
