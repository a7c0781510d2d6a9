package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"
	"syscall"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// SymlinkType is the resource type that Symlink manages.
const SymlinkType = "fs::Symlink"

// attrTarget is the attribute of fs::Symlink that holds the link's target.
const attrTarget = "target"

// Symlink manages one symbolic link on the executor's host: fs::Symlink.
// It manages the link itself, never what the link points to.
//
// Attributes:
//   - path (string, required): the link itself, absolute and clean; it is
//     the id attribute of fs::Symlink.
//   - target (string, required unless purged): what the link points to,
//     exactly as readlink reports it. It may be relative (to the link's
//     directory) and need not exist. It must not be empty or contain NUL.
//
// Any other attribute is a Permanent error. Owner, group and the link's own
// mode are not managed: Linux ignores a link's mode, its owner matters only
// in sticky directories, and SFTP cannot change a link's owner without
// following it.
//
// Observe reports path and target. A missing path, or one whose parent is
// not a directory, does not exist; a file, directory or anything else that
// is not a symlink at path is a Permanent error: Symlink never replaces what
// it did not create. Create makes the missing parents with mode 0755.
// Create and Update make a link under a temporary name in the same directory
// and rename it over path, so readers see the old or the new link, never
// none. Delete removes the link, never its target.
//
// Symlink has no state and is safe for concurrent use on different paths.
// Its zero value manages links of the executor's host; Handlers returns one
// for another file system.
type Symlink struct {
	target fsys.Target
}

var _ adapters.Handler = Symlink{}

// symlinkSpec is the validated desired state of one symlink.
type symlinkSpec struct {
	path      string
	target    string
	hasTarget bool
}

// parse validates the attributes of desired. Every problem is reported, in
// a fixed order, as one Permanent error.
func (h Symlink) parse(desired adapters.Resource) (symlinkSpec, error) {
	var spec symlinkSpec
	t, typ := targetOf(h.target), typeName(h.target, "Symlink")
	errs := checkAttrs(desired, typ, t, attrPath, attrTarget)
	var perr []error
	spec.path, perr = parsePath(desired, typ)
	errs = append(errs, perr...)
	switch v, ok := desired.Attributes[attrTarget]; {
	case !ok && !desired.Purged:
		errs = append(errs, fmt.Errorf("attribute %q is required", attrTarget))
	case !ok:
	default:
		s, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf("attribute %q: must be a string, got %T", attrTarget, v))
		case s == "":
			errs = append(errs, fmt.Errorf("attribute %q: must not be empty", attrTarget))
		case strings.IndexByte(s, 0) >= 0:
			errs = append(errs, fmt.Errorf("attribute %q: must not contain NUL", attrTarget))
		default:
			spec.target, spec.hasTarget = s, true
		}
	}
	errs = append(errs, t.Check(desired)...)
	if len(errs) > 0 {
		return symlinkSpec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", typ, errors.Join(errs...)))
	}
	return spec, nil
}

// begin validates desired and opens its file system.
func (h Symlink) begin(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (symlinkSpec, fsys.FS, error) {
	spec, err := h.parse(desired)
	if err != nil {
		return spec, nil, err
	}
	fs, err := open(ctx, hc, targetOf(h.target), desired)
	return spec, fs, err
}

// Observe reports the symlink at the desired path. It never changes it and
// never follows it.
func (h Symlink) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (_ adapters.Observation, err error) {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return adapters.Observation{}, err
	}
	defer func() { err = on(fs, err) }()
	_, exists, err := statKind(fs, spec.path, checkSymlink)
	if err != nil || !exists {
		return adapters.Observation{}, err
	}
	target, err := fs.Readlink(spec.path)
	if isAbsent(err) || errors.Is(err, syscall.EINVAL) {
		// Removed or replaced by a non-link since Lstat.
		return adapters.Observation{}, adapters.Transient(fmt.Errorf("%s was replaced while being observed", spec.path))
	}
	if err != nil {
		return adapters.Observation{}, classify("readlink", spec.path, err)
	}
	return adapters.Observation{
		Exists: true,
		Attributes: map[string]any{
			attrPath:   spec.path,
			attrTarget: target,
		},
	}, nil
}

// checkSymlink refuses anything but a symlink at path.
func checkSymlink(path string, fi iofs.FileInfo) error {
	switch m := fi.Mode(); {
	case m&iofs.ModeSymlink != 0:
		return nil
	case m.IsRegular():
		return adapters.Permanent(fmt.Errorf("%s is a regular file, not a symlink", path))
	case m.IsDir():
		return adapters.Permanent(fmt.Errorf("%s is a directory, not a symlink", path))
	default:
		return adapters.Permanent(fmt.Errorf("%s is not a symlink (mode %s)", path, m.Type()))
	}
}

// Create makes the symlink, and its missing parents with mode 0755. It is
// idempotent: a repeat replaces the link with an equal one.
func (h Symlink) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	return on(fs, link(ctx, hc, fs, h.target, spec))
}

// Update points the symlink at the desired target, replacing it atomically.
func (h Symlink) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	hc.Info("updating symlink", "path", spec.path, "changed", diff.Names())
	return on(fs, link(ctx, hc, fs, h.target, spec))
}

// link makes spec.path a symlink to spec.target, replacing a symlink that is
// there but nothing else.
func link(ctx context.Context, hc *adapters.Context, fs fsys.FS, t fsys.Target, spec symlinkSpec) error {
	if !spec.hasTarget {
		return adapters.Permanent(fmt.Errorf("invalid %s: attribute %q is required", typeName(t, "Symlink"), attrTarget))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ensureParent(hc, fs, spec.path); err != nil {
		return err
	}
	// Rename would replace a file that appeared since Observe: look again.
	// (A file created between this check and the rename is still replaced;
	// the window is as small as we can make it without renameat2.)
	switch fi, err := fs.Lstat(spec.path); {
	case isAbsent(err):
	case err != nil:
		return classify("stat", spec.path, err)
	default:
		if err := checkSymlink(spec.path, fi); err != nil {
			return err
		}
	}
	if err := symlinkAtomic(fs, spec.target, spec.path); err != nil {
		return err
	}
	hc.Info("wrote symlink", "path", spec.path, "target", spec.target)
	return nil
}

// symlinkAtomic creates a symlink to target under a temporary name next to
// path and renames it over path. It does not fsync: after a crash the
// executor observes again.
func symlinkAtomic(fs fsys.FS, target, path string) error {
	var tmp string
	for try := 0; ; try++ {
		tmp = tempName(path)
		err := fs.Symlink(target, tmp)
		if err == nil {
			break
		}
		if !errors.Is(err, iofs.ErrExist) || try == 100 {
			return classify("create temporary symlink for", path, err)
		}
	}
	if err := fs.Rename(tmp, path); err != nil {
		fs.Remove(tmp)
		return classify("rename into", path, err)
	}
	return nil
}

// Delete removes the symlink, not its target. A symlink that is already
// gone is success.
func (h Symlink) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, fs, err := h.begin(ctx, hc, desired)
	if err != nil {
		return err
	}
	// Remove would also remove a file or an empty directory: refuse them,
	// as Observe does.
	return on(fs, removeChecked(hc, fs, spec.path, "symlink", checkSymlink, nil))
}
