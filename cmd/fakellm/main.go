// Command fakellm is a scripted LLM upstream for tests, demos and
// benchmarks: an OpenAI-compatible POST /v1/chat/completions and an
// Anthropic POST /v1/messages whose timing and faults follow named
// profiles, chosen per request with the X-Fakellm-Profile header or the
// path prefix /p/NAME. The profiles are built in; -profiles reads a file
// instead, and -print-profiles prints the built-in ones to start one from.
// fakellm -h lists the profiles and what each does.
//
// Usage:
//
//	fakellm [-addr 127.0.0.1:8089] [-profiles FILE] [-default steady]
//	        [-scale 1] [-seed 1] [-print-profiles]
//
// The first line on stdout is "fakellm listening on http://ADDR", so that a
// script started with -addr 127.0.0.1:0 can find the port. One log line per
// request goes to stderr. SIGINT or SIGTERM ends open streams and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/streamwatch/streamwatch/internal/testbed/fakellm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends. Its first line on stdout names the address.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address; 127.0.0.1:0 picks a free port")
	profiles := fs.String("profiles", "", "profiles YAML file (default: the built-in profiles)")
	def := fs.String("default", "", "profile of requests without an "+fakellm.ProfileHeader+" header (default: the profiles' own)")
	scale := fs.Float64("scale", 1, "time scale of every scripted duration (0.01 = 100x faster)")
	seed := fs.Uint64("seed", 1, "seed of the random draws")
	printProfiles := fs.Bool("print-profiles", false, "print the built-in profiles as YAML and exit")
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil // -h: the usage is the answer
	} else if err != nil {
		return err
	}
	if *printProfiles {
		_, err := stdout.Write(fakellm.DefaultProfilesYAML())
		return err
	}
	if !(*scale > 0) || math.IsInf(*scale, 1) {
		return fmt.Errorf("-scale: %v must be a finite number > 0", *scale)
	}
	cfg, err := loadProfiles(*profiles)
	if err != nil {
		return err
	}
	if *def != "" {
		cfg.Default = *def
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	srv, err := fakellm.New(fakellm.Options{Config: cfg, Scale: *scale, Seed: *seed, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		// Streams end when this context does: Shutdown alone would wait
		// for every scripted silence to pass.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	fmt.Fprintf(stdout, "fakellm listening on http://%s\n", ln.Addr())
	source := *profiles
	if source == "" {
		source = "built-in"
	}
	logger.Info("ready", "profiles", source, "default", cfg.Default, "names", cfg.Names(), "scale", *scale, "seed", *seed)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	// The streams end with ctx; what Shutdown may still wait for is a
	// client that has not finished sending its request. It gets a grace
	// period, then its connection is closed: a stop is not an error.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err := hs.Close(); err != nil {
			return err
		}
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadProfiles reads path, or the built-in profiles when path is empty.
func loadProfiles(path string) (*fakellm.Config, error) {
	if path == "" {
		return fakellm.DefaultProfiles()
	}
	return fakellm.LoadFile(path)
}

// usage is -h: the flags, how a request picks a profile, and the built-in
// profiles with what each does.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `fakellm: a scripted OpenAI- and Anthropic-compatible upstream.

  POST /v1/chat/completions (OpenAI)   POST /v1/messages (Anthropic)
  Pick a profile per request with the header %s: NAME, or per client
  with the base URL http://ADDR/p/NAME/v1 (Anthropic: http://ADDR/p/NAME).

Flags:
`, fakellm.ProfileHeader)
	fs.PrintDefaults()
	cfg, err := fakellm.DefaultProfiles()
	if err != nil {
		fmt.Fprintln(w, "\n", err)
		return
	}
	fmt.Fprintf(w, "\nBuilt-in profiles (default %s):\n", cfg.Default)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range cfg.Names() {
		fmt.Fprintf(tw, "  %s\t%s\n", name, cfg.Profiles[name].Description)
	}
	_ = tw.Flush()
}
