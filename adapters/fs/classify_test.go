package fs

import (
	"errors"
	iofs "io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/intendhq/intend/adapters"
)

// TestClassify checks the error classes directly: permission errors cannot
// be provoked on disk when the tests run as root.
func TestClassify(t *testing.T) {
	t.Parallel()
	const path = "/srv/app/config"
	cases := []struct {
		name   string
		reason string
		err    error
		want   adapters.Class
	}{
		{"EACCES", "permissions must change before a retry can succeed", syscall.EACCES, adapters.ClassPermanent},
		{"EPERM", "the operation is not allowed to the executor", syscall.EPERM, adapters.ClassPermanent},
		{"EROFS", "a read-only file system stays read-only", syscall.EROFS, adapters.ClassPermanent},
		{"EISDIR", "a directory in the way is not ours to remove", syscall.EISDIR, adapters.ClassPermanent},
		{"ENOSPC", "space may be freed", syscall.ENOSPC, adapters.ClassTransient},
		{"EIO", "I/O errors may be passing", syscall.EIO, adapters.ClassTransient},
		{"EMFILE", "descriptors are released by other work", syscall.EMFILE, adapters.ClassTransient},
		{"other", "an unknown error is retried", errors.New("boom"), adapters.ClassTransient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, in := range []error{c.err, &iofs.PathError{Op: "open", Path: path, Err: c.err}} {
				got := classify("write", path, in)
				if adapters.ClassOf(got) != c.want {
					t.Errorf("%s: class of %v = %q, want %q", c.reason, got, adapters.ClassOf(got), c.want)
				}
				if !errors.Is(got, c.err) {
					t.Errorf("%s: %v does not wrap %v", c.reason, got, c.err)
				}
				if strings.Count(got.Error(), path) != 1 {
					t.Errorf("%s: %q should name the path once", c.reason, got)
				}
			}
		})
	}
}
