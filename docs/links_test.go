// Package docs_test checks the repository's Markdown: every relative link
// points to a file that exists and, for a link into a Markdown file, to a
// heading it has. The docs cross-reference each other heavily; a renamed
// heading or a moved file otherwise breaks links silently.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	fence   = regexp.MustCompile("(?s)```.*?```")
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`^#+\s+(.*)`)
)

// markdownFiles returns the Markdown files of the repository, relative to
// its root, leaving out build output and tool caches.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// slug is the anchor GitHub gives a heading: lower case, every character
// but letters, digits, '-', '_' and spaces dropped, spaces made '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown text, a repeated
// heading's numbered as GitHub numbers them.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(fence.ReplaceAllString(text, ""), "\n") {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		base := slug(strings.TrimSpace(m[1]))
		a := base
		for n := 1; out[a]; n++ {
			a = base + "-" + strconv.Itoa(n)
		}
		out[a] = true
	}
	return out
}

func TestRelativeLinks(t *testing.T) {
	root := ".."
	files := markdownFiles(t, root)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s: %v", len(files), root, files)
	}
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Clean(f)] = string(b)
	}
	for _, f := range files {
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(texts[filepath.Clean(f)], ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := filepath.Clean(f)
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			text, ok := texts[file]
			if !ok {
				t.Errorf("%s: link %s: not a Markdown file of the repository", f, target)
				continue
			}
			if !anchors(text)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with that anchor", f, target, file)
			}
		}
	}
}

// TestSlug pins the anchors of headings shaped like the docs' own.
func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"3. Wire contract (probe → collector)":       "3-wire-contract-probe--collector",
		"Why the targets are not met":                "why-the-targets-are-not-met",
		"Built with profile-guided optimization":     "built-with-profile-guided-optimization",
		"`make e2e`: what it checks":                 "make-e2e-what-it-checks",
		"The collector: otelcol-streamwatch":         "the-collector-otelcol-streamwatch",
		"stall_ms and active_generation_ms, by hand": "stall_ms-and-active_generation_ms-by-hand",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
