package pgcluster

import "syscall"

// setPdeathsig has the kernel kill the child when the thread that started it
// dies, so a killed test binary does not leak servers. It is applied after
// the credential switch, which would otherwise clear it.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
