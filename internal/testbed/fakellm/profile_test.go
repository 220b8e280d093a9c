package fakellm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

const profilesFile = "../../../testdata/fakellm/profiles.yaml"

func TestProfilesFile(t *testing.T) {
	cfg, err := LoadFile(profilesFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Default != "steady" {
		t.Errorf("default = %q, want steady", cfg.Default)
	}
	// The lead's demo and the e2e tests rely on these names.
	for _, name := range []string{"steady", "stall", "slow-first", "error-mid", "disconnect", "ratelimit", "server-error"} {
		if _, ok := cfg.Profiles[name]; !ok {
			t.Errorf("profile %q missing (have %v)", name, cfg.Names())
		}
	}
	st := cfg.Profiles["stall"]
	if st.Chunks != 40 || len(st.Silences) != 1 || st.Silences[0].AfterChunk != 5 ||
		time.Duration(st.Silences[0].Duration.Fixed) != 30*time.Second || st.Silences[0].Keepalive.Every == 0 {
		t.Errorf("stall = %+v", st)
	}
	if p := cfg.Profiles["ratelimit"]; p.Status != 429 || time.Duration(p.RetryAfter) != 2*time.Second {
		t.Errorf("ratelimit = %+v", p)
	}
	if p := cfg.Profiles["slow-first"]; time.Duration(p.TTFT.Fixed) != 8*time.Second {
		t.Errorf("slow-first ttft = %+v", p.TTFT)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no profiles", "default: a\n", "profiles: none defined"},
		{"bad default", "default: b\nprofiles: {a: {chunks: 1}}\n", `default: "b" is not a profile (have a)`},
		{"unknown key", "default: a\nprofiles: {a: {chunkz: 1}}\n", "field chunkz not found"},
		{"bad duration", "default: a\nprofiles: {a: {ttft: 3 seconds}}\n", `line 2: time: unknown unit " seconds"`},
		{"bad status", "default: a\nprofiles: {a: {status: 200}}\n", "profiles.a.status: 200 is not 400-599"},
		{"negative chunks", "default: a\nprofiles: {a: {chunks: -1}}\n", "profiles.a.chunks: -1 is negative"},
		{"negative status_after", "default: a\nprofiles: {a: {status: 503, status_after: -1s}}\n", "profiles.a.status_after: -1s is negative"},
		{"status_after without status", "default: a\nprofiles: {a: {chunks: 1, status_after: 1s}}\n", "profiles.a.status_after: 1s needs a status"},
		{"negative sigma", "default: a\nprofiles: {a: {ttft: {median: 1s, sigma: -1}}}\n", "profiles.a.ttft.sigma: -1 must be >= 0"},
		{"fixed and median", "default: a\nprofiles: {a: {interval: {fixed: 1s, median: 1s}}}\n", "profiles.a.interval: set fixed (1s) or median (1s), not both"},
		{"silence past end", "default: a\nprofiles: {a: {chunks: 3, silences: [{after_chunk: 4, duration: 1s}]}}\n", "profiles.a.silences[0].after_chunk: 4 is outside 0..chunks (3)"},
		{"bad style", "default: a\nprofiles: {a: {chunks: 3, silences: [{after_chunk: 1, duration: 1s, keepalive: {every: 1s, style: beep}}]}}\n", `profiles.a.silences[0].keepalive.style: "beep" is not comment, ping or auto`},
		{"error past end", "default: a\nprofiles: {a: {chunks: 3, error: {after_chunk: 9}}}\n", "profiles.a.error.after_chunk: 9 is outside 0..chunks (3)"},
		{"disconnect past end", "default: a\nprofiles: {a: {chunks: 3, disconnect: {after_chunk: 9}}}\n", "profiles.a.disconnect.after_chunk: 9 is outside 0..chunks (3)"},
		{"empty profile", "default: a\nprofiles: {a: }\n", "profiles.a: empty profile"},
		{"negative max", "default: a\nprofiles: {a: {ttft: {median: 1s, sigma: 1, max: -5s}}}\n", "profiles.a.ttft.max: -5s is negative"},
		// Keys that could never take effect were accepted without a word.
		{"empty refused field", "default: a\nprofiles: {a: {chunks: 1, refuse_fields: [\"\"]}}\n", `profiles.a.refuse_fields[0]: "" is not a top-level request field`},
		{"nested refused field", "default: a\nprofiles: {a: {chunks: 1, refuse_fields: [stream_options.include_usage]}}\n", `profiles.a.refuse_fields[0]: "stream_options.include_usage" is not a top-level request field (refuse stream_options)`},
		{"refused twice", "default: a\nprofiles: {a: {chunks: 1, refuse_fields: [stream_options, stream_options]}}\n", `profiles.a.refuse_fields[1]: "stream_options" is listed twice`},
		{"usage on finish without usage", "default: a\nprofiles: {a: {chunks: 1, usage: false, usage_on_finish: true}}\n", "profiles.a.usage_on_finish: needs usage, which is false"},
		// The YAML decoder's bare "EOF" said nothing.
		{"empty file", "", "parse profiles: the file is empty: it needs a default and profiles"},
		{"only a comment", "# profiles\n", "parse profiles: the file is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDistForms(t *testing.T) {
	cfg, err := Parse([]byte(`default: a
profiles:
  a:
    ttft: 300ms
    interval: {median: 100ms, sigma: 0.5, max: 150ms}
  b:
    ttft: {fixed: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if got := cfg.Profiles["a"].TTFT.Sample(rng); got != 300*time.Millisecond {
		t.Errorf("bare duration sample = %s", got)
	}
	if got := cfg.Profiles["b"].TTFT.Sample(rng); got != 2*time.Second {
		t.Errorf("fixed sample = %s", got)
	}
	var draws []time.Duration
	for range 2001 {
		draws = append(draws, cfg.Profiles["a"].Interval.Sample(rng))
	}
	slices.Sort(draws)
	if med := draws[1000]; med < 90*time.Millisecond || med > 110*time.Millisecond {
		t.Errorf("lognormal median = %s, want ~100ms", med)
	}
	if draws[len(draws)-1] != 150*time.Millisecond {
		t.Errorf("max draw = %s, want the 150ms cap", draws[len(draws)-1])
	}
	if draws[0] >= 100*time.Millisecond {
		t.Errorf("min draw = %s, want spread below the median", draws[0])
	}
}

// TestDistHeavyTail: a draw beyond a Duration's ~292 years saturates
// instead of wrapping negative, so the cap holds and, without one, the
// wait is the longest there is, not none.
func TestDistHeavyTail(t *testing.T) {
	for _, tc := range []struct {
		d        Dist
		min, max time.Duration
	}{
		{Dist{Median: Duration(time.Second), Sigma: 20, Max: Duration(time.Minute)}, 0, time.Minute},
		{Dist{Median: Duration(time.Second), Sigma: 20}, 0, math.MaxInt64},
	} {
		above := 0
		rng := rand.New(rand.NewPCG(3, 4))
		for range 1000 {
			v := tc.d.Sample(rng)
			if v < tc.min || v > tc.max {
				t.Fatalf("%+v drew %v, outside [%v, %v]", tc.d, v, tc.min, tc.max)
			}
			if v == tc.max {
				above++
			}
		}
		// P(20·Z > ln 60) ≈ 42 % of the draws reach the 1 min cap, and
		// P(20·Z > ln 9.2e9) ≈ 13 % the longest Duration (the old code
		// made the latter negative: below the cap, and no wait at all).
		if above < 80 {
			t.Errorf("%+v: %d of 1000 draws at %v, want at least the tail's ~13 %%", tc.d, above, tc.max)
		}
	}
}
