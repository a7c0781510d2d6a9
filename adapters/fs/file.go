package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters"
)

// FileType is the resource type that File manages.
const FileType = "fs::File"

// Attribute names of fs::File.
const (
	attrPath    = "path"
	attrContent = "content"
	attrMode    = "mode"
)

// defaultPerm is the mode of a file created without a "mode" attribute.
const defaultPerm iofs.FileMode = 0o644

// maxInlineContent is the largest file whose text Observe reports; larger
// files (and files that are not UTF-8) are reported by digest instead, so the
// observation stays small and still compares unequal to any desired text.
const maxInlineContent = 16 << 20

// File manages one regular file on the executor's host: fs::File.
//
// Attributes:
//   - path (string, required): absolute and clean ("/etc/motd", not
//     "/etc/../etc/motd/"); it is the id attribute of fs::File.
//   - content (string, required unless purged): the whole text of the file.
//   - mode (string, optional): the permission bits as exactly four octal
//     digits with a leading zero, e.g. "0644". Other spellings ("644", 420)
//     are rejected rather than normalised, because the engine compares the
//     desired and the observed value as they are written. Without a mode, a
//     new file gets "0644" and an existing file keeps its mode. Set-id and
//     sticky bits are not managed.
//
// Any other attribute is a Permanent error. Owner and group are not managed:
// files are written as the executor's user. Writes replace the file by
// renaming a temporary file over it (atomic for readers, no fsync), so hard
// links to the old file keep the old content.
//
// Observe reports path, content and mode, and sets the facts "size" (bytes)
// and "mtime" (RFC 3339, UTC) of an existing file; Create and Update set
// them again after writing. When the file is larger than 16 MiB
// or not valid UTF-8 and differs from the desired content, content is
// reported as "sha256:<hex>" of the file. A directory, symlink or other
// non-regular file at path is a Permanent error: File never replaces what it
// did not create.
//
// File has no state and is safe for concurrent use on different paths.
type File struct{}

var _ adapters.Handler = File{}

// fileSpec is the validated desired state of one file.
type fileSpec struct {
	path       string
	content    string
	hasContent bool
	perm       iofs.FileMode
	hasPerm    bool
}

// parseSpec validates the attributes of desired. Every problem is reported,
// in a fixed order, as one Permanent error.
func parseSpec(desired adapters.Resource) (fileSpec, error) {
	var (
		spec fileSpec
		errs []error
	)
	var unknown []string
	for k := range desired.Attributes {
		switch k {
		case attrPath, attrContent, attrMode:
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		errs = append(errs, fmt.Errorf("unknown attributes %s (%s allows path, content, mode)", quoteAll(unknown), FileType))
	}

	switch p, ok := desired.Attributes[attrPath]; {
	case !ok:
		errs = append(errs, fmt.Errorf("attribute %q is required", attrPath))
	default:
		s, isString := p.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrPath, p))
		case !filepath.IsAbs(s):
			errs = append(errs, fmt.Errorf("attribute %q: %q is not an absolute path", attrPath, s))
		case filepath.Clean(s) != s:
			errs = append(errs, fmt.Errorf("attribute %q: %q is not clean (want %q)", attrPath, s, filepath.Clean(s)))
		default:
			spec.path = s
		}
	}
	if id := desired.ID; spec.path != "" {
		if id.Attribute != "" && id.Attribute != attrPath {
			errs = append(errs, fmt.Errorf("resource id names attribute %q, but %s is identified by %q", id.Attribute, FileType, attrPath))
		} else if id.Value != "" && id.Value != spec.path {
			errs = append(errs, fmt.Errorf("resource id names path %q, but attribute %q is %q", id.Value, attrPath, spec.path))
		}
	}

	switch c, ok := desired.Attributes[attrContent]; {
	case !ok && !desired.Purged:
		errs = append(errs, fmt.Errorf("attribute %q is required", attrContent))
	case !ok:
	default:
		s, isString := c.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrContent, c))
		} else {
			spec.content, spec.hasContent = s, true
		}
	}

	if m, ok := desired.Attributes[attrMode]; ok {
		perm, err := parseMode(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrMode, err))
		} else {
			spec.perm, spec.hasPerm = perm, true
		}
	}

	if len(errs) > 0 {
		return fileSpec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", FileType, errors.Join(errs...)))
	}
	return spec, nil
}

// parseMode accepts exactly the form formatMode produces, so that desired and
// observed modes compare equal exactly when the bits are equal.
func parseMode(v any) (iofs.FileMode, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("must be a string of 4 octal digits such as \"0644\", got %T", v)
	}
	if len(s) != 4 || strings.Trim(s, "01234567") != "" {
		return 0, fmt.Errorf("must be 4 octal digits such as \"0644\", got %q", s)
	}
	if s[0] != '0' {
		return 0, fmt.Errorf("%q sets set-id or sticky bits, which %s does not manage", s, FileType)
	}
	var perm iofs.FileMode
	for _, c := range s[1:] {
		perm = perm<<3 | iofs.FileMode(c-'0')
	}
	return perm, nil
}

// formatMode renders the permission bits of m as 4 octal digits ("0644").
func formatMode(m iofs.FileMode) string { return fmt.Sprintf("%04o", uint32(m.Perm())) }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// Observe reports the file at the desired path. It reads the file but never
// changes it.
func (File) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	spec, err := parseSpec(desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	fi, err := os.Lstat(spec.path)
	if isAbsent(err) {
		return adapters.Observation{Exists: false}, nil
	}
	if err != nil {
		return adapters.Observation{}, classify("stat", spec.path, err)
	}
	if err := checkRegular(spec.path, fi); err != nil {
		return adapters.Observation{}, err
	}
	content, err := readContent(spec, fi)
	if err != nil {
		return adapters.Observation{}, err
	}
	setFileFacts(hc, fi)
	return adapters.Observation{
		Exists: true,
		Attributes: map[string]any{
			attrPath:    spec.path,
			attrContent: content,
			attrMode:    formatMode(fi.Mode()),
		},
	}, nil
}

// checkRegular refuses anything but a regular file at path.
func checkRegular(path string, fi iofs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return adapters.Permanent(fmt.Errorf("%s is a directory, not a regular file", path))
	case m&iofs.ModeSymlink != 0:
		return adapters.Permanent(fmt.Errorf("%s is a symlink, not a regular file", path))
	default:
		return adapters.Permanent(fmt.Errorf("%s is not a regular file (mode %s)", path, m.Type()))
	}
}

// readContent returns the text of the file that Lstat described as fi, or
// its digest when it is too large or not UTF-8 and differs from the desired
// content.
func readContent(spec fileSpec, fi iofs.FileInfo) (string, error) {
	f, err := os.Open(spec.path)
	if err != nil {
		return "", classify("open", spec.path, err)
	}
	defer f.Close()
	// Open follows symlinks; make sure we read the file we stat'ed.
	ofi, err := f.Stat()
	if err != nil {
		return "", classify("stat", spec.path, err)
	}
	if !os.SameFile(fi, ofi) {
		return "", adapters.Transient(fmt.Errorf("%s was replaced while being observed", spec.path))
	}

	// Comparing with the desired text first keeps files of any size that
	// are already right cheap and equal.
	if spec.hasContent && ofi.Size() == int64(len(spec.content)) {
		same, err := equalContent(f, spec.content)
		if err != nil {
			return "", classify("read", spec.path, err)
		}
		if same {
			return spec.content, nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", classify("seek", spec.path, err)
		}
	}

	buf, err := io.ReadAll(io.LimitReader(f, maxInlineContent+1))
	if err != nil {
		return "", classify("read", spec.path, err)
	}
	if len(buf) <= maxInlineContent && utf8.Valid(buf) {
		return string(buf), nil
	}
	h := sha256.New()
	h.Write(buf)
	if _, err := io.Copy(h, f); err != nil {
		return "", classify("read", spec.path, err)
	}
	digest := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if spec.hasContent && digest == spec.content {
		// The file differs from the desired text (checked above), so the
		// placeholder must not compare equal to it, however unlikely.
		digest += " (file content)"
	}
	return digest, nil
}

// equalContent reports whether r yields exactly want.
func equalContent(r io.Reader, want string) (bool, error) {
	buf := make([]byte, 64<<10)
	off := 0
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if off+n > len(want) || string(buf[:n]) != want[off:off+n] {
				return false, nil
			}
			off += n
		}
		if err == io.EOF {
			return off == len(want), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// Create writes the file, creating missing parent directories with mode
// 0755. It is idempotent: a repeat overwrites the file with the same content.
func (File) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, err := parseSpec(desired)
	if err != nil {
		return err
	}
	perm := defaultPerm
	if spec.hasPerm {
		perm = spec.perm
	}
	return write(ctx, hc, spec, perm)
}

// Update changes the file. When only the mode differs it only changes the
// mode; otherwise it rewrites the file, keeping the current mode if no mode
// is desired.
func (File) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	spec, err := parseSpec(desired)
	if err != nil {
		return err
	}
	changed := diff.Names()
	hc.Info("updating file", "path", spec.path, "changed", changed)
	if spec.hasPerm && len(changed) == 1 && changed[0] == attrMode {
		if err := os.Chmod(spec.path, spec.perm); err != nil {
			return classify("chmod", spec.path, err)
		}
		hc.Info("changed file mode", "path", spec.path, "mode", formatMode(spec.perm))
		return nil
	}
	perm := spec.perm
	if !spec.hasPerm {
		fi, err := os.Lstat(spec.path)
		switch {
		case isAbsent(err):
			// Removed since Observe: write it as Create would.
			perm = defaultPerm
		case err != nil:
			return classify("stat", spec.path, err)
		default:
			if err := checkRegular(spec.path, fi); err != nil {
				return err
			}
			perm = fi.Mode().Perm()
		}
	}
	return write(ctx, hc, spec, perm)
}

// write replaces the file at spec.path with spec.content and mode perm.
func write(ctx context.Context, hc *adapters.Context, spec fileSpec, perm iofs.FileMode) error {
	if !spec.hasContent {
		return adapters.Permanent(fmt.Errorf("invalid %s: attribute %q is required", FileType, attrContent))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ensureParent(hc, spec.path); err != nil {
		return err
	}
	if err := writeAtomic(spec.path, spec.content, perm); err != nil {
		return err
	}
	hc.Info("wrote file", "path", spec.path, "bytes", len(spec.content), "mode", formatMode(perm))
	// The facts Observe set describe the file before the write.
	if fi, err := os.Lstat(spec.path); err == nil {
		setFileFacts(hc, fi)
	}
	return nil
}

// setFileFacts sets the facts of an existing file: its size in bytes and
// its modification time (RFC 3339, UTC).
func setFileFacts(hc *adapters.Context, fi iofs.FileInfo) {
	hc.SetFact("size", fi.Size())
	hc.SetFact("mtime", fi.ModTime().UTC().Format(time.RFC3339))
}

// ensureParent creates the parent directories of path when they are missing.
func ensureParent(hc *adapters.Context, path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return adapters.Permanent(fmt.Errorf("parent %s of %s is not a directory", dir, path))
	case !errors.Is(err, iofs.ErrNotExist):
		return classify("stat parent of", path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return classify("create parent directories of", path, err)
	}
	hc.Info("created parent directories", "path", dir)
	return nil
}

// writeAtomic writes content to a temporary file next to path, sets its mode
// and renames it over path, so readers see the old or the new file, never a
// partial one. It does not fsync: after a crash the executor observes again.
func writeAtomic(path, content string, perm iofs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	// Keep the temporary name within NAME_MAX whatever the length of base.
	if len(base) > 64 {
		base = strings.ToValidUTF8(base[:64], "")
	}
	tmp, err := os.CreateTemp(dir, "."+base+".intend-*")
	if err != nil {
		return classify("create temporary file for", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.WriteString(content); err != nil {
		return classify("write", path, err)
	}
	// Chmod rather than a mode at creation: chmod ignores the umask.
	if err := tmp.Chmod(perm); err != nil {
		return classify("chmod", path, err)
	}
	if err := tmp.Close(); err != nil {
		return classify("write", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return classify("rename into", path, err)
	}
	return nil
}

// Delete removes the file. A file that is already gone is success.
func (File) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, err := parseSpec(desired)
	if err != nil {
		return err
	}
	// os.Remove would also remove an empty directory: refuse anything that
	// is not a regular file, as Observe does.
	return removeChecked(hc, spec.path, "file", checkRegular, nil)
}

// removeChecked removes path when check accepts what is there (os.Remove
// removes files, symlinks and empty directories alike, so each type checks
// the kind first, as its Observe does). A path already gone is success.
// removeErr, when not nil, may turn os.Remove's error into a better one.
func removeChecked(hc *adapters.Context, path, noun string, check func(string, iofs.FileInfo) error,
	removeErr func(error) error) error {
	fi, err := os.Lstat(path)
	switch {
	case isAbsent(err):
		hc.Info(noun+" already absent", "path", path)
		return nil
	case err != nil:
		return classify("stat", path, err)
	}
	if err := check(path, fi); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		if isAbsent(err) {
			hc.Info(noun+" already absent", "path", path)
			return nil
		}
		if removeErr != nil {
			if e := removeErr(err); e != nil {
				return e
			}
		}
		return classify("remove", path, err)
	}
	hc.Info("removed "+noun, "path", path)
	return nil
}

// isAbsent reports whether err says there is no file at the path: it is
// missing, or one of its parents is not a directory.
func isAbsent(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// permanentErrnos will not go away by retrying the same intent: the path,
// its permissions or the file system must change first. Everything else
// (ENOSPC, EIO, EDQUOT, EMFILE, EBUSY, ...) is transient.
var permanentErrnos = []error{
	iofs.ErrPermission, // EACCES, EPERM
	syscall.EROFS,
	syscall.EISDIR,
	syscall.ENOTDIR,
	syscall.ENAMETOOLONG,
	syscall.ELOOP,
}

// classify wraps err with what was being done to which path and marks it
// Permanent or Transient.
func classify(op, path string, err error) error {
	var pe *iofs.PathError
	if !errors.As(err, &pe) || pe.Path != path {
		err = fmt.Errorf("%s %s: %w", op, path, err)
	}
	for _, p := range permanentErrnos {
		if errors.Is(err, p) {
			return adapters.Permanent(err)
		}
	}
	return adapters.Transient(err)
}
