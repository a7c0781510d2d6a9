// Package confine decides whether a resource of the built-in types stays
// within what its environment may touch: the path prefixes of the setting
// allowed_paths, the programs of the setting allowed_commands and the
// APIs and devices of the setting allowed_endpoints, and the adapter
// plugins of the setting allowed_plugins (all four only a global admin
// changes). It decides and does not act: no file system, no
// database, no DNS. The server applies it where a batch is handed to
// an executor (every executor of the environment loads its batches
// there) and, to tell the author at once, when a version is exported.
//
// The checks are lexical, on the values a resource carries: a path must
// be absolute and clean and lie under an allowed prefix at a separator
// boundary (/srv/app allows /srv/app and /srv/app/x, never
// /srv/application). They do not look at the file system, so a symlink
// already on the target inside an allowed prefix that points outside
// leads the adapters outside. What the package does against that: a
// symlink the environment manages must point inside the prefixes too,
// and its target may not hold "..", so links made under confinement lead
// nowhere else; docs/security.md says what it does not cover. An
// endpoint is compared as written too: scheme, host (case-insensitively,
// never resolved), port (80, 443 and 830 made explicit) and a path prefix
// at a separator.
package confine

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Rules are an environment's confinement. An empty Paths or Commands
// confines nothing of its kind: the environment's resources may touch
// any path, or run any program. Endpoints are the other way round: once
// the environment is confined at all (any list set), its resources reach
// only the endpoints listed, none while Endpoints is empty.
type Rules struct {
	// Paths are the allowed path prefixes, absolute and clean.
	Paths []string
	// Commands are the allowed programs, absolute and clean paths, each
	// allowed with any arguments.
	Commands []string
	// Endpoints are the allowed endpoints (CheckEndpointEntry): URL
	// prefixes (http:// or https://) for rest::Object's endpoint and
	// netconf://host[:port] for netconf::Config's address.
	Endpoints []string
	// Plugins are the artifacts (digests, "sha256:<hex>") of the
	// adapter plugins the environment may run; like Endpoints, none
	// while it is empty once the environment is confined.
	Plugins []string
}

// Confined reports whether r restricts anything.
func (r Rules) Confined() bool {
	return len(r.Paths) > 0 || len(r.Commands) > 0 || len(r.Endpoints) > 0 || len(r.Plugins) > 0
}

// CheckPlugin refuses the artifact digest of the adapter plugin named
// name when the environment is confined and its allowed_plugins does
// not list it: a plugin is code the author ships, which the confinement
// of the built-in types' attributes cannot see into. The export checks
// every artifact of a version's plugins; an executor checks the one it
// is about to run.
func (r Rules) CheckPlugin(name, digest string) *Refusal {
	if !r.Confined() || slices.Contains(r.Plugins, digest) {
		return nil
	}
	return &Refusal{Reason: fmt.Sprintf("plugin %s: artifact %s is not in the environment's %s %s", name, digest,
		PluginsSetting, list(r.Plugins))}
}

// Shell is the program exec::Command runs a command given as a string
// with (/bin/sh -c): a shell string is allowed only when it is allowed.
const Shell = "/bin/sh"

// The settings the rules come from, as errors name them.
const (
	PathsSetting     = "allowed_paths"
	CommandsSetting  = "allowed_commands"
	EndpointsSetting = "allowed_endpoints"
	PluginsSetting   = "allowed_plugins"
)

// Refusal says why a resource is outside its environment's confinement.
type Refusal struct {
	// Attribute is the attribute that is refused, as a JSON pointer
	// below the resource's attributes ("path", "command/0").
	Attribute string
	// Reason names the value and the setting it is outside of.
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// The attributes of the built-in types that name a file on the target
// or the executor, and those that name a command. Resource types not
// listed here are not confined (see docs/security.md).
var (
	pathAttributes = map[string][]string{
		"fs::File": {"path"}, "fs::Directory": {"path"}, "fs::Symlink": {"path"},
		// The ssh:: types act on another host's file system, and read
		// known_hosts from the executor's: the same prefixes apply.
		"ssh::File": {"path", "known_hosts"}, "ssh::Directory": {"path", "known_hosts"},
		"ssh::Symlink":  {"path", "known_hosts"},
		"exec::Command": {"cwd", "creates"},
	}
	commandAttributes = map[string][]string{
		"exec::Command": {"command", "unless", "onlyif", "undo"},
	}
	symlinkTypes = map[string]bool{"fs::Symlink": true, "ssh::Symlink": true}
)

// Check returns nil when a resource of type typ with attrs (decoded JSON:
// map[string]any, []any, string…) stays within r, or the first refusal.
// Only attributes that are present are checked (a purged exec::Command
// may have no command); a value that should name a path or program and
// is not a plain string (a secret reference, resolved only on the
// executor) is refused, since it cannot be checked.
func (r Rules) Check(typ string, attrs map[string]any) *Refusal {
	if len(r.Paths) > 0 {
		for _, a := range pathAttributes[typ] {
			v, ok := attrs[a]
			if !ok {
				continue
			}
			if ref := r.checkPath(a, v); ref != nil {
				return ref
			}
		}
		if symlinkTypes[typ] {
			if v, ok := attrs["target"]; ok {
				if ref := r.checkTarget(attrs["path"], v); ref != nil {
					return ref
				}
			}
		}
	}
	if len(r.Commands) > 0 && commandAttributes[typ] != nil {
		for _, a := range commandAttributes[typ] {
			v, ok := attrs[a]
			if !ok {
				continue
			}
			if ref := r.checkCommand(a, v); ref != nil {
				return ref
			}
		}
		if env, ok := attrs["env"]; ok && !emptyMap(env) {
			return &Refusal{Attribute: "env", Reason: fmt.Sprintf("attribute \"env\" is refused: with the environment's %s "+
				"%s set, a command may not set variables (LD_PRELOAD, PATH, BASH_ENV and the like change what an allowed "+
				"program runs)", CommandsSetting, list(r.Commands))}
		}
	}
	if r.Confined() {
		switch typ {
		case restType:
			return r.checkREST(attrs)
		case netconfType:
			if v, ok := attrs["address"]; ok {
				return r.checkDevice(v)
			}
		}
	}
	return nil
}

// checkPath checks the value v of attribute a, a path.
func (r Rules) checkPath(a string, v any) *Refusal {
	p, ok := v.(string)
	if !ok {
		return &Refusal{Attribute: a, Reason: fmt.Sprintf("attribute %q is not a plain string, so it cannot be checked "+
			"against the environment's %s %s", a, PathsSetting, list(r.Paths))}
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.IndexByte(p, 0) >= 0 {
		return &Refusal{Attribute: a, Reason: fmt.Sprintf("%s %.200q is not a clean absolute path, so it cannot be checked "+
			"against the environment's %s %s", a, p, PathsSetting, list(r.Paths))}
	}
	if !Within(p, r.Paths) {
		return &Refusal{Attribute: a, Reason: fmt.Sprintf("%s %.200s is outside the environment's %s %s", a, p,
			PathsSetting, list(r.Paths))}
	}
	return nil
}

// checkTarget checks a symlink's target: where the link leads must be
// within the prefixes too, read against the link's directory when it is
// relative, and hold no ".." (which the kernel resolves after following
// the links before it, so a lexical check could not vouch for it).
func (r Rules) checkTarget(path, v any) *Refusal {
	t, ok := v.(string)
	if !ok {
		return &Refusal{Attribute: "target", Reason: fmt.Sprintf("attribute \"target\" is not a plain string, so it cannot "+
			"be checked against the environment's %s %s", PathsSetting, list(r.Paths))}
	}
	if slices.Contains(strings.Split(t, "/"), "..") {
		return &Refusal{Attribute: "target", Reason: fmt.Sprintf("target %.200q holds \"..\": with the environment's %s "+
			"%s set, a symlink's target is a path without \"..\"", t, PathsSetting, list(r.Paths))}
	}
	dest := t
	if !filepath.IsAbs(t) {
		p, _ := path.(string)
		if !filepath.IsAbs(p) {
			// The path is refused on its own (or missing: the adapter
			// refuses the resource).
			return &Refusal{Attribute: "target", Reason: fmt.Sprintf("relative target %.200q of no absolute path "+
				"cannot be checked against the environment's %s %s", t, PathsSetting, list(r.Paths))}
		}
		dest = filepath.Join(filepath.Dir(p), t)
	}
	if dest = filepath.Clean(dest); !Within(dest, r.Paths) {
		return &Refusal{Attribute: "target", Reason: fmt.Sprintf("target %.200s (%s) is outside the environment's %s %s",
			t, dest, PathsSetting, list(r.Paths))}
	}
	return nil
}

// checkCommand checks the value v of attribute a, a command: a list
// whose first element is an allowed program, or a shell string when the
// shell is allowed.
func (r Rules) checkCommand(a string, v any) *Refusal {
	var prog any
	switch t := v.(type) {
	case string:
		if slices.Contains(r.Commands, Shell) {
			return nil
		}
		return &Refusal{Attribute: a, Reason: fmt.Sprintf("%s %.200q is a shell string (run by %s -c), and the "+
			"environment's %s %s does not allow %s: give the command as a list whose first element is an allowed "+
			"program", a, t, Shell, CommandsSetting, list(r.Commands), Shell)}
	case []any:
		if len(t) > 0 {
			prog = t[0]
		}
	case []string:
		if len(t) > 0 {
			prog = t[0]
		}
	}
	p, ok := prog.(string)
	if !ok {
		return &Refusal{Attribute: a, Reason: fmt.Sprintf("attribute %q does not start with a program named by a plain "+
			"string, so it cannot be checked against the environment's %s %s", a, CommandsSetting, list(r.Commands))}
	}
	switch {
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return &Refusal{Attribute: a + "/0", Reason: fmt.Sprintf("%s program %.200q is not a clean absolute path: with the "+
			"environment's %s %s set, a program is named by its absolute path (a name is looked up in PATH)",
			a, p, CommandsSetting, list(r.Commands))}
	case !slices.Contains(r.Commands, p):
		return &Refusal{Attribute: a + "/0", Reason: fmt.Sprintf("%s program %.200s is not in the environment's %s %s",
			a, p, CommandsSetting, list(r.Commands))}
	}
	return nil
}

// emptyMap reports whether v is an object without members.
func emptyMap(v any) bool {
	switch m := v.(type) {
	case map[string]any:
		return len(m) == 0
	case map[string]string:
		return len(m) == 0
	}
	return false
}

// Within reports whether the clean absolute path p is one of prefixes or
// lies below one, at a separator boundary.
func Within(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if p == pre || pre == "/" || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// CheckEntry validates one entry of allowed_paths or allowed_commands:
// an absolute, clean path without NUL, at most 4096 bytes.
func CheckEntry(p string) error {
	switch {
	case len(p) > 4096:
		return fmt.Errorf("%.80q… is longer than 4096 bytes", p)
	case strings.IndexByte(p, 0) >= 0 || strings.ContainsAny(p, "\n\r"):
		return fmt.Errorf("%q holds a NUL or a line break", p)
	case !filepath.IsAbs(p):
		return fmt.Errorf("%q is not an absolute path", p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%q is not clean (want %q): no \"..\", \".\", double or trailing slash", p, filepath.Clean(p))
	}
	return nil
}

// list renders a setting's value in messages: [/srv/a /srv/b].
func list(vs []string) string { return "[" + strings.Join(vs, " ") + "]" }
