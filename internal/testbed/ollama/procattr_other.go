//go:build unix && !linux

package ollama

import "syscall"

// serverProcAttr puts the server in a process group of its own, which Stop
// ends whole. (Runner discovery reads /proc, so Pause works on Linux only.)
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
