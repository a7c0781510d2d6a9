package childproc

import "syscall"

// DieWithParent has the kernel kill the child when the thread that started
// it dies, so a killed test binary does not leak servers. Go applies it
// after a credential switch, which would otherwise clear it.
func DieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// OwnProcessGroup starts the child in a process group of its own, so that
// a Ctrl-C in the terminal (SIGINT to the foreground process group)
// reaches only us, and we stop our children in our order: a server after
// the clients that use it.
func OwnProcessGroup(a *syscall.SysProcAttr) { a.Setpgid = true }
