// Package gittest makes git repositories for tests: a bare repository on
// disk (what a repo_url names) and a work clone to commit from and push to
// it. It runs the git binary, with a fixed committer, and fails the test
// when git fails.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo is a bare repository, Bare (a directory named model.git), and a
// work repository, Work, in the same temporary directory; both start
// empty, on branch main.
type Repo struct {
	Bare, Work string
	t          testing.TB
}

// New makes an empty Repo in a temporary directory of t's.
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	r := &Repo{t: t, Bare: filepath.Join(dir, "model.git"), Work: filepath.Join(dir, "work")}
	r.Git(dir, "init", "--quiet", "--bare", "--initial-branch=main", r.Bare)
	r.Git(dir, "init", "--quiet", "--initial-branch=main", r.Work)
	return r
}

// Git runs git with args in dir, as a test committer, and returns its
// output, trimmed; it fails the test when git fails.
func (r *Repo) Git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes files into the work repository (names are slash
// separated and relative to it; nil content deletes the file), commits
// them to branch, making the commit even when nothing changed, and
// force-pushes branch to the bare repository; it returns the commit's sha.
func (r *Repo) Commit(branch string, files map[string]*string) string {
	r.t.Helper()
	r.Git(r.Work, "checkout", "--quiet", "-B", branch)
	for name, content := range files {
		p := filepath.Join(r.Work, filepath.FromSlash(name))
		if content == nil {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(*content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.Git(r.Work, "add", "--all")
	r.Git(r.Work, "commit", "--quiet", "--allow-empty", "-m", "model")
	r.Git(r.Work, "push", "--quiet", "--force", r.Bare, branch)
	return r.Git(r.Work, "rev-parse", "HEAD")
}

// Text returns a pointer to s, for Commit's files.
func Text(s string) *string { return &s }
