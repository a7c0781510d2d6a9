package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// local is the target of the fs:: types: the executor's own file system,
// which needs no attributes to reach.
type local struct{}

func (local) Namespace() string                       { return "fs" }
func (local) Attributes() []string                    { return nil }
func (local) Check(desired adapters.Resource) []error { return nil }
func (local) Open(context.Context, *adapters.Context, adapters.Resource) (fsys.FS, error) {
	return localFS{}, nil
}

// localFS is the executor's file system, through package os.
type localFS struct{}

var _ fsys.FS = localFS{}

func (localFS) Name() string                                { return "" }
func (localFS) Lstat(path string) (iofs.FileInfo, error)    { return os.Lstat(path) }
func (localFS) Stat(path string) (iofs.FileInfo, error)     { return os.Stat(path) }
func (localFS) SameFile(a, b iofs.FileInfo) bool            { return sameFile(a, b) }
func (localFS) Rename(oldpath, newpath string) error        { return os.Rename(oldpath, newpath) }
func (localFS) Remove(path string) error                    { return os.Remove(path) }
func (localFS) Mkdir(path string) error                     { return os.Mkdir(path, 0o700) }
func (localFS) MkdirAll(path string) error                  { return os.MkdirAll(path, 0o755) }
func (localFS) Chmod(path string, mode iofs.FileMode) error { return os.Chmod(path, mode) }
func (localFS) Chown(path string, uid, gid int) error       { return os.Lchown(path, uid, gid) }
func (localFS) Symlink(target, path string) error           { return os.Symlink(target, path) }
func (localFS) Readlink(path string) (string, error)        { return os.Readlink(path) }

func (localFS) Owner(fi iofs.FileInfo) (uid, gid uint32) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid, st.Gid
	}
	return 0, 0
}

func (localFS) Open(path string) (fsys.ReadFile, error)        { return openRead(path) }
func (localFS) CreateExcl(path string) (fsys.WriteFile, error) { return createExcl(path) }

func (localFS) IsEmptyDir(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != io.EOF {
		return false, err
	}
	return true, nil
}

func (localFS) LookupID(_ context.Context, kind fsys.Principal, name string) (uint32, error) {
	var (
		id  string
		err error
	)
	if kind == fsys.User {
		var u *user.User
		if u, err = user.Lookup(name); err == nil {
			id = u.Uid
		}
	} else {
		var g *user.Group
		if g, err = user.LookupGroup(name); err == nil {
			id = g.Gid
		}
	}
	var (
		unknownUser  user.UnknownUserError
		unknownGroup user.UnknownGroupError
	)
	if errors.As(err, &unknownUser) || errors.As(err, &unknownGroup) {
		return 0, fmt.Errorf("%s %q: %w", kind, name, fsys.ErrUnknownName)
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q has id %q, not a number", kind, name, id)
	}
	return uint32(n), nil
}

func (localFS) IDName(_ context.Context, kind fsys.Principal, id uint32) (string, error) {
	s := strconv.FormatUint(uint64(id), 10)
	if kind == fsys.User {
		u, err := user.LookupId(s)
		var unknown user.UnknownUserIdError
		if errors.As(err, &unknown) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return u.Username, nil
	}
	g, err := user.LookupGroupId(s)
	var unknown user.UnknownGroupIdError
	if errors.As(err, &unknown) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return g.Name, nil
}
