package stack

import "syscall"

// childAttr puts a child in its own process group, and has the kernel send
// it SIGTERM when the thread that started it ends — with this process, in
// practice: the Go runtime ends a thread only when a goroutine locked to
// it returns, and Start's callers lock none.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
