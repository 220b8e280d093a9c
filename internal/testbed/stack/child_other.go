//go:build !linux

package stack

import "syscall"

// childAttr puts a child in its own process group. Outside Linux a child
// outlives a parent that dies without stopping it.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
