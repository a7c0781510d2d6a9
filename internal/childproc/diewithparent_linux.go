package childproc

import "syscall"

// DieWithParent has the kernel kill the child when the thread that started
// it dies, so a killed test binary does not leak servers. Go applies it
// after a credential switch, which would otherwise clear it.
func DieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
