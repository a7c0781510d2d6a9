package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/fetchhosts"
)

// TestRepoURLSettings: the API refuses a repo_url no server fetches
// (another transport, an option, credentials) and a local one on a
// server without --allow-local-repos, as a 422 naming /settings/repo_url
// and the reason; on create and on patch alike.
func TestRepoURLSettings(t *testing.T) {
	t.Parallel()
	strict := newFixture(t, api.Options{})
	wide := newFixture(t, api.Options{AllowLocalRepos: true})
	strict.env("repo")
	wide.env("repo")
	for i, c := range []struct {
		url string
		// strict and wide are the reason a server without and with
		// --allow-local-repos gives; "" accepts.
		strict, wide string
		why          string
	}{
		{"https://git.example.com/model.git", "", "", "https"},
		{"ssh://git@git.example.com/model.git", "", "", "ssh with a user and no password"},
		{"git@git.example.com:org/model.git", "", "", "scp-like"},
		{"git://git.example.com/model.git", "", "", "the git protocol"},
		{"/srv/git/model.git", "a local path needs intend server --allow-local-repos", "", "an absolute path"},
		{"model.git", "a local path needs intend server --allow-local-repos", "", "a relative path"},
		{"file:///srv/git/model.git", "a local path needs intend server --allow-local-repos", "", "file://"},
		{"ext::sh -c touch% /tmp/pwned", "transport \"ext\"", "transport \"ext\"", "ext runs a command"},
		{"fd::3", "transport \"fd\"", "transport \"fd\"", "fd"},
		{"-u", "'-'", "'-'", "an option"},
		{"https://user:token@git.example.com/model.git", "not in the URL", "not in the URL", "a token in the URL"},
	} {
		for _, f := range []struct {
			fx   *fixture
			want string
		}{{strict, c.strict}, {wide, c.wide}} {
			raw, _ := json.Marshal(c.url)
			create := fmt.Sprintf(`{"project":"p-repo","name":"r%d","settings":{"repo_url":%s}}`, i, raw)
			patch := fmt.Sprintf(`{"settings":{"repo_url":%s}}`, raw)
			for _, req := range [][3]string{{"POST", "/api/v1/environments", create}, {"PATCH", "/api/v1/environments/repo", patch}} {
				code, p := f.fx.call(req[0], req[1], req[2])
				if f.want == "" {
					if code != 200 && code != 201 {
						t.Errorf("%s %q (%s): %d %v, want accepted", req[0], c.url, c.why, code, p)
					}
					continue
				}
				if code != 422 || !problemNames(p, "/settings/repo_url", f.want) {
					t.Errorf("%s %q (%s): %d %v, want 422 naming /settings/repo_url saying %q", req[0], c.url, c.why, code, p, f.want)
				}
			}
		}
	}
}

// TestRepoURLFetchHosts: on a server with --compile-fetch-hosts, a
// repo_url naming a host the list does not allow is a 422 naming the
// flag (an environment's admin cannot point compiles elsewhere); a local
// repository is --allow-local-repos' business.
func TestRepoURLFetchHosts(t *testing.T) {
	t.Parallel()
	hosts, err := fetchhosts.Parse([]string{"github.com", ".example.com", "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, api.Options{AllowLocalRepos: true, CompileFetchHosts: hosts})
	f.env("repo")
	for _, c := range []struct {
		url, want, why string
	}{
		{"https://github.com/o/model.git", "", "a listed host"},
		{"git@git.example.com:o/model.git", "", "a host of a listed domain"},
		{"git://10.1.2.3/model.git", "", "an address of a listed range"},
		{"/srv/git/model.git", "", "a local path: not a host"},
		{"https://gitlab.evil.org/o/model.git", `names host "gitlab.evil.org", which this server does not fetch from`, "another host"},
		{"ssh://git@127.0.0.1:2222/model.git", "--compile-fetch-hosts: github.com,.example.com,10.0.0.0/8", "loopback"},
		{"https://169.254.169.254/latest", "does not fetch from", "the metadata address"},
	} {
		raw, _ := json.Marshal(c.url)
		code, p := f.call("PATCH", "/api/v1/environments/repo", fmt.Sprintf(`{"settings":{"repo_url":%s}}`, raw))
		if c.want == "" {
			if code != 200 {
				t.Errorf("%q (%s): %d %v, want accepted", c.url, c.why, code, p)
			}
			continue
		}
		if code != 422 || !problemNames(p, "/settings/repo_url", c.want) {
			t.Errorf("%q (%s): %d %v, want 422 saying %q", c.url, c.why, code, p, c.want)
		}
	}
}

// problemNames reports whether a problem has a field entry for field
// whose detail holds detail.
func problemNames(p map[string]any, field, detail string) bool {
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		m, _ := e.(map[string]any)
		if m["field"] == field && strings.Contains(m["detail"].(string), detail) {
			return true
		}
	}
	return false
}
