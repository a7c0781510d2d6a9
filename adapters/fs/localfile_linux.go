//go:build linux

package fs

import (
	"io"
	iofs "io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/intendhq/intend/adapters/internal/fsys"
)

// The executor's files are read and written through their descriptors
// directly: os.Open registers every file with the runtime's poller (four
// fcntl calls and an epoll_ctl that a regular file refuses) and sets a
// finalizer, which doubled the system calls of observing an unchanged
// file (issue 28).

// fdFile is a file of the executor's host opened by openRead or
// createExcl; its methods' errors are *iofs.PathError wrapping the errno,
// as package os reports them.
type fdFile struct {
	fd   int
	path string
}

var (
	_ fsys.ReadFile  = (*fdFile)(nil)
	_ fsys.WriteFile = (*fdFile)(nil)
)

// openRead opens path for reading.
func openRead(path string) (fsys.ReadFile, error) {
	return openFD(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
}

// createExcl creates path (which must not exist) for writing, mode 0600.
func createExcl(path string) (fsys.WriteFile, error) {
	return openFD(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
}

func openFD(path string, flags int, perm uint32) (*fdFile, error) {
	for {
		fd, err := syscall.Open(path, flags, perm)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &iofs.PathError{Op: "open", Path: path, Err: err}
		}
		return &fdFile{fd: fd, path: path}, nil
	}
}

func (f *fdFile) err(op string, err error) error {
	return &iofs.PathError{Op: op, Path: f.path, Err: err}
}

func (f *fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Read(f.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, f.err("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *fdFile) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(f.fd, p[done:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, f.err("write", err)
		}
		if n == 0 {
			return done, f.err("write", io.ErrShortWrite)
		}
		done += n
	}
	return done, nil
}

func (f *fdFile) Seek(offset int64, whence int) (int64, error) {
	off, err := syscall.Seek(f.fd, offset, whence)
	if err != nil {
		return 0, f.err("seek", err)
	}
	return off, nil
}

func (f *fdFile) Stat() (iofs.FileInfo, error) {
	fi := &statInfo{name: filepath.Base(f.path)}
	for {
		err := syscall.Fstat(f.fd, &fi.st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, f.err("stat", err)
		}
		return fi, nil
	}
}

func (f *fdFile) Chmod(mode iofs.FileMode) error {
	m := uint32(mode.Perm())
	if mode&iofs.ModeSetuid != 0 {
		m |= syscall.S_ISUID
	}
	if mode&iofs.ModeSetgid != 0 {
		m |= syscall.S_ISGID
	}
	if mode&iofs.ModeSticky != 0 {
		m |= syscall.S_ISVTX
	}
	if err := syscall.Fchmod(f.fd, m); err != nil {
		return f.err("chmod", err)
	}
	return nil
}

func (f *fdFile) Chown(uid, gid int) error {
	if err := syscall.Fchown(f.fd, uid, gid); err != nil {
		return f.err("chown", err)
	}
	return nil
}

// Close closes the descriptor; a second Close is an error, as os's.
func (f *fdFile) Close() error {
	if f.fd < 0 {
		return f.err("close", iofs.ErrClosed)
	}
	err := syscall.Close(f.fd)
	f.fd = -1
	if err != nil {
		return f.err("close", err)
	}
	return nil
}

// statInfo is what fstat says of an fdFile, read as os.Lstat's FileInfo
// is: Sys is the *syscall.Stat_t.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *statInfo) Name() string       { return fi.name }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *statInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *statInfo) Sys() any           { return &fi.st }

func (fi *statInfo) Mode() iofs.FileMode {
	m := iofs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= iofs.ModeDevice
	case syscall.S_IFCHR:
		m |= iofs.ModeDevice | iofs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= iofs.ModeDir
	case syscall.S_IFIFO:
		m |= iofs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= iofs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= iofs.ModeSocket
	}
	if fi.st.Mode&syscall.S_ISGID != 0 {
		m |= iofs.ModeSetgid
	}
	if fi.st.Mode&syscall.S_ISUID != 0 {
		m |= iofs.ModeSetuid
	}
	if fi.st.Mode&syscall.S_ISVTX != 0 {
		m |= iofs.ModeSticky
	}
	return m
}

// sameFile compares the device and inode numbers of a and b, from
// os.Lstat, os.Stat or an fdFile's Stat.
func sameFile(a, b iofs.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
