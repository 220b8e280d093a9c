package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCollectorDoesNotImportSDKs keeps the LLM SDKs, the test machinery
// and the client library out of the collector build: nothing under
// processor/ or connector/ may depend on them.
func TestCollectorDoesNotImportSDKs(t *testing.T) {
	root := filepath.Join("..", "..")
	var patterns []string
	for _, dir := range []string{"processor", "connector"} {
		// A directory moved away would otherwise check nothing.
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Fatalf("the collector components' %s/: %v", dir, err)
		}
		patterns = append(patterns, "./"+dir+"/...")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(gobin, append([]string{"list", "-deps", "-test=false"}, patterns...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/openai/", "github.com/sashabaranov/", "github.com/anthropics/",
			"github.com/streamwatch/streamwatch/internal/testbed",
			"github.com/streamwatch/streamwatch/hedgeprobe",
		} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the collector build imports %s", pkg)
			}
		}
	}
}
