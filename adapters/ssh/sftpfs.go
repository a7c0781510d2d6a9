package ssh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/intendhq/intend/adapters/internal/fsys"
)

// sftpFS is a host's file system over SFTP, for one adapter call. User and
// group names are looked up in the host's /etc/passwd and /etc/group, then
// with getent.
type sftpFS struct {
	c    *conn
	ssh  *gossh.Client
	sftp *sftp.Client
}

var _ fsys.FS = (*sftpFS)(nil)

func (f *sftpFS) Name() string { return f.c.spec.name() }

func (f *sftpFS) Lstat(path string) (iofs.FileInfo, error) { return f.sftp.Lstat(path) }
func (f *sftpFS) Stat(path string) (iofs.FileInfo, error)  { return f.sftp.Stat(path) }

func (f *sftpFS) Owner(fi iofs.FileInfo) (uid, gid uint32) {
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		return st.UID, st.GID
	}
	return 0, 0
}

// SameFile compares what SFTP tells of a file: it has no inode numbers.
func (f *sftpFS) SameFile(a, b iofs.FileInfo) bool {
	ua, ga := f.Owner(a)
	ub, gb := f.Owner(b)
	return a.Mode() == b.Mode() && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && ua == ub && ga == gb
}

func (f *sftpFS) Open(path string) (fsys.ReadFile, error) {
	file, err := f.sftp.Open(path)
	if err != nil {
		return nil, err
	}
	return file, nil
}

// CreateExcl creates the file and narrows its mode at once: SFTP creates it
// with 0666 less the server's umask, and the content written next may be
// secret.
func (f *sftpFS) CreateExcl(path string) (fsys.WriteFile, error) {
	file, err := f.sftp.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return nil, f.existErr("create", path, err)
	}
	if err := file.Chmod(0o600); err != nil {
		file.Close()
		f.sftp.Remove(path)
		return nil, err
	}
	return file, nil
}

// Rename replaces newpath atomically with the posix-rename extension; the
// plain SFTP rename refuses an existing target.
func (f *sftpFS) Rename(oldpath, newpath string) error {
	if _, ok := f.sftp.HasExtension("posix-rename@openssh.com"); ok {
		return f.sftp.PosixRename(oldpath, newpath)
	}
	return f.sftp.Rename(oldpath, newpath)
}

func (f *sftpFS) Remove(path string) error { return f.sftp.Remove(path) }

func (f *sftpFS) IsEmptyDir(path string) (bool, error) {
	entries, err := f.sftp.ReadDir(path)
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

func (f *sftpFS) Mkdir(path string) error {
	return f.existErr("mkdir", path, f.sftp.Mkdir(path))
}

func (f *sftpFS) MkdirAll(path string) error { return f.sftp.MkdirAll(path) }

func (f *sftpFS) Chmod(path string, mode iofs.FileMode) error { return f.sftp.Chmod(path, mode) }

// Chown passes -1 through as (uid_t)-1, which chown(2) on the host reads as
// "unchanged".
func (f *sftpFS) Chown(path string, uid, gid int) error { return f.sftp.Chown(path, uid, gid) }

func (f *sftpFS) Symlink(target, path string) error {
	return f.existErr("symlink", path, f.sftp.Symlink(target, path))
}

func (f *sftpFS) Readlink(path string) (string, error) { return f.sftp.ReadLink(path) }

// existErr turns a failure to create path into iofs.ErrExist when path
// exists: SFTP version 3 reports EEXIST only as a generic failure.
func (f *sftpFS) existErr(op, path string, err error) error {
	if err == nil || errors.Is(err, iofs.ErrNotExist) || errors.Is(err, iofs.ErrPermission) {
		return err
	}
	if _, lerr := f.sftp.Lstat(path); lerr == nil {
		return &iofs.PathError{Op: op, Path: path, Err: iofs.ErrExist}
	}
	return err
}

// lookupKey is what a lookup is keyed by: a name or a decimal id. Keys are
// checked again here since they become part of a remote command.
var lookupKey = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,255}\$?$`)

func database(kind fsys.Principal) string {
	if kind == fsys.User {
		return "passwd"
	}
	return "group"
}

func (f *sftpFS) LookupID(ctx context.Context, kind fsys.Principal, name string) (uint32, error) {
	fields, err := f.lookup(ctx, database(kind), name)
	if err != nil {
		return 0, err
	}
	if fields == nil {
		return 0, fmt.Errorf("%s %q: %w", kind, name, fsys.ErrUnknownName)
	}
	id, err := strconv.ParseUint(fields[2], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q has id %q on %s, not a number", kind, name, fields[2], f.Name())
	}
	return uint32(id), nil
}

func (f *sftpFS) IDName(ctx context.Context, kind fsys.Principal, id uint32) (string, error) {
	fields, err := f.lookup(ctx, database(kind), strconv.FormatUint(uint64(id), 10))
	if err != nil || fields == nil {
		return "", err
	}
	return fields[0], nil
}

// lookup returns the fields of the passwd or group entry whose name (or, for
// a decimal key, id) is key, or nil when there is none. It reads
// /etc/passwd or /etc/group over SFTP first (cheap, and first in every
// usual nsswitch.conf), then asks getent, which knows the other sources
// (LDAP, sssd). Entries found are cached for the connection's life;
// absences are not, so a user created by an earlier resource is found.
func (f *sftpFS) lookup(ctx context.Context, db, key string) ([]string, error) {
	if !lookupKey.MatchString(key) {
		return nil, fmt.Errorf("%q is not a name or id", key)
	}
	ck := db + "\x00" + key
	if v, ok := f.c.names.Load(ck); ok {
		return v.([]string), nil
	}
	var fields []string
	if out, err := f.readEntries(db); err == nil {
		fields = findEntry(out, key)
	}
	if fields == nil {
		out, err := f.getent(ctx, db, key)
		var exit *gossh.ExitError
		switch {
		case errors.As(err, &exit) && (exit.ExitStatus() == 2 || exit.ExitStatus() == 127):
			// Not found, or no getent (the files were all there is).
		case err != nil:
			return nil, fmt.Errorf("look up %s %q on %s: %w", db, key, f.Name(), err)
		default:
			fields = findEntry(out, key)
		}
	}
	if fields != nil {
		f.c.names.Store(ck, fields)
	}
	return fields, nil
}

// getent runs "getent <db> <key>" on the host.
func (f *sftpFS) getent(ctx context.Context, db, key string) ([]byte, error) {
	select {
	case f.c.sessions <- struct{}{}:
		defer func() { <-f.c.sessions }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s, err := f.ssh.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Output("getent " + db + " " + key)
}

// readEntries reads /etc/passwd or /etc/group over SFTP.
func (f *sftpFS) readEntries(db string) ([]byte, error) {
	file, err := f.sftp.Open("/etc/" + db)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return io.ReadAll(file)
}

// findEntry returns the fields of the first line of out (passwd or group
// format: name:x:id:...) whose name is key or, when key is decimal, whose
// id is key.
func findEntry(out []byte, key string) []string {
	_, err := strconv.ParseUint(key, 10, 32)
	numeric := err == nil
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if fields[0] == key || numeric && fields[2] == key {
			return fields
		}
	}
	return nil
}
