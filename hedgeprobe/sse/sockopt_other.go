//go:build !linux

package sse

import (
	"syscall"
	"time"
)

// userTimeoutControl is a no-op: TCP_USER_TIMEOUT is Linux-only.
func userTimeoutControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
