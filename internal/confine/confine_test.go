package confine_test

import (
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/confine"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	rules := confine.Rules{Paths: []string{"/srv/alpha", "/opt/beta"}, Commands: []string{"/usr/bin/systemctl", "/bin/true"}}
	cases := []struct {
		why   string
		rules confine.Rules
		typ   string
		attrs map[string]any
		// refused names the attribute refused and a part of the reason;
		// "" means allowed.
		refused, reason string
	}{
		{"unconfined allows anything", confine.Rules{}, "fs::File", map[string]any{"path": "/etc/shadow"}, "", ""},
		{"a file under a prefix", rules, "fs::File", map[string]any{"path": "/srv/alpha/app.conf"}, "", ""},
		{"the prefix itself", rules, "fs::Directory", map[string]any{"path": "/srv/alpha"}, "", ""},
		{"the second prefix", rules, "fs::File", map[string]any{"path": "/opt/beta/x/y"}, "", ""},
		{"a file outside", rules, "fs::File", map[string]any{"path": "/etc/shadow"},
			"path", "path /etc/shadow is outside the environment's allowed_paths [/srv/alpha /opt/beta]"},
		{"a sibling sharing the prefix's letters", rules, "fs::File", map[string]any{"path": "/srv/alpha-evil/x"},
			"path", "outside the environment's allowed_paths"},
		{"a sibling without separator", rules, "fs::Directory", map[string]any{"path": "/srv/alphabet"},
			"path", "outside"},
		{"the parent of a prefix", rules, "fs::Directory", map[string]any{"path": "/srv"}, "path", "outside"},
		{"an unclean path that would climb out", rules, "fs::File", map[string]any{"path": "/srv/alpha/../../etc/shadow"},
			"path", "not a clean absolute path"},
		{"a relative path", rules, "fs::File", map[string]any{"path": "srv/alpha/x"}, "path", "not a clean absolute path"},
		{"a secret reference as path", rules, "fs::File", map[string]any{"path": map[string]any{"secret": "env:INTEND_SECRET_P"}},
			"path", "not a plain string"},
		{"ssh files are confined too", rules, "ssh::File", map[string]any{"path": "/etc/passwd", "host": "h"}, "path", "outside"},
		{"ssh known_hosts read on the executor", rules, "ssh::File",
			map[string]any{"path": "/srv/alpha/x", "known_hosts": "/etc/shadow"}, "known_hosts", "outside"},
		{"ssh known_hosts in the home", rules, "ssh::Directory",
			map[string]any{"path": "/srv/alpha/x", "known_hosts": "~/.ssh/known_hosts"}, "known_hosts", "not a clean absolute path"},
		{"a symlink inside to inside", rules, "fs::Symlink", map[string]any{"path": "/srv/alpha/l", "target": "/opt/beta/t"}, "", ""},
		{"a relative symlink inside", rules, "fs::Symlink", map[string]any{"path": "/srv/alpha/d/l", "target": "sub/t"}, "", ""},
		{"a symlink pointing outside", rules, "fs::Symlink", map[string]any{"path": "/srv/alpha/l", "target": "/etc"},
			"target", "target /etc (/etc) is outside"},
		{"a relative symlink climbing out", rules, "fs::Symlink", map[string]any{"path": "/srv/alpha/l", "target": "../../etc"},
			"target", "holds \"..\""},
		{"a relative symlink with .. that stays inside lexically", rules, "fs::Symlink",
			map[string]any{"path": "/srv/alpha/d/l", "target": "x/../y"}, "target", "holds \"..\""},
		{"a purged symlink without target", rules, "fs::Symlink", map[string]any{"path": "/srv/alpha/l"}, "", ""},
		{"a type that is not confined", rules, "postgres::Role", map[string]any{"name": "/etc/shadow"}, "", ""},
		{"an allowed program", rules, "exec::Command",
			map[string]any{"name": "r", "command": []any{"/usr/bin/systemctl", "restart", "x"}, "creates": "/srv/alpha/done"}, "", ""},
		{"another program", rules, "exec::Command", map[string]any{"name": "r", "command": []any{"/usr/bin/curl", "x"}},
			"command/0", "command program /usr/bin/curl is not in the environment's allowed_commands [/usr/bin/systemctl /bin/true]"},
		{"a bare name, looked up in PATH", rules, "exec::Command", map[string]any{"name": "r", "command": []any{"systemctl"}},
			"command/0", "not a clean absolute path"},
		{"a shell string", rules, "exec::Command", map[string]any{"name": "r", "command": "/usr/bin/systemctl restart x"},
			"command", "is a shell string (run by /bin/sh -c)"},
		{"a shell string when the shell is allowed", confine.Rules{Commands: []string{"/bin/sh"}}, "exec::Command",
			map[string]any{"name": "r", "command": "anything"}, "", ""},
		{"a guard running another program", rules, "exec::Command",
			map[string]any{"name": "r", "command": []any{"/bin/true"}, "unless": []any{"/usr/bin/test", "-e", "/x"}},
			"unless/0", "not in the environment's allowed_commands"},
		{"an undo", rules, "exec::Command", map[string]any{"name": "r", "undo": []any{"/bin/rm", "-rf", "/"}},
			"undo/0", "/bin/rm is not in"},
		{"a secret reference as program", rules, "exec::Command",
			map[string]any{"name": "r", "command": []any{map[string]any{"secret": "env:INTEND_SECRET_X"}}}, "command", "plain string"},
		{"env with an allowed program", rules, "exec::Command",
			map[string]any{"name": "r", "command": []any{"/bin/true"}, "env": map[string]any{"LD_PRELOAD": "/srv/alpha/x.so"}},
			"env", "may not set variables"},
		{"an empty env", rules, "exec::Command", map[string]any{"name": "r", "command": []any{"/bin/true"}, "env": map[string]any{}}, "", ""},
		{"a cwd outside", rules, "exec::Command", map[string]any{"name": "r", "command": []any{"/bin/true"}, "cwd": "/root"},
			"cwd", "outside"},
		{"commands unconfined, paths confined", confine.Rules{Paths: []string{"/srv"}}, "exec::Command",
			map[string]any{"name": "r", "command": "rm -rf /", "env": map[string]any{"A": "b"}}, "", ""},
		{"the root allows every path", confine.Rules{Paths: []string{"/"}}, "fs::File", map[string]any{"path": "/etc/shadow"}, "", ""},
	}
	for _, c := range cases {
		ref := c.rules.Check(c.typ, c.attrs)
		switch {
		case c.refused == "" && ref != nil:
			t.Errorf("%s: refused %s: %s", c.why, ref.Attribute, ref.Reason)
		case c.refused != "" && ref == nil:
			t.Errorf("%s: allowed, want %s refused", c.why, c.refused)
		case c.refused != "" && (ref.Attribute != c.refused || !strings.Contains(ref.Reason, c.reason)):
			t.Errorf("%s: refused %s: %q; want %s refused with %q", c.why, ref.Attribute, ref.Reason, c.refused, c.reason)
		}
	}
}

func TestCheckEntry(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"/", "/srv/alpha", "/usr/bin/systemctl"} {
		if err := confine.CheckEntry(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "srv", "/srv/", "/srv/../etc", "/srv//a", "/srv/./a", "/a\x00b", "/a\nb",
		"/" + strings.Repeat("a", 4096)} {
		if err := confine.CheckEntry(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
