package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// DirectoryType is the resource type that Directory manages.
const DirectoryType = "fs::Directory"

// defaultDirPerm is the mode of a directory created without a "mode"
// attribute.
const defaultDirPerm iofs.FileMode = 0o755

// specialBits are the set-id and sticky bits, which the fs adapters do not
// manage.
const specialBits = iofs.ModeSetuid | iofs.ModeSetgid | iofs.ModeSticky

// Directory manages one directory on the executor's host: fs::Directory.
// It manages the directory itself, never its entries.
//
// Attributes:
//   - path (string, required): absolute and clean; it is the id attribute of
//     fs::Directory.
//   - mode (string, optional): the permission bits as exactly four octal
//     digits with a leading zero, as for fs::File. Without a mode, a new
//     directory gets "0755" and an existing directory keeps its mode.
//     Set-id and sticky bits are not managed: a chmod keeps them as they
//     are, so a directory keeps the set-group-id bit it inherited.
//   - owner, group (string, optional): as for fs::File. Without them, a new
//     directory belongs to the executor's user and an existing one keeps
//     its owner and group.
//
// Any other attribute is a Permanent error.
//
// Observe reports path and mode, and owner and group when they are desired.
// A missing path, or one whose parent is not a directory, does not exist; a
// file, symlink or anything else that is not a directory at path is a
// Permanent error. Create makes the missing parents with mode 0755. Delete
// removes the directory only when it is empty: a directory with entries is
// a Permanent error, because intend never deletes content it does not
// manage.
//
// Directory has no state and is safe for concurrent use on different paths.
// Its zero value manages directories of the executor's host; Handlers
// returns one for another file system.
type Directory struct {
	target fsys.Target
}

var _ adapters.Handler = Directory{}

// dirSpec is the validated desired state of one directory.
type dirSpec struct {
	path    string
	perm    iofs.FileMode
	hasPerm bool
	own     ownership
}

// parse validates the attributes of desired. Every problem is reported, in
// a fixed order, as one Permanent error.
func (h Directory) parse(desired adapters.Resource) (dirSpec, error) {
	var spec dirSpec
	t, typ := targetOf(h.target), typeName(h.target, "Directory")
	errs := checkAttrs(desired, typ, t, attrPath, attrMode, attrOwner, attrGroup)
	var perr []error
	spec.path, perr = parsePath(desired, typ)
	errs = append(errs, perr...)
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
		return dirSpec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", typ, errors.Join(errs...)))
	}
	return spec, nil
}

// begin validates desired and opens its file system.
func (h Directory) begin(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (dirSpec, fsys.FS, error) {
	spec, err := h.parse(desired)
	if err != nil {
		return spec, nil, err
	}
	fs, err := open(ctx, hc, targetOf(h.target), desired)
	return spec, fs, err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// parsePath validates the "path" attribute of desired, which must be
// absolute and clean, and checks that the resource id names it.
func parsePath(desired adapters.Resource, typ string) (string, []error) {
	var (
		path string
		errs []error
	)
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
		case strings.IndexByte(s, 0) >= 0:
			errs = append(errs, fmt.Errorf("attribute %q: must not contain NUL", attrPath))
		default:
			path = s
		}
	}
	if id := desired.ID; path != "" {
		if id.Attribute != "" && id.Attribute != attrPath {
			errs = append(errs, fmt.Errorf("resource id names attribute %q, but %s is identified by %q", id.Attribute, typ, attrPath))
		} else if id.Value != "" && id.Value != path {
			errs = append(errs, fmt.Errorf("resource id names path %q, but attribute %q is %q", id.Value, attrPath, path))
		}
	}
	return path, errs
}

// Observe reports the directory at the desired path. It never changes it.
func (h Directory) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (_ adapters.Observation, err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	defer func() { err = on(fs, err) }()
	uid, gid := -1, -1
	if !desired.Purged {
		if uid, gid, err = spec.own.resolve(ctx, fs); err != nil {
			return adapters.Observation{}, err
		}
	}
	fi, exists, err := statKind(fs, spec.path, checkDir)
	if err != nil || !exists {
		return adapters.Observation{}, err
	}
	attrs := map[string]any{
		attrPath: spec.path,
		attrMode: formatMode(fi.Mode()),
	}
	if err := spec.own.observe(ctx, fs, fi, uid, gid, attrs); err != nil {
		return adapters.Observation{}, err
	}
	return adapters.Observation{Exists: true, Attributes: attrs}, nil
}

// checkDir refuses anything but a directory at path; a symlink to a
// directory is refused too, since managing it would change another resource.
func checkDir(path string, fi iofs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsDir():
		return nil
	case m.IsRegular():
		return adapters.Permanent(fmt.Errorf("%s is a regular file, not a directory", path))
	case m&iofs.ModeSymlink != 0:
		return adapters.Permanent(fmt.Errorf("%s is a symlink, not a directory", path))
	default:
		return adapters.Permanent(fmt.Errorf("%s is not a directory (mode %s)", path, m.Type()))
	}
}

// Create makes the directory, and its missing parents with mode 0755. It is
// idempotent: a directory that appeared since Observe only gets the desired
// mode, owner and group, if any.
func (h Directory) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	defer func() { err = on(fs, err) }()
	if err := ctx.Err(); err != nil {
		return err
	}
	uid, gid, err := spec.own.resolve(ctx, fs)
	if err != nil {
		return err
	}
	perm := defaultDirPerm
	if spec.hasPerm {
		perm = spec.perm
	}
	if err := ensureParent(hc, fs, spec.path); err != nil {
		return err
	}
	switch err := fs.Mkdir(spec.path); {
	case errors.Is(err, iofs.ErrExist):
		// Made by someone else since Observe, or by an attempt that crashed
		// before its chmod. Without a desired mode, any mode is right.
		hc.Info("directory already exists", "path", spec.path)
		if !spec.hasPerm {
			fi, err := fs.Lstat(spec.path)
			if err != nil {
				return classify("stat", spec.path, err)
			}
			if err := checkDir(spec.path, fi); err != nil {
				return err
			}
			return chownDir(hc, fs, spec.path, uid, gid, spec.own)
		}
	case err != nil:
		return classify("create directory", spec.path, err)
	}
	// Chown before chmod (a chown may clear set-id bits), and chmod after
	// Mkdir: Mkdir's mode is filtered by the umask.
	if err := chownDir(hc, fs, spec.path, uid, gid, spec.own); err != nil {
		return err
	}
	if err := chmodDir(fs, spec.path, perm); err != nil {
		return err
	}
	hc.Info("created directory", "path", spec.path, "mode", formatMode(perm))
	return nil
}

// Update sets the mode, owner and group of the directory that are desired.
func (h Directory) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	defer func() { err = on(fs, err) }()
	hc.Info("updating directory", "path", spec.path, "changed", diff.Names())
	if err := ctx.Err(); err != nil {
		return err
	}
	uid, gid, err := spec.own.resolve(ctx, fs)
	if err != nil {
		return err
	}
	if err := chownDir(hc, fs, spec.path, uid, gid, spec.own); err != nil {
		return err
	}
	if !spec.hasPerm {
		return nil
	}
	fi, err := fs.Lstat(spec.path)
	if err != nil {
		return classify("stat", spec.path, err)
	}
	if fi.Mode().Perm() == spec.perm {
		return nil
	}
	if err := chmodDir(fs, spec.path, spec.perm); err != nil {
		return err
	}
	hc.Info("changed directory mode", "path", spec.path, "mode", formatMode(spec.perm))
	return nil
}

// chownDir sets the managed owner and group of the directory at path when
// they differ. It refuses anything but a directory.
func chownDir(hc *adapters.Context, fs fsys.FS, path string, uid, gid int, o ownership) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	fi, err := fs.Lstat(path)
	if err != nil {
		return classify("stat", path, err)
	}
	if err := checkDir(path, fi); err != nil {
		return err
	}
	fileUID, fileGID := fs.Owner(fi)
	if (uid < 0 || uint32(uid) == fileUID) && (gid < 0 || uint32(gid) == fileGID) {
		return nil
	}
	return chown(hc, fs, path, uid, gid, o)
}

// chmodDir sets the permission bits of the directory at path to perm,
// keeping its set-id and sticky bits. It refuses anything but a directory,
// since a chmod would follow a symlink.
func chmodDir(fs fsys.FS, path string, perm iofs.FileMode) error {
	fi, err := fs.Lstat(path)
	if err != nil {
		// Absent too: removed since Observe or Mkdir; the next attempt
		// observes again and creates it.
		return classify("stat", path, err)
	}
	if err := checkDir(path, fi); err != nil {
		return err
	}
	if fi.Mode().Perm() == perm {
		return nil
	}
	if err := fs.Chmod(path, perm|fi.Mode()&specialBits); err != nil {
		return classify("chmod", path, err)
	}
	return nil
}

// Delete removes the directory when it is empty. A directory that is
// already gone is success; one with entries is a Permanent error.
func (h Directory) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	typ := typeName(h.target, "Directory")
	notEmpty := adapters.Permanent(fmt.Errorf(
		"%s is not empty: %s removes only empty directories, since intend never deletes content it does not manage",
		spec.path, typ))
	// Remove would also remove a file or a symlink: refuse them, as
	// Observe does.
	return on(fs, removeChecked(hc, fs, spec.path, "directory", checkDir, func(err error) error {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			// POSIX allows either errno for a directory with entries.
			return notEmpty
		}
		// A remote file system may say only that it failed.
		if empty, serr := fs.IsEmptyDir(spec.path); serr == nil && !empty {
			return notEmpty
		}
		return nil
	}))
}
