// Package fsys is the seam between the logic of the file adapters
// (fs::File, fs::Directory, fs::Symlink in adapters/fs) and the file system
// they act on: the executor's own (adapters/fs) or a host reached over SFTP
// (adapters/ssh). One implementation of the adapters' logic serves every
// file system that implements FS.
//
// It is internal so that the public surface of adapters stays small: adapter
// authors use the registered types, not this seam.
package fsys

import (
	"context"
	"errors"
	"io"
	iofs "io/fs"

	"github.com/intendhq/intend/adapters"
)

// FS is the part of a POSIX file system the file adapters use. Paths are
// absolute and clean. Errors must wrap the standard sentinels where they
// apply (iofs.ErrNotExist, iofs.ErrExist, iofs.ErrPermission, or the
// syscall.Errno itself), since the adapters classify errors by them.
//
// An FS is used by many goroutines at once.
type FS interface {
	// Name says where the file system is, for messages: "" for the
	// executor's own, "root@host:22" for a remote one.
	Name() string

	// Lstat describes path without following a final symlink.
	Lstat(path string) (iofs.FileInfo, error)
	// Stat describes path, following symlinks.
	Stat(path string) (iofs.FileInfo, error)
	// Owner returns the numeric owner and group of what fi (from this FS's
	// Lstat, Stat or ReadFile.Stat) describes.
	Owner(fi iofs.FileInfo) (uid, gid uint32)
	// SameFile reports whether a and b (from this FS) describe the same
	// file, as well as the file system can tell.
	SameFile(a, b iofs.FileInfo) bool

	// Open opens path for reading.
	Open(path string) (ReadFile, error)
	// CreateExcl creates path, which must not exist (iofs.ErrExist
	// otherwise), for writing, with permissions at most 0600.
	CreateExcl(path string) (WriteFile, error)
	// Rename renames oldpath to newpath, replacing newpath atomically when
	// it exists.
	Rename(oldpath, newpath string) error
	// Remove removes a file, a symlink or an empty directory.
	Remove(path string) error
	// IsEmptyDir reports whether the directory at path has no entries.
	IsEmptyDir(path string) (bool, error)

	// Mkdir creates one directory; its mode is then set with Chmod.
	Mkdir(path string) error
	// MkdirAll creates path and its missing parents with mode 0755 (less
	// the umask); an existing directory is success.
	MkdirAll(path string) error
	// Chmod sets the mode bits (permissions, set-id and sticky) of path.
	Chmod(path string, mode iofs.FileMode) error
	// Chown sets the owner and group of path; -1 leaves one unchanged.
	// Callers check what is at path first: it may follow a final symlink.
	Chown(path string, uid, gid int) error

	// Symlink creates a symlink at path pointing to target.
	Symlink(target, path string) error
	// Readlink returns the target of the symlink at path.
	Readlink(path string) (string, error)

	// LookupID resolves a user or group name to its numeric id on this file
	// system's host; an unknown name is an error wrapping ErrUnknownName.
	LookupID(ctx context.Context, kind Principal, name string) (uint32, error)
	// IDName returns the name of a user or group id, or "" when it has
	// none.
	IDName(ctx context.Context, kind Principal, id uint32) (string, error)
}

// ReadFile is a file opened for reading.
type ReadFile interface {
	io.ReadSeekCloser
	Stat() (iofs.FileInfo, error)
}

// WriteFile is a new file opened for writing.
type WriteFile interface {
	io.Writer
	Chmod(mode iofs.FileMode) error
	Chown(uid, gid int) error
	Close() error
}

// Principal is what owns a file: a user or a group.
type Principal string

// The principals.
const (
	User  Principal = "user"
	Group Principal = "group"
)

// ErrUnknownName is wrapped by LookupID's error for a name the host does
// not know.
var ErrUnknownName = errors.New("no such name")

// Target is where the resources of a family of file types live, and how to
// reach it.
type Target interface {
	// Namespace is the prefix of the resource types: "fs" gives fs::File.
	Namespace() string
	// Attributes are the names of the attributes that say how to reach the
	// target (ssh's host, port, user, ...). They are allowed in the desired
	// state besides the type's own, checked by Check, and never observed,
	// so never diffed.
	Attributes() []string
	// Check validates those attributes of desired, one error per bad
	// attribute, each naming it. It is called in every adapter call,
	// dry-runs included.
	Check(desired adapters.Resource) []error
	// Open returns the file system of desired's target for one adapter
	// call, after Check accepted desired. Its errors are classified.
	Open(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (FS, error)
}
