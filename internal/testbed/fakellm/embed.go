package fakellm

import (
	_ "embed" // the default profiles are part of the binary
	"fmt"
	"slices"
)

// defaultProfiles is profiles.yaml of this directory, built into every
// binary so that fakellm runs from any directory. (testdata/fakellm/profiles.yaml
// is a link to the same file, for tests that load it by path.)
//
//go:embed profiles.yaml
var defaultProfiles []byte

// DefaultProfiles returns the profiles fakellm is built with: the ones the
// demo, the e2e suite and the tests script against.
func DefaultProfiles() (*Config, error) {
	c, err := Parse(defaultProfiles)
	if err != nil {
		return nil, fmt.Errorf("built-in profiles: %w", err)
	}
	return c, nil
}

// DefaultProfilesYAML returns the text of the built-in profiles, a starting
// point for a file of one's own.
func DefaultProfilesYAML() []byte { return slices.Clone(defaultProfiles) }
