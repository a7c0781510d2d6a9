//go:build !linux

package childproc

import "syscall"

// DieWithParent is a no-op: only Linux can tie a child's life to its parent.
func DieWithParent(*syscall.SysProcAttr) {}

// OwnProcessGroup is a no-op off Linux.
func OwnProcessGroup(*syscall.SysProcAttr) {}
