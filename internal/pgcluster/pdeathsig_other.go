//go:build unix && !linux

package pgcluster

import "syscall"

// setPdeathsig is a no-op: only Linux can tie a child's life to its parent.
func setPdeathsig(*syscall.SysProcAttr) {}
