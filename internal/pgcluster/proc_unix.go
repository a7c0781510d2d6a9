//go:build unix

package pgcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/intendhq/intend/internal/childproc"
)

// runAs is the user postgres runs as when we are root.
type runAs struct {
	uid, gid uint32
}

// serverOwner returns nil when postgres can run as the current user, or the
// system user "postgres" when we are root (postgres refuses to run as root).
func serverOwner() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf(`pgcluster: running as root, and PostgreSQL refuses to run as root, but there is no "postgres" user to run it as (%w): run "apt-get install -y postgresql", which creates it`, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: uid of user postgres: %w", err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: gid of user postgres: %w", err)
	}
	return &runAs{uid: uint32(uid), gid: uint32(gid)}, nil
}

func sysProcAttr(owner *runAs, dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if owner != nil {
		a.Credential = &syscall.Credential{Uid: owner.uid, Gid: owner.gid}
	}
	if dieWithParent {
		childproc.DieWithParent(a)
	}
	childproc.OwnProcessGroup(a)
	return a
}

// chownTree gives dir and everything under it to owner.
func chownTree(dir string, owner *runAs) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(owner.uid), int(owner.gid))
	})
}

// makeTraversable adds the search bit for others to dir and its ancestors
// where owner could not otherwise pass through them (t.TempDir and
// os.MkdirTemp create 0700 directories). Listing stays forbidden.
func makeTraversable(dir string, owner *runAs) error {
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		canSearch := mode&0o001 != 0 ||
			(ok && st.Uid == owner.uid && mode&0o100 != 0) ||
			(ok && st.Gid == owner.gid && mode&0o010 != 0)
		if !canSearch {
			if err := os.Chmod(dir, fi.Mode()|0o001); err != nil {
				return fmt.Errorf("let user postgres reach the cluster: %w", err)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
