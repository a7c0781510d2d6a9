package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestResponsesRedactRepoURL: a repo_url with a password, stored before
// such URLs were refused, shows redacted in environments and compiles
// (their git messages included); nothing else changes.
func TestResponsesRedactRepoURL(t *testing.T) {
	t.Parallel()
	const url = "https://ci:s3cret@git.example.com/model.git"
	e := store.Environment{Name: "prod", Settings: store.DefaultSettings()}
	e.Settings.RepoURL = url
	got := redactEnv(e)
	if got.Settings.RepoURL != "https://ci:xxxxx@git.example.com/model.git" || e.Settings.RepoURL != url ||
		got.Name != "prod" || got.Settings.RepoBranch != "main" {
		t.Errorf("redactEnv = %+v (the original now %q)", got.Settings, e.Settings.RepoURL)
	}
	c := redactCompile(store.Compile{ID: 3, RepoURL: url, Errors: store.CompileMessage(
		"fetch branch main of " + url + ": fatal: unable to access '" + url + "/': Could not resolve host")})
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || c.ID != 3 || !json.Valid(c.Errors) ||
		!strings.Contains(string(c.Errors), "https://ci:xxxxx@git.example.com") {
		t.Errorf("redactCompile = %s", b)
	}
	if got := redactEnv(store.Environment{Settings: store.Settings{RepoURL: "git@host:x.git"}}); got.Settings.RepoURL != "git@host:x.git" {
		t.Errorf("an URL without a password changed: %q", got.Settings.RepoURL)
	}
}
