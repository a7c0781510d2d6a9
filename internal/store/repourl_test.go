package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestCheckRepoURL: what a repo_url may name, on a server with and
// without --allow-local-repos.
func TestCheckRepoURL(t *testing.T) {
	t.Parallel()
	const ok, local, creds = "", "local", "credentials"
	for _, c := range []struct {
		url string
		// want is ok, local (refused only without the flag), creds
		// (ErrRepoCredentials) or text the refusal must hold.
		want string
		why  string
	}{
		{"", ok, "no repository"},
		{"https://git.example.com/model.git", ok, "https"},
		{"https://git.example.com:8443/a/b.git", ok, "https with a port"},
		{"https://alice@git.example.com/model.git", ok, "a user alone picks a credential of the helper"},
		{"ssh://git@git.example.com/model.git", ok, "ssh with a user"},
		{"ssh://git@git.example.com:2222/~alice/model.git", ok, "ssh with a port and a home path"},
		{"ssh://[::1]/model.git", ok, "an IPv6 host (its '::' is not a transport)"},
		{"git://git.example.com/model.git", ok, "the git protocol"},
		{"git@github.com:org/model.git", ok, "scp-like with a user"},
		{"github.com:org/model.git", ok, "scp-like without a user"},
		{"/srv/git/model.git", local, "an absolute path"},
		{"model.git", local, "a relative path"},
		{"../other/env.git", local, "a relative path out of the working directory"},
		{"./a:b", local, "a '/' before the ':' makes it a path, as git has it"},
		{"file:///srv/git/model.git", local, "file://"},
		{"file://localhost/srv/git/model.git", local, "file:// with a host"},
		{"ext::sh -c touch% /tmp/pwned", "transport \"ext\"", "ext runs a command"},
		{"fd::3", "transport \"fd\"", "fd speaks over an inherited descriptor"},
		{"myhost::repo", "transport \"myhost\"", "any remote helper"},
		{"https::git.example.com/model.git", "transport \"https\"", "a helper spelled like a scheme"},
		{"http://git.example.com/model.git", "scheme \"http\"", "clear text"},
		{"ftp://git.example.com/model.git", "scheme \"ftp\"", "an old transport"},
		{"HTTPS://git.example.com/model.git", "scheme \"HTTPS\"", "git would look for a helper git-remote-HTTPS"},
		{"git+ssh://git.example.com/model.git", "scheme \"git+ssh\"", "only the plain spellings"},
		{"-u", "'-'", "an option"},
		{"--upload-pack=touch /tmp/x", "'-'", "an option that runs a command"},
		{"ssh://-oProxyCommand=x/model.git", "starting with '-'", "an option as the ssh host"},
		{"ssh://-oProxyCommand=x@host/model.git", "starting with '-'", "an option as the ssh user"},
		{"-oProxyCommand=x:model.git", "'-'", "an option as the scp-like host"},
		{"host:-x", "starting with '-'", "an option as the scp-like path"},
		{":model.git", "no host", "scp-like without a host"},
		{"https:///model.git", "no host", "a URL without a host"},
		{"https://git.example.com/a\tb", "control", "a tab"},
		{"https://user:token@git.example.com/model.git", creds, "a token in the userinfo"},
		{"https://:token@git.example.com/model.git", creds, "a password without a user"},
		{"https://user:p@ss@git.example.com/model.git", creds, "an '@' in the password"},
		{"ssh://git:pw@git.example.com/model.git", creds, "a password in an ssh URL"},
		{"user:token@git.example.com:org/model.git", creds, "user:password@host:path, scp-like"},
		{"host:repos/@v2/x", ok, "an '@' in an scp-like path is no password"},
	} {
		for _, allowLocal := range []bool{false, true} {
			err := store.CheckRepoURL(c.url, allowLocal)
			switch {
			case c.want == ok || c.want == local && allowLocal:
				if err != nil {
					t.Errorf("%q (%s), allowLocal=%v: %v, want accepted", c.url, c.why, allowLocal, err)
				}
			case c.want == local:
				if !errors.Is(err, store.ErrLocalRepo) || !strings.Contains(err.Error(), "--allow-local-repos") {
					t.Errorf("%q (%s): %v, want ErrLocalRepo naming --allow-local-repos", c.url, c.why, err)
				}
			case c.want == creds:
				if !errors.Is(err, store.ErrRepoCredentials) || !strings.Contains(err.Error(), "credential helper") {
					t.Errorf("%q (%s), allowLocal=%v: %v, want ErrRepoCredentials", c.url, c.why, allowLocal, err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%q (%s), allowLocal=%v: %v, want a refusal saying %q", c.url, c.why, allowLocal, err, c.want)
				}
			}
		}
	}
}

// TestApplySettingsRepoURL: the settings refuse what no server fetches
// (transports, options, credentials) and leave local paths to the
// server's flag, which the API checks.
func TestApplySettingsRepoURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url, want string // want: "" accepted, else text of the reason
		why       string
	}{
		{"/srv/git/model.git", "", "local: the API decides with the server's flag"},
		{"file:///srv/git/model.git", "", "local: likewise"},
		{"git@github.com:org/model.git", "", "scp-like"},
		{"ext::sh -c id", "transport", "ext runs a command"},
		{"fd::0", "transport", "fd"},
		{"-u", "'-'", "an option"},
		{"https://u:secret@git.example.com/m.git", "credential helper", "credentials"},
	} {
		raw, _ := json.Marshal(c.url)
		s, errs := store.ApplySettings(store.DefaultSettings(), map[string]json.RawMessage{"repo_url": raw})
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%q (%s): %v, want accepted", c.url, c.why, errs[0])
		case c.want == "" && s.RepoURL != c.url:
			t.Errorf("%q (%s): repo_url = %q", c.url, c.why, s.RepoURL)
		case c.want != "" && (len(errs) != 1 || errs[0].Key != "repo_url" || !strings.Contains(errs[0].Reason, c.want)):
			t.Errorf("%q (%s): %v, want one error on repo_url saying %q", c.url, c.why, errs, c.want)
		}
	}
}

// TestRedactURL: a password in a URL never shows, wherever the URL is
// (a setting, git's message, JSON); the rest stays as it was.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want, why string }{
		{"https://user:s3cret@git.example.com/m.git", "https://user:xxxxx@git.example.com/m.git", "a password"},
		{"https://:tok@host/m.git", "https://:xxxxx@host/m.git", "no user"},
		{"https://user:p@ss@host/m.git", "https://user:xxxxx@host/m.git", "an '@' in the password"},
		{"fatal: unable to access 'https://u:tok@host/m.git/': Could not resolve host: host",
			"fatal: unable to access 'https://u:xxxxx@host/m.git/': Could not resolve host: host", "git's message"},
		{`[{"message":"fetch of https://u:tok@host/m.git failed"}]`,
			`[{"message":"fetch of https://u:xxxxx@host/m.git failed"}]`, "JSON"},
		{`"https://u:tok","x@y"`, `"https://u:tok","x@y"`, "a quote ends a URL"},
		{"https://git.example.com:443/m.git", "https://git.example.com:443/m.git", "a port is no password"},
		{"ssh://git@host:22/m.git", "ssh://git@host:22/m.git", "a user alone"},
		{"git@github.com:org/m.git", "git@github.com:org/m.git", "scp-like"},
		{"/srv/git/m.git", "/srv/git/m.git", "a path"},
		{"a: https://u:one@h/x and ssh://v:two@k/y", "a: https://u:xxxxx@h/x and ssh://v:xxxxx@k/y", "two URLs"},
	} {
		if got := store.RedactURL(c.in); got != c.want {
			t.Errorf("%s: RedactURL(%q) = %q, want %q", c.why, c.in, got, c.want)
		}
	}
}

// FuzzCheckRepoURL: no input panics, and the server's flag only ever
// widens what is accepted.
func FuzzCheckRepoURL(f *testing.F) {
	for _, s := range []string{"", "/srv/x.git", "file:///x", "ext::sh", "https://u:p@h/x", "git@h:x", "[::1]:x",
		"ssh://[::1]:22/x", "a::b", "::", "://", "h:@x:y", "https://h/x?y=a@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		strict, wide := store.CheckRepoURL(u, false), store.CheckRepoURL(u, true)
		if strict == nil && wide != nil {
			t.Fatalf("%q: accepted without the flag, refused with it: %v", u, wide)
		}
		_ = store.RedactURL(u)
	})
}
