// Package docs holds no code: its test compiles the Go snippets of the
// repository's Markdown files, so a README example that no longer builds
// fails `make test` instead of a reader.
package docs

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippet says how one ```go block of a Markdown file compiles: the
// imports it needs and the names it assumes, declared before it. A block
// is statements (in a function, returning an error when returnsErr is
// set) or, with decl, top-level declarations. A line "..." stands for
// elided code and is dropped.
type snippet struct {
	imports    []string // import specs, such as `openai "github.com/openai/openai-go/v3"`
	given      string   // declarations of the names the block uses and does not declare
	after      string   // statements that use what the block declares and leaves unused
	decl       bool     // the block is top-level declarations
	returnsErr bool     // the block returns an error
	skip       string   // why the block is not compiled (not Go of this module)
}

const (
	hedgeprobePkg = `"github.com/streamwatch/streamwatch/hedgeprobe"`
	ssePkg        = `"github.com/streamwatch/streamwatch/hedgeprobe/sse"`
	tracePkg      = `"go.opentelemetry.io/otel/trace"`
)

// snippets lists every ```go block, by file and its number in the file
// (from 1). A block not listed fails the test: a new example is compiled
// from the day it is written.
var snippets = map[string]snippet{
	"README.md#1": {
		imports: []string{`"context"`, `"fmt"`, `"log"`, `"time"`, hedgeprobePkg, ssePkg, tracePkg},
		given: `var ctx context.Context
var tp trace.TracerProvider
var key string
var msgs []sse.Message
var anthropicReq sse.AnthropicRequest`,
		returnsErr: true,
	},
	"README.md#2": {
		imports: []string{`"context"`, hedgeprobePkg, ssePkg},
		given: `var ctx context.Context
var p *hedgeprobe.Prober[sse.ChatChunk]
var vllmURL, ollamaURL string
var msgs []sse.Message`,
		after: `_ = s`,
	},
	"README.md#3": {
		imports: []string{`"context"`,
			`"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"`,
			`"go.opentelemetry.io/otel/sdk/resource"`,
			`sdktrace "go.opentelemetry.io/otel/sdk/trace"`,
			`otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"`},
		decl: true,
	},
	"README.md#4": {
		imports: []string{`"context"`, `"fmt"`, `"net/http"`, hedgeprobePkg, ssePkg, tracePkg,
			`"github.com/streamwatch/streamwatch/hedgeprobe/openaigo"`,
			`"github.com/openai/openai-go/v3"`, `"github.com/openai/openai-go/v3/option"`},
		given: `var ctx context.Context
var tp trace.TracerProvider
var cfg hedgeprobe.Config
var msgs []openai.ChatCompletionMessageParamUnion
var backupClient openai.Client`,
		returnsErr: true,
	},
	"cmd/fakellm/README.md#1": {
		imports: []string{`"github.com/openai/openai-go/v3"`, `"github.com/openai/openai-go/v3/option"`},
		after:   `_, _ = primary, backup`,
	},
	"docs/design.md#1": {skip: "the design's statement of the interface; hedgeprobe.Source is its code"},
	"docs/ollama.md#1": {
		imports: []string{`"context"`, `"time"`, hedgeprobePkg, ssePkg},
		given:   `var ctx context.Context`,
		after:   `_ = stream`,
	},
	"docs/sdks.md#1": {
		imports: []string{`"context"`, `"errors"`, `"fmt"`, `"io"`, hedgeprobePkg,
			`"github.com/streamwatch/streamwatch/hedgeprobe/goopenai"`,
			`openai "github.com/sashabaranov/go-openai"`},
		given: `var ctx context.Context
var cfg hedgeprobe.Config
var client, backup *openai.Client
var req openai.ChatCompletionRequest`,
		returnsErr: true,
	},
	"docs/sdks.md#2": {
		imports: []string{`"context"`, `"fmt"`, `"net/http"`, hedgeprobePkg, ssePkg,
			`"github.com/streamwatch/streamwatch/hedgeprobe/anthropicgo"`,
			`"github.com/anthropics/anthropic-sdk-go/v2"`, `"github.com/anthropics/anthropic-sdk-go/v2/option"`},
		given: `var ctx context.Context
var cfg hedgeprobe.Config
var params anthropic.MessageNewParams
var backup anthropic.Client`,
		returnsErr: true,
	},
	"hedgeprobe/README.md#1": {
		imports: []string{`"context"`, `"time"`, hedgeprobePkg, ssePkg, tracePkg},
		given: `var ctx context.Context
var tp trace.TracerProvider
var primary, fallback hedgeprobe.Route[sse.ChatChunk]
var use func(sse.ChatChunk)`,
		after: `_ = err`,
	},
}

var (
	goBlock = regexp.MustCompile("(?m)^```go\n((?s:.*?))^```\n")
	nonWord = regexp.MustCompile(`\W+`)
)

// TestSnippetsCompile writes each block, wrapped, as a file of a package
// that exists only in a go build -overlay, and builds it. A //line
// directive makes the compiler's errors point into the Markdown file.
func TestSnippetsCompile(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	replace := map[string]string{}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			// The build below reads the Go sources, which go test's cache
			// does not see; a stat it records, so a changed source reruns
			// the test rather than replaying a cached pass.
			_, err := os.Stat(path)
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, m := range goBlock.FindAllSubmatchIndex(text, -1) {
			id := fmt.Sprintf("%s#%d", rel, i+1)
			seen[id] = true
			sn, ok := snippets[id]
			if !ok {
				t.Errorf("%s: a go block the test does not know; add it to snippets", id)
				continue
			}
			if sn.skip != "" {
				continue
			}
			line := 1 + strings.Count(string(text[:m[2]]), "\n")
			name := fmt.Sprintf("snippet%d_%s.go", len(replace), nonWord.ReplaceAllString(rel, "_"))
			src := sn.source(path, line, len(replace), string(text[m[2]:m[3]]))
			if err := os.WriteFile(filepath.Join(tmp, name), []byte(src), 0o644); err != nil {
				return err
			}
			replace[filepath.Join(root, "docs", "snippets", name)] = filepath.Join(tmp, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range snippets {
		if !seen[id] {
			t.Errorf("%s: listed in snippets but no such go block", id)
		}
	}
	if len(replace) == 0 {
		t.Fatal("no go block found")
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "build", "-overlay="+overlayFile, "./docs/snippets")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the Markdown's go blocks do not compile (%v):\n%s", err, out)
	}
}

// source is block as a file of package snippets: the block in the n-th
// function, its lines numbered as in the Markdown file at path.
func (sn snippet) source(path string, line, n int, block string) string {
	var b strings.Builder
	b.WriteString("package snippets\n\nimport (\n")
	for _, imp := range sn.imports {
		b.WriteString("\t" + imp + "\n")
	}
	b.WriteString(")\n\n")
	var body []string
	for l := range strings.Lines(block) {
		if strings.TrimSpace(l) == "..." {
			l = "\n" // keeps the line numbers
		}
		body = append(body, l)
	}
	code := strings.Join(body, "")
	if sn.decl {
		fmt.Fprintf(&b, "//line %s:%d\n%s", path, line, code)
		return b.String()
	}
	result := ""
	if sn.returnsErr {
		result = " error"
	}
	fmt.Fprintf(&b, "func snippet%d()%s {\n%s\n//line %s:%d\n%s", n, result, sn.given, path, line, code)
	fmt.Fprintf(&b, "//line %s:1\n%s\n", "after-the-block", sn.after)
	if sn.returnsErr {
		b.WriteString("return nil\n")
	}
	b.WriteString("}\n")
	return b.String()
}
