package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"regexp"
	"strconv"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/internal/fsys"
)

// Attribute names of the owner and group of a file or directory.
const (
	attrOwner = "owner"
	attrGroup = "group"
)

// principalName is what an owner or group may be spelled as: a user or
// group name in the portable character set (with the trailing '$' of
// machine accounts), or a numeric id. It also keeps the names safe to pass
// to a remote lookup command.
var principalName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,255}\$?$`)

// principal is one desired owner or group: a name, or an id given as a
// decimal string.
type principal struct {
	attr    string // "owner" or "group"
	kind    fsys.Principal
	name    string // as desired
	id      uint32 // when numeric
	numeric bool
	managed bool
}

// ownership is the desired owner and group; either may be unmanaged.
type ownership struct {
	owner, group principal
}

// managed reports whether the owner or the group is managed.
func (o ownership) managed() bool { return o.owner.managed || o.group.managed }

// parseOwnership validates the "owner" and "group" attributes of desired.
func parseOwnership(desired adapters.Resource) (ownership, []error) {
	var errs []error
	parse := func(attr string, kind fsys.Principal) principal {
		p := principal{attr: attr, kind: kind}
		v, ok := desired.Attributes[attr]
		if !ok {
			return p
		}
		s, isString := v.(string)
		switch {
		case !isString:
			errs = append(errs, fmt.Errorf("attribute %q: must be a %s name or a numeric id as a string, got %T", attr, kind, v))
			return p
		case !principalName.MatchString(s):
			errs = append(errs, fmt.Errorf("attribute %q: %q is not a %s name (letters, digits, '.', '_', '-') nor a numeric id", attr, s, kind))
			return p
		}
		p.name, p.managed = s, true
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			if n == 1<<32-1 {
				// (uid_t)-1 means "unchanged" to chown(2).
				errs = append(errs, fmt.Errorf("attribute %q: %s id %s is reserved", attr, kind, s))
				return principal{attr: attr, kind: kind}
			}
			p.id, p.numeric = uint32(n), true
		} else if isDigits(s) {
			errs = append(errs, fmt.Errorf("attribute %q: %s id %s is out of range", attr, kind, s))
			return principal{attr: attr, kind: kind}
		}
		return p
	}
	o := ownership{owner: parse(attrOwner, fsys.User), group: parse(attrGroup, fsys.Group)}
	return o, errs
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// resolve returns the id of p on the file system's host, or -1 when p is
// not managed. A name the host does not know is a Permanent error naming
// the attribute: retrying will not create the user.
func (p principal) resolve(ctx context.Context, fs fsys.FS) (int, error) {
	switch {
	case !p.managed:
		return -1, nil
	case p.numeric:
		return int(p.id), nil
	}
	id, err := fs.LookupID(ctx, p.kind, p.name)
	if errors.Is(err, fsys.ErrUnknownName) {
		return -1, adapters.Permanent(fmt.Errorf("attribute %q: no %s named %q%s", p.attr, p.kind, p.name, onHost(fs)))
	}
	if err != nil {
		return -1, adapters.Transient(fmt.Errorf("attribute %q: look up %s %q: %w", p.attr, p.kind, p.name, err))
	}
	return int(id), nil
}

// resolve returns the uid and gid to set, -1 for what is not managed.
func (o ownership) resolve(ctx context.Context, fs fsys.FS) (uid, gid int, err error) {
	if uid, err = o.owner.resolve(ctx, fs); err != nil {
		return -1, -1, err
	}
	if gid, err = o.group.resolve(ctx, fs); err != nil {
		return -1, -1, err
	}
	return uid, gid, nil
}

// observe adds the managed owner and group of fi to attrs. An id equal to
// the desired one is reported as desired (a name or a number), so that
// "0" and "root" both compare equal to a file owned by root; another id is
// reported by its name when it has one, else as a number.
func (o ownership) observe(ctx context.Context, fs fsys.FS, fi iofs.FileInfo, uid, gid int, attrs map[string]any) error {
	fileUID, fileGID := fs.Owner(fi)
	for _, c := range []struct {
		p    principal
		want int
		got  uint32
	}{{o.owner, uid, fileUID}, {o.group, gid, fileGID}} {
		if !c.p.managed {
			continue
		}
		if c.want >= 0 && uint32(c.want) == c.got {
			attrs[c.p.attr] = c.p.name
			continue
		}
		name, err := fs.IDName(ctx, c.p.kind, c.got)
		if err != nil {
			return adapters.Transient(fmt.Errorf("look up the name of %s id %d: %w", c.p.kind, c.got, err))
		}
		if name == "" {
			name = strconv.FormatUint(uint64(c.got), 10)
		}
		attrs[c.p.attr] = name
	}
	return nil
}

// chown sets the managed owner and group of path (uid or gid -1 leaves it).
func chown(hc *adapters.Context, fs fsys.FS, path string, uid, gid int, o ownership) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	if err := fs.Chown(path, uid, gid); err != nil {
		return classify("chown", path, err)
	}
	hc.Info("changed owner", ownerLog(path, o)...)
	return nil
}

// ownerLog is the key/value pairs of a log line about an ownership change.
func ownerLog(path string, o ownership) []any {
	args := []any{"path", path}
	if o.owner.managed {
		args = append(args, attrOwner, o.owner.name)
	}
	if o.group.managed {
		args = append(args, attrGroup, o.group.name)
	}
	return args
}

// onHost is " on <host>" for a remote file system, for messages.
func onHost(fs fsys.FS) string {
	if n := fs.Name(); n != "" {
		return " on " + n
	}
	return ""
}
