package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// FileType is the resource type that File manages.
const FileType = "fs::File"

// Attribute names of fs::File.
const (
	attrPath        = "path"
	attrContent     = "content"
	attrContentHash = "content_hash"
	attrMode        = "mode"
)

// defaultPerm is the mode of a file created without a "mode" attribute.
const defaultPerm iofs.FileMode = 0o644

// maxInlineContent is the largest file whose text Observe reports; larger
// files (and files that are not UTF-8) are reported by digest instead, so the
// observation stays small and still compares unequal to any desired text.
const maxInlineContent = 16 << 20

// hashPrefix starts every content_hash.
const hashPrefix = "sha256:"

// File manages one regular file on the executor's host: fs::File.
//
// Attributes:
//   - path (string, required): absolute and clean ("/etc/motd", not
//     "/etc/../etc/motd/"); it is the id attribute of fs::File.
//   - content (string): the whole text of the file. Required unless
//     purged or content_hash is given.
//   - content_hash (string, optional): "sha256:" and the 64 lower-case hex
//     digits of the SHA-256 of the content. With content, the two must
//     agree. Alone, it pins a file intend does not write: the file is
//     verified against it, and when it is absent or differs the attempt
//     fails with a Permanent error, since intend has no content to write.
//   - mode (string, optional): the permission bits as exactly four octal
//     digits with a leading zero, e.g. "0644". Other spellings ("644", 420)
//     are rejected rather than normalised, because the engine compares the
//     desired and the observed value as they are written. Without a mode, a
//     new file gets "0644" and an existing file keeps its mode. Set-id and
//     sticky bits are not managed.
//   - owner, group (string, optional): a user or group name, or a numeric
//     id as a string ("0"). A name must exist on the host (else a Permanent
//     error naming the attribute). Without them, a new file belongs to the
//     executor's user and a rewritten file keeps its owner and group.
//
// Any other attribute is a Permanent error. Writes replace the file by
// renaming a temporary file, already with its mode, owner and group, over it
// (atomic for readers, no fsync), so hard links to the old file keep the
// old content. A change of mode, owner or group alone is made in place.
//
// Observe reports path and mode, and content, content_hash, owner and group
// when they are desired, and sets the facts "size" (bytes) and "mtime"
// (RFC 3339, UTC) of an existing file; Create and Update set them again
// after writing. When the file is larger than 16 MiB or not valid UTF-8 and
// differs from the desired content, content is reported as "sha256:<hex>"
// of the file. An owner or group equal to the desired one is reported as
// spelled in the desired state (name or id), another by its name. A
// directory, symlink or other non-regular file at path is a Permanent error:
// File never replaces what it did not create.
//
// Changes of content and content_hash are sensitive outputs
// (adapters.SensitiveDiffs): shown to authors and admins only.
//
// File has no state and is safe for concurrent use on different paths. Its
// zero value manages files of the executor's host; Handlers returns one
// for another file system.
type File struct {
	target fsys.Target
}

var (
	_ adapters.Handler        = File{}
	_ adapters.SensitiveDiffs = File{}
)

// SensitiveDiffAttributes implements adapters.SensitiveDiffs: what a file
// holds on the target (/etc/shadow, a key) may be a secret, so the
// recorded change of its content, and of the content_hash observed, is
// shown to the environment's authors and admins only, in the action log
// and in dry-run diffs. The desired content is in the version for every
// reader to see; the content found is not.
func (File) SensitiveDiffAttributes() []string { return []string{attrContent, attrContentHash} }

// fileSpec is the validated desired state of one file.
type fileSpec struct {
	path       string
	content    string
	hasContent bool
	hash       string // desired content_hash
	hasHash    bool
	perm       iofs.FileMode
	hasPerm    bool
	own        ownership
}

// parse validates the attributes of desired. Every problem is reported, in
// a fixed order, as one Permanent error.
func (h File) parse(desired adapters.Resource) (fileSpec, error) {
	var spec fileSpec
	t, typ := targetOf(h.target), typeName(h.target, "File")
	errs := checkAttrs(desired, typ, t, attrPath, attrContent, attrContentHash, attrMode, attrOwner, attrGroup)
	var perr []error
	spec.path, perr = parsePath(desired, typ)
	errs = append(errs, perr...)

	if v, ok := desired.Attributes[attrContentHash]; ok {
		hash, err := parseHash(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrContentHash, err))
		} else {
			spec.hash, spec.hasHash = hash, true
		}
	}
	_, hashGiven := desired.Attributes[attrContentHash]
	switch c, ok := desired.Attributes[attrContent]; {
	case !ok && !desired.Purged && !hashGiven:
		errs = append(errs, fmt.Errorf("attribute %q is required (or %q, to verify a file intend does not write)", attrContent, attrContentHash))
	case !ok:
	default:
		s, isString := c.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrContent, c))
			break
		}
		spec.content, spec.hasContent = s, true
		if spec.hasHash {
			if sum := contentHash(s); sum != spec.hash {
				errs = append(errs, fmt.Errorf("attribute %q: %s is not the hash of content, which is %s", attrContentHash, spec.hash, sum))
			}
		}
	}

	if m, ok := desired.Attributes[attrMode]; ok {
		perm, err := parseMode(m, typ)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrMode, err))
		} else {
			spec.perm, spec.hasPerm = perm, true
		}
	}
	spec.own, perr = parseOwnership(desired)
	errs = append(errs, perr...)
	errs = append(errs, t.Check(desired)...)

	if len(errs) > 0 {
		return fileSpec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", typ, errors.Join(errs...)))
	}
	return spec, nil
}

// parseHash accepts exactly the form Observe reports.
func parseHash(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a string \"sha256:<64 hex digits>\", got %T", v)
	}
	hexPart, ok := strings.CutPrefix(s, hashPrefix)
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", fmt.Errorf("must be \"sha256:\" and 64 lower-case hex digits, got %q", s)
	}
	return s, nil
}

// contentHash is the content_hash of s.
func contentHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// parseMode accepts exactly the form formatMode produces, so that desired and
// observed modes compare equal exactly when the bits are equal.
func parseMode(v any, typ string) (iofs.FileMode, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("must be a string of 4 octal digits such as \"0644\", got %T", v)
	}
	if len(s) != 4 || strings.Trim(s, "01234567") != "" {
		return 0, fmt.Errorf("must be 4 octal digits such as \"0644\", got %q", s)
	}
	if s[0] != '0' {
		return 0, fmt.Errorf("%q sets set-id or sticky bits, which %s does not manage", s, typ)
	}
	var perm iofs.FileMode
	for _, c := range s[1:] {
		perm = perm<<3 | iofs.FileMode(c-'0')
	}
	return perm, nil
}

// formatMode renders the permission bits of m as 4 octal digits ("0644").
func formatMode(m iofs.FileMode) string {
	p := m.Perm()
	return string([]byte{'0', byte('0' + p>>6&7), byte('0' + p>>3&7), byte('0' + p&7)})
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// begin validates desired and opens its file system.
func (h File) begin(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (fileSpec, fsys.FS, error) {
	spec, err := h.parse(desired)
	if err != nil {
		return spec, nil, err
	}
	fs, err := open(ctx, hc, targetOf(h.target), desired)
	return spec, fs, err
}

// Observe reports the file at the desired path. It reads the file but never
// changes it.
func (h File) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (_ adapters.Observation, err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	defer func() { err = on(fs, err) }()
	uid, gid := -1, -1
	if !desired.Purged {
		// A name the host does not know fails the plan, not only the write.
		if uid, gid, err = spec.own.resolve(ctx, fs); err != nil {
			return adapters.Observation{}, err
		}
	}
	fi, exists, err := statKind(fs, spec.path, checkRegular)
	if err != nil || !exists {
		return adapters.Observation{}, err
	}
	attrs := map[string]any{
		attrPath: spec.path,
		attrMode: formatMode(fi.Mode()),
	}
	if spec.hasContent || spec.hasHash {
		content, hash, err := readContent(fs, spec, fi)
		if err != nil {
			return adapters.Observation{}, err
		}
		if spec.hasContent {
			attrs[attrContent] = content
		}
		if spec.hasHash {
			attrs[attrContentHash] = hash
		}
	}
	if err := spec.own.observe(ctx, fs, fi, uid, gid, attrs); err != nil {
		return adapters.Observation{}, err
	}
	setFileFacts(hc, fi)
	return adapters.Observation{Exists: true, Attributes: attrs}, nil
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

// readContent returns the text of the file that Lstat described as fi (or
// its digest when it is too large or not UTF-8 and differs from the desired
// content) and its content_hash, when spec desires them.
func readContent(fs fsys.FS, spec fileSpec, fi iofs.FileInfo) (content, hash string, err error) {
	f, err := fs.Open(spec.path)
	if err != nil {
		return "", "", classify("open", spec.path, err)
	}
	defer f.Close()
	// Open follows symlinks; make sure we read the file we stat'ed.
	ofi, err := f.Stat()
	if err != nil {
		return "", "", classify("stat", spec.path, err)
	}
	if !fs.SameFile(fi, ofi) {
		return "", "", adapters.Transient(fmt.Errorf("%s was replaced while being observed", spec.path))
	}

	// Comparing with the desired text first keeps files of any size that
	// are already right cheap and equal, and their hash is the desired one
	// (the two agree, or parse refused them).
	if spec.hasContent && ofi.Size() == int64(len(spec.content)) {
		same, err := equalContent(f, spec.content)
		if err != nil {
			return "", "", classify("read", spec.path, err)
		}
		if same {
			return spec.content, spec.hash, nil
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", "", classify("seek", spec.path, err)
		}
	}

	h := sha256.New()
	inline := false
	if spec.hasContent {
		buf, err := io.ReadAll(io.LimitReader(io.TeeReader(f, h), maxInlineContent+1))
		if err != nil {
			return "", "", classify("read", spec.path, err)
		}
		if len(buf) <= maxInlineContent && utf8.Valid(buf) {
			content, inline = string(buf), true
		}
	}
	if _, err := io.Copy(h, f); err != nil {
		return "", "", classify("read", spec.path, err)
	}
	digest := hashPrefix + hex.EncodeToString(h.Sum(nil))
	if spec.hasContent && !inline {
		content = digest
		if digest == spec.content {
			// The file differs from the desired text (checked above), so the
			// placeholder must not compare equal to it, however unlikely.
			content += " (file content)"
		}
	}
	return content, digest, nil
}

// equalContent reports whether r, a file whose size is len(want), yields
// exactly want. A read shorter than asked that ends at len(want) is the
// end of the file, so an unchanged file is read in one call.
func equalContent(r io.Reader, want string) (bool, error) {
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	off := 0
	for {
		ask := min(len(buf), len(want)-off+1)
		n, err := r.Read(buf[:ask])
		if n > 0 {
			if off+n > len(want) || string(buf[:n]) != want[off:off+n] {
				return false, nil
			}
			off += n
			if n < ask && off == len(want) {
				return true, nil
			}
		}
		if err == io.EOF {
			return off == len(want), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// readBuffers holds the buffers equalContent reads into: a buffer of its
// own per observed file was half of what an executor allocated.
var readBuffers = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// Create writes the file, creating missing parent directories with mode
// 0755. It is idempotent: a repeat overwrites the file with the same content.
func (h File) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	defer func() { err = on(fs, err) }()
	if !spec.hasContent {
		return adapters.Permanent(fmt.Errorf("%s does not exist, and intend cannot create it: only %q is given, "+
			"which verifies a file but does not say what to write; give %q", spec.path, attrContentHash, attrContent))
	}
	uid, gid, err := spec.own.resolve(ctx, fs)
	if err != nil {
		return err
	}
	perm := defaultPerm
	if spec.hasPerm {
		perm = spec.perm
	}
	return write(ctx, hc, fs, spec, perm, owners{uid: uid, gid: gid})
}

// Update changes the file. When only the mode, owner or group differ it
// changes them in place; otherwise it rewrites the file, keeping the current
// mode, owner and group where none is desired.
func (h File) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	defer func() { err = on(fs, err) }()
	changed := diff.Names()
	hc.Info("updating file", "path", spec.path, "changed", changed)
	_, contentChanged := diff[attrContent]
	if _, ok := diff[attrContentHash]; ok {
		contentChanged = true
	}
	if contentChanged && !spec.hasContent {
		return adapters.Permanent(fmt.Errorf("the content of %s does not match %q %s, and intend cannot write it: "+
			"only the hash is given, not the content", spec.path, attrContentHash, spec.hash))
	}
	uid, gid, err := spec.own.resolve(ctx, fs)
	if err != nil {
		return err
	}
	fi, err := fs.Lstat(spec.path)
	switch {
	case isAbsent(err):
		// Removed since Observe: write it as Create would.
		if !spec.hasContent {
			return adapters.Transient(fmt.Errorf("%s was removed since it was observed", spec.path))
		}
		perm := defaultPerm
		if spec.hasPerm {
			perm = spec.perm
		}
		return write(ctx, hc, fs, spec, perm, owners{uid: uid, gid: gid})
	case err != nil:
		return classify("stat", spec.path, err)
	}
	if err := checkRegular(spec.path, fi); err != nil {
		return err
	}

	if !contentChanged {
		// Only metadata differs: change it in place. Chown first, since a
		// chown may clear set-id bits.
		if _, ok := diff[attrOwner]; !ok {
			uid = -1
		}
		if _, ok := diff[attrGroup]; !ok {
			gid = -1
		}
		if err := chown(hc, fs, spec.path, uid, gid, spec.own); err != nil {
			return err
		}
		if _, ok := diff[attrMode]; ok && spec.hasPerm {
			if err := fs.Chmod(spec.path, spec.perm|fi.Mode()&specialBits); err != nil {
				return classify("chmod", spec.path, err)
			}
			hc.Info("changed file mode", "path", spec.path, "mode", formatMode(spec.perm))
		}
		return nil
	}

	perm := spec.perm
	if !spec.hasPerm {
		perm = fi.Mode().Perm()
	}
	// What is not managed is kept as it is: the replacement gets the owner
	// and group of the file it replaces.
	o := owners{uid: uid, gid: gid}
	fileUID, fileGID := fs.Owner(fi)
	if uid < 0 {
		o.uid, o.kept = int(fileUID), true
	}
	if gid < 0 {
		o.gid, o.kept = int(fileGID), true
	}
	o.desired = spec.own.managed()
	return write(ctx, hc, fs, spec, perm, o)
}

// owners are the owner and group a written file gets (-1 leaves the
// executor's). kept says some of them are those of the replaced file rather
// than desired ones; desired says some are desired.
type owners struct {
	uid, gid      int
	kept, desired bool
}

// write replaces the file at spec.path with spec.content, mode perm and
// owners o.
func write(ctx context.Context, hc *adapters.Context, fs fsys.FS, spec fileSpec, perm iofs.FileMode, o owners) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := writeAtomic(hc, fs, spec.path, spec.content, perm, o)
	if err != nil {
		return err
	}
	args := []any{"path", spec.path, "bytes", len(spec.content), "mode", formatMode(perm)}
	if spec.own.owner.managed {
		args = append(args, attrOwner, spec.own.owner.name)
	}
	if spec.own.group.managed {
		args = append(args, attrGroup, spec.own.group.name)
	}
	hc.Info("wrote file", args...)
	// The facts Observe set describe the file before the write.
	if fi != nil {
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
func ensureParent(hc *adapters.Context, fs fsys.FS, path string) error {
	dir := filepath.Dir(path)
	fi, err := fs.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return adapters.Permanent(fmt.Errorf("parent %s of %s is not a directory", dir, path))
	case !isAbsent(err):
		return classify("stat parent of", path, err)
	}
	if err := fs.MkdirAll(dir); err != nil {
		return classify("create parent directories of", path, err)
	}
	hc.Info("created parent directories", "path", dir)
	return nil
}

// tempName returns a name for a temporary file next to path, hidden and
// within NAME_MAX whatever the length of path's base name.
func tempName(path string) string {
	dir, base := filepath.Split(path)
	if len(base) > 64 {
		base = strings.ToValidUTF8(base[:64], "")
	}
	return filepath.Join(dir, "."+base+".intend-"+strconv.FormatUint(rand.Uint64(), 36))
}

// createTemp makes a new temporary file next to path, retrying names that
// are taken, and returns it with its name. Its error is the file system's.
func createTemp(fs fsys.FS, path string) (fsys.WriteFile, string, error) {
	for try := 0; ; try++ {
		name := tempName(path)
		f, err := fs.CreateExcl(name)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, iofs.ErrExist) || try == 100 {
			return nil, "", err
		}
	}
}

// writeAtomic writes content to a temporary file next to path, sets its
// owners and mode and renames it over path, so readers see the old or the
// new file, never a partial one. It does not fsync: after a crash the
// executor observes again. Missing parent directories are created, once
// the temporary file's creation failed: no stat of the parent for a file
// whose directory exists. It returns what the written file is (size,
// mtime), or nil when the file system cannot tell.
func writeAtomic(hc *adapters.Context, fs fsys.FS, path, content string, perm iofs.FileMode, o owners) (_ iofs.FileInfo, err error) {
	tmp, name, err := createTemp(fs, path)
	if err != nil {
		// The parent may be missing (which an SFTP server may report as
		// a failure of any kind): see to it, then try again. Its errors
		// come first, as when it was checked before the creation.
		if err := ensureParent(hc, fs, path); err != nil {
			return nil, err
		}
		tmp, name, err = createTemp(fs, path)
	}
	if err != nil {
		return nil, classify("create temporary file for", path, err)
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				tmp.Close()
			}
			fs.Remove(name)
		}
	}()
	if _, err := io.WriteString(tmp, content); err != nil {
		return nil, classify("write", path, err)
	}
	// Chown before chmod, since a chown may clear set-id bits.
	if o.uid >= 0 || o.gid >= 0 {
		if err := tmp.Chown(o.uid, o.gid); err != nil {
			if !o.kept || o.desired || !errors.Is(err, iofs.ErrPermission) {
				return nil, classify("chown", path, err)
			}
			// Keeping the owner of the replaced file is a courtesy when the
			// owner is not managed; the executor may not be allowed to.
			hc.Warn("could not keep the owner and group of the replaced file", "path", path, "error", err.Error())
		}
	}
	// Chmod rather than a mode at creation: chmod ignores the umask.
	if err := tmp.Chmod(perm); err != nil {
		return nil, classify("chmod", path, err)
	}
	// The written file's size and mtime, which neither the close nor the
	// rename changes: no stat of path after the rename.
	var fi iofs.FileInfo
	if st, ok := tmp.(interface{ Stat() (iofs.FileInfo, error) }); ok {
		if sfi, err := st.Stat(); err == nil {
			fi = sfi
		}
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return nil, classify("write", path, err)
	}
	if err := fs.Rename(name, path); err != nil {
		return nil, classify("rename into", path, err)
	}
	if fi == nil {
		if lfi, err := fs.Lstat(path); err == nil {
			fi = lfi
		}
	}
	return fi, nil
}

// Delete removes the file. A file that is already gone is success.
func (h File) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	// Removing would also remove an empty directory: refuse anything that
	// is not a regular file, as Observe does.
	return on(fs, removeChecked(hc, fs, spec.path, "file", checkRegular, nil))
}

// removeChecked removes path when check accepts what is there (Remove
// removes files, symlinks and empty directories alike, so each type checks
// the kind first, as its Observe does). A path already gone is success.
// removeErr, when not nil, may turn Remove's error into a better one.
func removeChecked(hc *adapters.Context, fs fsys.FS, path, noun string, check func(string, iofs.FileInfo) error,
	removeErr func(error) error) error {
	fi, err := fs.Lstat(path)
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
	if err := fs.Remove(path); err != nil {
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
