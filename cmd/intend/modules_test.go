package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/gittest"
	"github.com/intendhq/intend/internal/modules"
)

// TestModulesCommands: a project using a directory module and a git
// module (at a tag) resolves on intend compile (which writes intend.lock
// and the modules' packages into cue.mod/pkg, saying so), lists them with
// intend modules list, is understood by the real cue tools, and refuses
// a moved tag until intend modules lock pins it anew.
func TestModulesCommands(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	r := gittest.New(t)
	first := r.Commit("main", map[string]*string{
		"intend-module.yaml": gittest.Text("name: greet\nversion: v1.0.0\ncue: example.org/greet\n"),
		"greet.cue":          gittest.Text("package greet\n\n#Hello: \"Hello from a module!\\n\"\n"),
	})
	r.Git(r.Work, "tag", "v1.0.0")
	r.Git(r.Work, "push", "--quiet", r.Bare, "refs/tags/v1.0.0")

	dir := filepath.Join(t.TempDir(), "p")
	ok(t, nil, "init", dir)
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yml, _ := os.ReadFile(filepath.Join(dir, "intend.yaml"))
	write("intend.yaml", string(yml)+"modules:\n  - {name: files, source: ./modules/files}\n"+
		"  - {name: greet, source: 'git+file://"+r.Bare+"@v1.0.0', version: v1.0.0}\n")
	write("modules/files/intend-module.yaml", "name: files\nversion: v0.1.0\ncue: example.com/files\n"+
		"plugins: [{name: files, runtime: exec, types: [files::Note], artifacts: {linux/amd64: dist/files}}]\n"+
		"requires: [{name: greet, version: v1.0.0}]\n")
	write("modules/files/dist/files", "a plugin")
	write("modules/files/files.cue", `package files

import (
	"example.org/greet"
	"intend.dev/std/fs"
)

#Greeting: fs.#File & {
	content: greet.#Hello
}
`)
	write("main.cue", `package main

import "example.com/files"

resources: hello: files.#Greeting & {path: "/tmp/greeting.txt"}
`)
	res := cli(t, nil, "compile", dir)
	if res.err != nil {
		t.Fatalf("%s", res)
	}
	for _, w := range []string{modules.LockName, "cue.mod/pkg/example.com/files", "cue.mod/pkg/example.org/greet"} {
		if !strings.Contains(res.stderr, filepath.Join(dir, w)) {
			t.Errorf("intend compile does not say it wrote %s:\n%s", w, res)
		}
	}
	if !strings.Contains(res.out, "fs::File[localhost,path=/tmp/greeting.txt]") {
		t.Errorf("compiled:\n%s", res)
	}
	out := ok(t, nil, "modules", "list", dir, "-w")
	for _, w := range []string{"files", "v0.1.0", "./modules/files", "greet", first[:12], "example.org/greet", "linux/amd64", "sha256:"} {
		if !strings.Contains(out, w) {
			t.Errorf("intend modules list lacks %q:\n%s", w, out)
		}
	}
	if cue := cueBinaryIfAny(t); cue != "" {
		if out, err := runCue(t, cue, dir, "vet", "./..."); err != nil {
			t.Errorf("cue vet ./...: %v\n%s", err, out)
		}
		checkCueFmt(t, cue, dir)
		checkCueLSPDefinition(t, cue, dir, "cue.mod/pkg/example.com/files")
	}

	// The tag moves: a fresh cache refuses it; intend modules lock pins it.
	moved := r.Commit("main", map[string]*string{"greet.cue": gittest.Text("package greet\n\n#Hello: \"moved\\n\"\n")})
	r.Git(r.Work, "tag", "--force", "v1.0.0")
	r.Git(r.Work, "push", "--quiet", "--force", r.Bare, "refs/tags/v1.0.0")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	fails(t, nil, 1, []string{"module greet", moved, first, "intend modules lock"}, "compile", dir)
	out = ok(t, nil, "modules", "lock", dir)
	if !strings.Contains(out, "2 modules pinned") {
		t.Errorf("intend modules lock:\n%s", out)
	}
	if lock, _ := os.ReadFile(filepath.Join(dir, modules.LockName)); !strings.Contains(string(lock), moved) {
		t.Errorf("intend.lock does not pin %s:\n%s", moved, lock)
	}
	ok(t, nil, "compile", dir)
}

// cueBinaryIfAny is cueBinary without the skip: "" when there is none
// outside CI.
func cueBinaryIfAny(t *testing.T) string {
	t.Helper()
	if os.Getenv("INTEND_CUE") == "" && os.Getenv("CI") == "" {
		if _, err := os.Stat("../../.tools/bin/cue"); err != nil {
			return ""
		}
	}
	return cueBinary(t)
}

// TestExportFileNamesThePlugins: the version -j writes requires the
// plugins of the project's modules, with their digests, as the one
// intend export uploads does.
func TestExportFileNamesThePlugins(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := filepath.Join(t.TempDir(), "p")
	ok(t, nil, "init", dir)
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yml, _ := os.ReadFile(filepath.Join(dir, "intend.yaml"))
	write("intend.yaml", string(yml)+"modules:\n  - {name: notes, source: ./modules/notes}\n")
	write("modules/notes/intend-module.yaml", "name: notes\nversion: v0.1.0\ncue: example.com/notes\n"+
		"plugins: [{name: notes, runtime: python3, types: [notes::Note], artifacts: {any: dist/notes.pyz}}]\n")
	write("modules/notes/dist/notes.pyz", "a plugin")
	write("modules/notes/notes.cue", "package notes\n")
	file := filepath.Join(t.TempDir(), "v.json")
	ok(t, nil, "export", dir, "-j", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Plugins []struct {
			Name      string            `json:"name"`
			Runtime   string            `json:"runtime"`
			Types     []string          `json:"types"`
			Artifacts map[string]string `json:"artifacts"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("a plugin"))
	want := "sha256:" + hex.EncodeToString(sum[:])
	if len(v.Plugins) != 1 || v.Plugins[0].Name != "notes" || v.Plugins[0].Runtime != "python3" ||
		v.Plugins[0].Artifacts["any"] != want {
		t.Errorf("export -j: plugins %+v, want notes (python3) with any: %s\n%s", v.Plugins, want, b)
	}
}
