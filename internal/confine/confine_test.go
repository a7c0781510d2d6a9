package confine_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/netconf"
	"github.com/intendhq/intend/adapters/rest"
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

// TestCheckEndpoints: with any confinement setting set, a rest::Object's
// endpoint and a netconf::Config's address must lie within
// allowed_endpoints (none allowed when it is empty); a prefix holds at a
// separator, default ports are made explicit, hosts compare
// case-insensitively and lexically.
func TestCheckEndpoints(t *testing.T) {
	t.Parallel()
	rules := confine.Rules{Endpoints: []string{"https://api.example.com/v1", "http://10.0.0.5:15672/api",
		"netconf://r1.lab", "netconf://[2001:db8::1]:2830", "http://Mixed.Example.COM"}}
	rest := func(endpoint any) map[string]any {
		return map[string]any{"name": "o", "endpoint": endpoint, "path": "/users/app", "body": map[string]any{}}
	}
	device := func(address any) map[string]any { return map[string]any{"address": address, "user": "admin"} }
	const rt, nt = "rest::Object", "netconf::Config"
	cases := []struct {
		why   string
		rules confine.Rules
		typ   string
		attrs map[string]any
		// refused names the attribute refused and a part of the reason;
		// "" means allowed.
		refused, reason string
	}{
		{"unconfined reaches anything", confine.Rules{}, rt, rest("http://169.254.169.254/latest"), "", ""},
		{"unconfined reaches any device", confine.Rules{}, nt, device("127.0.0.1:22"), "", ""},
		{"confined by paths only: no endpoint allowed", confine.Rules{Paths: []string{"/srv"}}, rt,
			rest("http://169.254.169.254/latest"), "endpoint",
			"endpoint http://169.254.169.254/latest is outside the environment's allowed_endpoints []"},
		{"confined by commands only: no device allowed", confine.Rules{Commands: []string{"/bin/true"}}, nt,
			device("r1.lab"), "address", "address r1.lab is outside the environment's allowed_endpoints []"},
		{"the prefix itself", rules, rt, rest("https://api.example.com/v1"), "", ""},
		{"below the prefix", rules, rt, rest("https://api.example.com/v1/tenants/a"), "", ""},
		{"a trailing slash", rules, rt, rest("https://api.example.com/v1/"), "", ""},
		{"the default port made explicit", rules, rt, rest("https://api.example.com:443/v1"), "", ""},
		{"the host in capitals", rules, rt, rest("https://API.Example.com/v1"), "", ""},
		{"an entry in capitals", rules, rt, rest("http://mixed.example.com/x"), "", ""},
		{"an explicit port", rules, rt, rest("http://10.0.0.5:15672/api/vhosts"), "", ""},
		{"a sibling sharing the prefix's letters", rules, rt, rest("https://api.example.com/v10"), "endpoint",
			"endpoint https://api.example.com/v10 is outside the environment's allowed_endpoints [https://api.example.com/v1 "},
		{"the parent of the prefix", rules, rt, rest("https://api.example.com"), "endpoint", "outside"},
		{"a host that starts with the allowed one", rules, rt, rest("https://api.example.com.evil.org/v1"), "endpoint", "outside"},
		{"userinfo making the allowed host a user", rules, rt, rest("https://api.example.com@evil.org/v1"), "endpoint",
			"holds a user"},
		{"another scheme", rules, rt, rest("http://api.example.com/v1"), "endpoint", "outside"},
		{"another scheme on the allowed port", rules, rt, rest("http://api.example.com:443/v1"), "endpoint", "outside"},
		{"another port", rules, rt, rest("https://api.example.com:8443/v1"), "endpoint", "outside"},
		{"the default port where another is listed", rules, rt, rest("http://10.0.0.5/api"), "endpoint", "outside"},
		{"the metadata service", rules, rt, rest("http://169.254.169.254/latest/meta-data"), "endpoint", "outside"},
		{"loopback", rules, rt, rest("http://127.0.0.1:8080/api/v1"), "endpoint", "outside"},
		{"climbing out of the prefix", rules, rt, rest("https://api.example.com/v1/../admin"), "endpoint", "\"..\""},
		{"climbing out encoded", rules, rt, rest("https://api.example.com/v1/%2E%2e/admin"), "endpoint", "\"..\""},
		{"a query", rules, rt, rest("https://api.example.com/v1?x=1"), "endpoint", "query"},
		{"a fragment", rules, rt, rest("https://api.example.com/v1#x"), "endpoint", "fragment"},
		{"not a URL", rules, rt, rest("api.example.com/v1"), "endpoint", "not an http:// or https:// URL"},
		{"a secret reference as endpoint", rules, rt, rest(map[string]any{"secret": "env:INTEND_SECRET_E"}), "endpoint",
			"not a plain string"},
		{"a path climbing out of the endpoint", rules, rt,
			map[string]any{"name": "o", "endpoint": "https://api.example.com/v1", "path": "/../admin/x"}, "path", "\"..\""},
		{"a search path climbing out", rules, rt, map[string]any{"name": "o", "endpoint": "https://api.example.com/v1",
			"search": map[string]any{"path": "/x/..;/..;/admin"}}, "search/path", "\"..\""},
		{"an update path climbing out", rules, rt, map[string]any{"name": "o", "endpoint": "https://api.example.com/v1",
			"path": "/x", "update": map[string]any{"path": "/%2e%2e%2fadmin"}}, "update/path", "\"..\""},
		{"a device by name", rules, nt, device("r1.lab"), "", ""},
		{"a device with the default port", rules, nt, device("R1.Lab:830"), "", ""},
		{"a device on another port", rules, nt, device("r1.lab:22"), "address", "address r1.lab:22 is outside the environment's allowed_endpoints"},
		{"a device by address", rules, nt, device("[2001:DB8::1]:2830"), "", ""},
		{"that address on the default port", rules, nt, device("2001:db8::1"), "address", "outside"},
		{"a device sharing the name's letters", rules, nt, device("r1.lab.evil.org"), "address", "outside"},
		{"an API entry does not allow a device", confine.Rules{Endpoints: []string{"http://r1.lab:830"}}, nt, device("r1.lab"),
			"address", "outside"},
		{"a device entry does not allow an API", confine.Rules{Endpoints: []string{"netconf://api.example.com:443"}}, rt,
			rest("https://api.example.com"), "endpoint", "outside"},
		{"a device address that is no address", rules, nt, device("r1.lab/x"), "address", "not a host"},
		{"a secret reference as address", rules, nt, device(map[string]any{"secret": "env:INTEND_SECRET_A"}), "address",
			"not a plain string"},
		{"paths confined, endpoints listed: a file anywhere", confine.Rules{Endpoints: []string{"netconf://r1.lab"}}, "fs::File",
			map[string]any{"path": "/etc/shadow"}, "", ""},
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

func TestCheckEndpointEntry(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://api.example.com/v1", "http://10.0.0.5:15672/api", "http://[::1]:8080",
		"https://api.example.com/", "netconf://r1.lab", "netconf://r1.lab:2830", "netconf://[2001:db8::1]"} {
		if err := confine.CheckEndpointEntry(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "api.example.com", "/srv", "ftp://h/x", "https://", "https://user@h/v1",
		"https://user:pw@h/v1", "https://h/v1?x=1", "https://h/v1?", "https://h/v1#f", "https://h:0/", "https://h:70000/",
		"https://h:x/", "https://h/v1/../admin", "https://h/a b", "https://h/\nx", "netconf://r1.lab/x",
		"netconf://u@r1.lab", "netconf://r1.lab:0", "netconf://r1.lab?x", "netconf://r1_lab!", "mailto:x@h",
		"https://h/" + strings.Repeat("a", 2048)} {
		if err := confine.CheckEndpointEntry(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestEndpointTypesAreTheAdapters: the package names the types it
// confines rather than importing the adapters; were one renamed, its
// resources would reach anywhere unchecked.
func TestEndpointTypesAreTheAdapters(t *testing.T) {
	t.Parallel()
	rules := confine.Rules{Paths: []string{"/srv"}}
	if ref := rules.Check(rest.ObjectType, map[string]any{"endpoint": "http://169.254.169.254"}); ref == nil {
		t.Errorf("%s is not confined", rest.ObjectType)
	}
	if ref := rules.Check(netconf.ConfigType, map[string]any{"address": "127.0.0.1:22"}); ref == nil {
		t.Errorf("%s is not confined", netconf.ConfigType)
	}
}

// FuzzEndpoint: whatever an entry and an endpoint are, an endpoint the
// entry allows is dialled, by Go's HTTP client (which parses the
// endpoint with a path appended), at the entry's host and port, and lies
// under the entry's path.
func FuzzEndpoint(f *testing.F) {
	for _, s := range [][2]string{
		{"https://api.example.com/v1", "https://api.example.com/v1/x"},
		{"https://api.example.com/v1", "https://API.example.com:443/v1"},
		{"http://10.0.0.5:15672/api", "http://10.0.0.5:15672/api/"},
		{"http://[::1]:8080", "http://[::1]:8080/x"},
		{"http://h", "http://h:/x"},
		{"http://h", "http://h%2e/x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, entry, endpoint string) {
		if confine.CheckEndpointEntry(entry) != nil {
			return
		}
		if (confine.Rules{Endpoints: []string{entry}}).Check("rest::Object", map[string]any{"endpoint": endpoint}) != nil {
			return
		}
		e, err := url.Parse(entry)
		if err != nil {
			t.Fatalf("entry %q accepted, does not parse: %v", entry, err)
		}
		u, err := url.Parse(strings.TrimRight(endpoint, "/") + "/users/app")
		if err != nil {
			t.Fatalf("endpoint %q allowed by %q, does not parse: %v", endpoint, entry, err)
		}
		port := func(u *url.URL) string {
			if p := strings.TrimLeft(u.Port(), "0"); p != "" {
				return p
			}
			return map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if u.Scheme != e.Scheme || !strings.EqualFold(u.Hostname(), e.Hostname()) || port(u) != port(e) {
			t.Fatalf("endpoint %q allowed by %q: dials %s://%s:%s", endpoint, entry, u.Scheme, u.Hostname(), port(u))
		}
		if p := strings.TrimRight(e.EscapedPath(), "/"); !strings.HasPrefix(u.EscapedPath(), p+"/") {
			t.Fatalf("endpoint %q allowed by %q: path %s", endpoint, entry, u.EscapedPath())
		}
	})
}

// TestCheckPlugin: an unconfined environment runs any plugin; a confined
// one only the artifacts allowed_plugins lists, none while it is empty;
// allowed_plugins alone confines.
func TestCheckPlugin(t *testing.T) {
	t.Parallel()
	const listed, other = "sha256:" + "aa", "sha256:" + "bb"
	cases := []struct {
		why     string
		rules   confine.Rules
		digest  string
		refused bool
	}{
		{"unconfined: any plugin", confine.Rules{}, other, false},
		{"confined, none listed: none", confine.Rules{Paths: []string{"/srv"}}, listed, true},
		{"confined by endpoints, none listed", confine.Rules{Endpoints: []string{"https://a.example"}}, listed, true},
		{"listed", confine.Rules{Paths: []string{"/srv"}, Plugins: []string{listed}}, listed, false},
		{"not listed", confine.Rules{Paths: []string{"/srv"}, Plugins: []string{listed}}, other, true},
		{"allowed_plugins alone confines", confine.Rules{Plugins: []string{listed}}, other, true},
	}
	for _, c := range cases {
		ref := c.rules.CheckPlugin("kv", c.digest)
		if (ref != nil) != c.refused {
			t.Errorf("%s: CheckPlugin(kv, %s) = %v, want refused %v", c.why, c.digest, ref, c.refused)
			continue
		}
		if ref != nil && (!strings.Contains(ref.Reason, "plugin kv") || !strings.Contains(ref.Reason, c.digest) ||
			!strings.Contains(ref.Reason, confine.PluginsSetting)) {
			t.Errorf("%s: reason %q does not name the plugin, the digest and the setting", c.why, ref.Reason)
		}
	}
	if !(confine.Rules{Plugins: []string{listed}}).Confined() {
		t.Error("Rules with Plugins alone are not Confined")
	}
}
