package project

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckTree: a project the server compiles is directories and regular
// files; links and special files are refused by name, what stays out of
// archives (.git, data/) is not looked at.
func TestCheckTree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		why   string
		setup func(t *testing.T, dir string)
		want  string // "" : accepted
	}{
		{"regular files and directories", func(t *testing.T, dir string) {}, ""},
		{"a link out of the project", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "x.cue")); err != nil {
				t.Fatal(err)
			}
		}, "x.cue (a symbolic link)"},
		{"a link inside the project (archives leave it out)", func(t *testing.T, dir string) {
			if err := os.Symlink("main.cue", filepath.Join(dir, "sub", "y.cue")); err != nil {
				t.Fatal(err)
			}
		}, "sub/y.cue (a symbolic link)"},
		{"a named pipe", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "p"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "p (not a regular file)"},
		{"links in .git and data/ are not the project's", func(t *testing.T, dir string) {
			for _, d := range []string{".git", "data"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("/etc", filepath.Join(dir, d, "l")); err != nil {
					t.Fatal(err)
				}
			}
		}, ""},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "main.cue"), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.setup(t, dir)
		err := CheckTree(dir)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.why, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error naming %q", c.why, err, c.want)
		}
	}
}
