package childproc

import (
	"fmt"
	"syscall"
)

// Undumpable makes the calling process undumpable: other processes of the
// same user (commands it runs among them) can then neither read its
// memory or environment through /proc nor attach to it, and it leaves no
// core dump.
func Undumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", e)
	}
	return nil
}
