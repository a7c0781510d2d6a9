package devtemporal

import "syscall"

// dieWithParent has the kernel kill the child when the thread that started
// it dies, so a killed test binary does not leak dev servers.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
