//go:build !linux

package devtemporal

import "syscall"

// dieWithParent returns nil: only Linux can tie a child's life to its parent.
func dieWithParent() *syscall.SysProcAttr { return nil }
