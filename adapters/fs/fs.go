// Package fs holds the adapters for the local file system of the executor's
// host: fs::File (a regular file with its content, mode, owner and group),
// fs::Directory (a directory with its mode, owner and group, not its
// entries) and fs::Symlink (a symbolic link and its target).
//
// The same logic serves other file systems: Handlers returns the three
// handlers for another target (adapters/ssh registers them as ssh::File,
// ssh::Directory and ssh::Symlink, acting over SFTP).
package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"sort"
	"strings"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// Register adds every fs resource type to r. Registering twice panics, as
// adapters.Registry.Register does.
func Register(r *adapters.Registry) {
	r.Register(FileType, File{})
	r.Register(DirectoryType, Directory{})
	r.Register(SymlinkType, Symlink{})
}

// Handlers returns the File, Directory and Symlink handlers acting on the
// file systems t opens, with the types t.Namespace()+"::File" and so on.
// The zero values of File, Directory and Symlink act on the executor's own
// file system.
func Handlers(t fsys.Target) (File, Directory, Symlink) {
	return File{target: t}, Directory{target: t}, Symlink{target: t}
}

// targetOf returns t, or the local target for nil.
func targetOf(t fsys.Target) fsys.Target {
	if t == nil {
		return local{}
	}
	return t
}

// typeName is the resource type of kind ("File") on target t.
func typeName(t fsys.Target, kind string) string { return targetOf(t).Namespace() + "::" + kind }

// checkAttrs reports the attributes of desired that typ does not allow
// (neither its own nor the target's), sorted, as at most one error.
func checkAttrs(desired adapters.Resource, typ string, t fsys.Target, own ...string) []error {
	allowed := append(append([]string(nil), own...), t.Attributes()...)
	var unknown []string
	for k := range desired.Attributes {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return []error{fmt.Errorf("unknown attributes %s (%s allows %s)", quoteAll(unknown), typ, strings.Join(allowed, ", "))}
}

// open returns the file system of desired's target.
func open(ctx context.Context, hc *adapters.Context, t fsys.Target, desired adapters.Resource) (fsys.FS, error) {
	if err := ctx.Err(); err != nil {
		return nil, adapters.Transient(err)
	}
	return t.Open(ctx, hc, desired)
}

// on names a remote file system in err, keeping err's class.
func on(fs fsys.FS, err error) error {
	if err == nil || fs == nil || fs.Name() == "" {
		return err
	}
	return fmt.Errorf("on %s: %w", fs.Name(), err)
}

// statKind stats path for Observe without following a link: absent is
// exists=false (not an error); something of the wrong kind is check's
// error.
func statKind(fs fsys.FS, path string, check func(string, iofs.FileInfo) error) (iofs.FileInfo, bool, error) {
	fi, err := fs.Lstat(path)
	if isAbsent(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, classify("stat", path, err)
	}
	if err := check(path, fi); err != nil {
		return nil, false, err
	}
	return fi, true, nil
}
