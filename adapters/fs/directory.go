package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/intendhq/intend/adapters"
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
//
// Any other attribute is a Permanent error.
//
// Observe reports path and mode. A missing path, or one whose parent is not
// a directory, does not exist; a file, symlink or anything else that is not
// a directory at path is a Permanent error. Create makes the missing parents
// with mode 0755. Delete removes the directory only when it is empty: a
// directory with entries is a Permanent error, because intend never deletes
// content it does not manage.
//
// Directory has no state and is safe for concurrent use on different paths.
type Directory struct{}

var _ adapters.Handler = Directory{}

// dirSpec is the validated desired state of one directory.
type dirSpec struct {
	path    string
	perm    iofs.FileMode
	hasPerm bool
}

// parseDirSpec validates the attributes of desired. Every problem is
// reported, in a fixed order, as one Permanent error.
func parseDirSpec(desired adapters.Resource) (dirSpec, error) {
	var spec dirSpec
	errs := checkUnknown(desired, DirectoryType, attrPath, attrMode)
	var perr []error
	spec.path, perr = parsePath(desired, DirectoryType)
	errs = append(errs, perr...)
	if m, ok := desired.Attributes[attrMode]; ok {
		perm, err := parseDirMode(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", attrMode, err))
		} else {
			spec.perm, spec.hasPerm = perm, true
		}
	}
	if len(errs) > 0 {
		return dirSpec{}, adapters.Permanent(fmt.Errorf("invalid %s: %w", DirectoryType, errors.Join(errs...)))
	}
	return spec, nil
}

// parseDirMode is parseMode, with the refusal of special bits naming
// fs::Directory.
func parseDirMode(v any) (iofs.FileMode, error) {
	if s, ok := v.(string); ok && len(s) == 4 && strings.Trim(s, "01234567") == "" && s[0] != '0' {
		return 0, fmt.Errorf("%q sets set-id or sticky bits, which %s does not manage", s, DirectoryType)
	}
	return parseMode(v)
}

// checkUnknown reports the attributes of desired that typ does not allow,
// sorted, as at most one error.
func checkUnknown(desired adapters.Resource, typ string, allowed ...string) []error {
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
func (Directory) Observe(ctx context.Context, hc *adapters.Context, desired adapters.Resource) (adapters.Observation, error) {
	spec, err := parseDirSpec(desired)
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
	if err := checkDir(spec.path, fi); err != nil {
		return adapters.Observation{}, err
	}
	return adapters.Observation{
		Exists: true,
		Attributes: map[string]any{
			attrPath: spec.path,
			attrMode: formatMode(fi.Mode()),
		},
	}, nil
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
// mode, if any.
func (Directory) Create(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, err := parseDirSpec(desired)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	perm := defaultDirPerm
	if spec.hasPerm {
		perm = spec.perm
	}
	if err := ensureParent(hc, spec.path); err != nil {
		return err
	}
	switch err := os.Mkdir(spec.path, perm); {
	case errors.Is(err, iofs.ErrExist):
		// Made by someone else since Observe, or by an attempt that crashed
		// before its chmod. Without a desired mode, any mode is right.
		hc.Info("directory already exists", "path", spec.path)
		if !spec.hasPerm {
			fi, err := os.Lstat(spec.path)
			if err != nil {
				return classify("stat", spec.path, err)
			}
			return checkDir(spec.path, fi)
		}
	case err != nil:
		return classify("create directory", spec.path, err)
	}
	// Chmod after Mkdir: Mkdir's mode is filtered by the umask.
	if err := chmodDir(spec.path, perm); err != nil {
		return err
	}
	hc.Info("created directory", "path", spec.path, "mode", formatMode(perm))
	return nil
}

// Update sets the mode of the directory; without a desired mode there is
// nothing Update could change.
func (Directory) Update(ctx context.Context, hc *adapters.Context, desired adapters.Resource, diff adapters.Diff) error {
	spec, err := parseDirSpec(desired)
	if err != nil {
		return err
	}
	hc.Info("updating directory", "path", spec.path, "changed", diff.Names())
	if !spec.hasPerm {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := chmodDir(spec.path, spec.perm); err != nil {
		return err
	}
	hc.Info("changed directory mode", "path", spec.path, "mode", formatMode(spec.perm))
	return nil
}

// chmodDir sets the permission bits of the directory at path to perm,
// keeping its set-id and sticky bits. It refuses anything but a directory,
// since os.Chmod would follow a symlink.
func chmodDir(path string, perm iofs.FileMode) error {
	fi, err := os.Lstat(path)
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
	if err := os.Chmod(path, perm|fi.Mode()&specialBits); err != nil {
		return classify("chmod", path, err)
	}
	return nil
}

// Delete removes the directory when it is empty. A directory that is
// already gone is success; one with entries is a Permanent error.
func (Directory) Delete(ctx context.Context, hc *adapters.Context, desired adapters.Resource) error {
	spec, err := parseDirSpec(desired)
	if err != nil {
		return err
	}
	// os.Remove would also remove a file or a symlink: refuse them, as
	// Observe does.
	return removeChecked(hc, spec.path, "directory", checkDir, func(err error) error {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			// POSIX allows either errno for a directory with entries.
			return adapters.Permanent(fmt.Errorf(
				"%s is not empty: %s removes only empty directories, since intend never deletes content it does not manage",
				spec.path, DirectoryType))
		}
		return nil
	})
}
