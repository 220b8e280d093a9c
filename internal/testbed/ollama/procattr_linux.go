package ollama

import "syscall"

// serverProcAttr puts the server in a process group of its own, which Stop
// ends whole. Should the test binary die without cleaning up, the server
// gets SIGTERM, on which Ollama kills its runners (SIGKILL, which also ends
// a stopped one) and exits.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
