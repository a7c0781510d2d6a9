package gittest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommit: commits reach the bare repository on their branch, with
// their files; nil content deletes a file; an unchanged commit is made
// all the same.
func TestCommit(t *testing.T) {
	r := New(t)
	if filepath.Base(r.Bare) != "model.git" {
		t.Errorf("Bare = %s, want a model.git", r.Bare)
	}
	sha1 := r.Commit("main", map[string]*string{"a.txt": Text("one\n"), "dir/b.txt": Text("two\n")})
	if got := r.Git(r.Work, "--git-dir", r.Bare, "log", "--format=%H", "main"); got != sha1 {
		t.Fatalf("bare log of main = %q, want %s", got, sha1)
	}
	if got := r.Git(r.Work, "--git-dir", r.Bare, "show", "main:dir/b.txt"); got != "two" {
		t.Errorf("dir/b.txt on main = %q, want two", got)
	}

	sha2 := r.Commit("main", map[string]*string{"a.txt": nil})
	if _, err := os.Stat(filepath.Join(r.Work, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt still in the work repository: %v", err)
	}
	if got := r.Git(r.Work, "--git-dir", r.Bare, "ls-tree", "-r", "--name-only", "main"); got != "dir/b.txt" {
		t.Errorf("files on main = %q, want only dir/b.txt", got)
	}
	sha3 := r.Commit("main", nil)
	if got := r.Git(r.Work, "--git-dir", r.Bare, "log", "--format=%H", "main"); got != strings.Join([]string{sha3, sha2, sha1}, "\n") {
		t.Errorf("bare log of main = %q, want %s %s %s", got, sha3, sha2, sha1)
	}

	other := r.Commit("other", map[string]*string{"c.txt": Text("three\n")})
	if got := r.Git(r.Work, "--git-dir", r.Bare, "rev-parse", "other", "main"); got != other+"\n"+sha3 {
		t.Errorf("bare branches other, main = %q, want %s and %s", got, other, sha3)
	}
}
