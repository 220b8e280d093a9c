// Command tinymodel writes the end-to-end suite's tiny llama model (a GGUF
// file) and the Modelfile that serves it, so it can be tried with any
// Ollama:
//
//	go run ./internal/testbed/ollama/tinymodel -dir /tmp/tiny
//	ollama create streamwatch-tiny -f /tmp/tiny/Modelfile
//
// See docs/ollama.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/streamwatch/streamwatch/internal/testbed/ollama"
)

func main() {
	dir := flag.String("dir", ".", "directory to write tiny.gguf and Modelfile into")
	seed := flag.Uint64("seed", 1, "seed of the random weights")
	flag.Parse()
	if err := run(*dir, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

func run(dir string, seed uint64) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	model := filepath.Join(abs, "tiny.gguf")
	if err := ollama.WriteModelFile(model, ollama.ModelOptions{Seed: seed}); err != nil {
		return err
	}
	mf := filepath.Join(abs, "Modelfile")
	if err := os.WriteFile(mf, []byte(ollama.Modelfile(model)), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", model, mf)
	return nil
}
