package hedgeprobe

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReadmeAPI keeps README.md's API list in step with the code: it is
// `go doc -short` of the package plus the methods of Prober and Stream.
func TestReadmeAPI(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	doc := func(args ...string) string {
		out, err := exec.Command(gobin, append([]string{"doc"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go doc %v: %v", args, err)
		}
		return string(out)
	}
	want := doc("-short", ".")
	for _, typ := range []string{"Prober", "Stream"} {
		for _, l := range strings.Split(doc(".", typ), "\n") {
			if strings.HasPrefix(l, "func (") {
				want += l + "\n"
			}
		}
	}
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, "<!-- go doc -->\n```\n"), strings.Index(readme, "```\n<!-- /go doc -->")
	if i < 0 || j < i {
		t.Fatal("README.md has no go doc block")
	}
	if got := readme[i+len("<!-- go doc -->\n```\n") : j]; got != want {
		t.Fatalf("README.md's API list is stale; put this between the markers:\n%s", want)
	}
}
