package fakellm

import (
	"bytes"
	"os"
	"testing"
)

// The built-in profiles parse, each says what it is for (fakellm -h lists
// the descriptions), and testdata/fakellm/profiles.yaml is the same file.
func TestDefaultProfiles(t *testing.T) {
	cfg, err := DefaultProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range cfg.Names() {
		if cfg.Profiles[name].Description == "" {
			t.Errorf("profile %q has no description", name)
		}
	}
	onDisk, err := os.ReadFile(profilesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, DefaultProfilesYAML()) {
		t.Errorf("%s differs from the built-in profiles.yaml; it should be a link to it", profilesFile)
	}
}
