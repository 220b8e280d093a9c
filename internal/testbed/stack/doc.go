// Package stack starts and stops the processes of a local streamwatch stack
// — otelcol-streamwatch, Prometheus, fakellm — for `make demo` and the
// end-to-end suite.
//
// Every process binds 127.0.0.1 on a port chosen free at start, writes its
// output to a log file the caller can show on failure, and is stopped (SIGTERM,
// then SIGKILL after a grace period) by Stop or when the context ends, so a
// failing test never leaves a server behind.
package stack
