package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/modules"
	"github.com/intendhq/intend/internal/project"
)

// cueBinary is the pinned cue command (make cue; the Makefile exports
// INTEND_CUE). In CI a missing one fails the test: the promise that the
// cue tools understand an intend project is only kept if it is checked.
func cueBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("INTEND_CUE")
	if p == "" {
		if p2, err := filepath.Abs("../../.tools/bin/cue"); err == nil {
			if _, err := os.Stat(p2); err == nil {
				p = p2
			}
		}
	}
	if p == "" {
		t.Fatal("INTEND_CUE is not set and .tools/bin/cue is missing: run make cue (make test does)")
	}
	return p
}

// runCue runs cue with args in dir, with a cache and home of its own and
// nothing else set: no CUE_REGISTRY, as a user would run it.
func runCue(t *testing.T, cue, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cue, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append(cueEnv(), "HOME="+home, "CUE_CACHE_DIR="+filepath.Join(home, "cache"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cueEnv is the test's environment without the CUE_ variables.
func cueEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CUE_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

// cueProjects are the examples that are intend projects, by slash path
// under examples (custom-adapter/project is one too).
func cueProjects(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir("../../examples", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "cue.mod" || strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, project.FileName)); err == nil {
			rel, _ := filepath.Rel("../../examples", p)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 5 {
		t.Fatalf("found %d example projects (%v), want at least 5", len(names), names)
	}
	return names
}

// TestCueToolsUnderstandProjects runs the real cue command on a fresh
// `intend init` project and on every example project: cue vet, cue fmt
// --check, and cue lsp (initialize, open main.cue, jump to the
// definition of a standard-library type, which must be found in the
// project's cue.mod on disk). A model with refinements or services is
// not concrete (a refinement's parameter is filled per instance by
// intend), so vet runs with -c=false there; the fresh project is
// concrete and is vetted as is.
func TestCueToolsUnderstandProjects(t *testing.T) {
	cue := cueBinary(t)
	fresh := filepath.Join(t.TempDir(), "fresh")
	ok(t, nil, "init", fresh)
	t.Run("init", func(t *testing.T) {
		if out, err := runCue(t, cue, fresh, "vet", "./..."); err != nil {
			t.Fatalf("cue vet ./... on a fresh project: %v\n%s", err, out)
		}
		checkCueFmt(t, cue, fresh)
		checkCueLSP(t, cue, fresh)
	})
	names := cueProjects(t)
	if !slices.Contains(names, "custom-adapter/project") {
		t.Errorf("examples/custom-adapter/project (a project with a module) is not among the example projects %v", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("../../examples", filepath.FromSlash(name))
			if err := compiler.CheckStd(dir); err != nil {
				t.Fatalf("examples/%s: %v (intend compile examples/%s writes it)", name, err, name)
			}
			if out, err := runCue(t, cue, dir, "vet", "-c=false", "./..."); err != nil {
				t.Fatalf("cue vet -c=false ./... on examples/%s: %v\n%s", name, err, out)
			}
			checkModuleCopies(t, dir)
			checkCueFmt(t, cue, dir)
			checkCueLSP(t, cue, dir)
		})
	}
}

// checkModuleCopies: the copy of each directory module's CUE files in the
// project's cue.mod/pkg (what the cue tools read) is the module's own, so
// a committed example is not vetted against a stale copy.
func checkModuleCopies(t *testing.T, dir string) {
	t.Helper()
	proj, err := project.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range proj.Modules {
		if project.IsGitSource(m.Source) {
			continue
		}
		src := filepath.Join(dir, filepath.FromSlash(m.Source))
		man, err := modules.LoadManifest(src)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(src, "*.cue"))
		if len(files) == 0 {
			t.Fatalf("module %s (%s) has no CUE file", m.Name, src)
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			copied := filepath.Join(dir, "cue.mod", "pkg", filepath.FromSlash(man.CUE), filepath.Base(f))
			if got, err := os.ReadFile(copied); err != nil || string(got) != string(want) {
				t.Errorf("%s differs from %s (%v): intend compile %s rewrites it", copied, f, err, dir)
			}
		}
	}
}

func checkCueFmt(t *testing.T, cue, dir string) {
	t.Helper()
	if out, err := runCue(t, cue, dir, "fmt", "--check", "./..."); err != nil {
		t.Errorf("cue fmt --check ./... in %s: %v; not formatted:\n%s", dir, err, out)
	}
}

// checkCueLSP starts `cue lsp` in dir and speaks LSP to it over stdio:
// initialize, initialized, didOpen of main.cue, then a definition
// request on the first `<pkg>.#…` of main.cue (fs.#Directory), which
// must resolve into cue.mod/pkg/intend.dev/std. Error diagnostics published for main.cue
// on the way fail the test.
func checkCueLSP(t *testing.T, cue, dir string) {
	t.Helper()
	checkCueLSPDefinition(t, cue, dir, compiler.StdDir)
}

// checkCueLSPDefinition is checkCueLSP with the directory (slash,
// relative to dir) the definition must be found under.
func checkCueLSPDefinition(t *testing.T, cue, dir, under string) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(abs, "main.cue"))
	if err != nil {
		t.Fatal(err)
	}
	line, char := -1, 0
	for i, l := range strings.Split(string(text), "\n") {
		if c := strings.Index(l, ".#"); c > 0 && !strings.HasPrefix(strings.TrimSpace(l), "//") && l[c-1] >= 'a' && l[c-1] <= 'z' {
			line, char = i, c+2
			break
		}
	}
	if line < 0 {
		t.Fatalf("%s/main.cue uses no standard-library type (pkg.#Type)", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cue, "lsp")
	cmd.Dir = abs
	home := t.TempDir()
	cmd.Env = append(cueEnv(), "HOME="+home, "CUE_CACHE_DIR="+filepath.Join(home, "cache"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close()
		cancel()
		_ = cmd.Wait()
	}()
	send := func(m map[string]any) {
		m["jsonrpc"] = "2.0"
		b, _ := json.Marshal(m)
		if _, err := fmt.Fprintf(in, "Content-Length: %d\r\n\r\n%s", len(b), b); err != nil {
			t.Fatalf("cue lsp: write: %v\nstderr:\n%s", err, stderr.String())
		}
	}
	uri := "file://" + abs
	mainURI := uri + "/main.cue"
	send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"processId": os.Getpid(), "rootUri": uri, "capabilities": map[string]any{},
		"workspaceFolders": []any{map[string]any{"uri": uri, "name": filepath.Base(abs)}}}})
	r := bufio.NewReader(outPipe)
	for {
		msg, err := readLSP(r)
		if err != nil {
			t.Fatalf("cue lsp in %s: %v\nstderr:\n%s", dir, err, stderr.String())
		}
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("cue lsp: %v: %s", err, msg)
		}
		switch {
		case m.Error != nil:
			t.Fatalf("cue lsp in %s answered an error: %s", dir, msg)
		case m.Method == "textDocument/publishDiagnostics":
			var p struct {
				URI         string `json:"uri"`
				Diagnostics []struct {
					Severity int    `json:"severity"`
					Message  string `json:"message"`
				} `json:"diagnostics"`
			}
			_ = json.Unmarshal(m.Params, &p)
			for _, d := range p.Diagnostics {
				if d.Severity == 1 {
					t.Errorf("cue lsp in %s: error in %s: %s", dir, p.URI, d.Message)
				}
			}
		case m.Method != "" && m.ID != nil: // a request of the server's: answer it
			send(map[string]any{"id": *m.ID, "result": nil})
		case m.ID != nil && *m.ID == 1:
			send(map[string]any{"method": "initialized", "params": map[string]any{}})
			send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{"textDocument": map[string]any{
				"uri": mainURI, "languageId": "cue", "version": 1, "text": string(text)}}})
			send(map[string]any{"id": 2, "method": "textDocument/definition", "params": map[string]any{
				"textDocument": map[string]any{"uri": mainURI}, "position": map[string]any{"line": line, "character": char}}})
		case m.ID != nil && *m.ID == 2:
			var locs []struct {
				URI string `json:"uri"`
			}
			_ = json.Unmarshal(m.Result, &locs)
			want := uri + "/" + under + "/"
			if len(locs) == 0 || !strings.HasPrefix(locs[0].URI, want) {
				t.Fatalf("cue lsp in %s: the definition of %q (main.cue:%d) is %s, want a file under %s",
					dir, strings.TrimSpace(strings.Split(string(text), "\n")[line]), line+1, m.Result, want)
			}
			return
		}
	}
}

// readLSP reads one LSP message (Content-Length header, blank line, body).
func readLSP(r *bufio.Reader) ([]byte, error) {
	n := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			if n, err = strconv.Atoi(v); err != nil {
				return nil, err
			}
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("message without Content-Length")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// TestInitIgnoresLocalSettings: .intend can hold a token, so intend init
// lists it in .gitignore, in a new one and in an existing one that
// lacks it (once, keeping what was there).
func TestInitIgnoresLocalSettings(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "fresh")
	ok(t, nil, "init", fresh)
	b, err := os.ReadFile(filepath.Join(fresh, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if !hasLine(string(b), "/.intend") {
		t.Errorf("a fresh project's .gitignore lacks /.intend:\n%s", b)
	}

	existing := t.TempDir()
	if err := os.WriteFile(filepath.Join(existing, ".gitignore"), []byte("*.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := ok(t, nil, "init", existing)
	b, _ = os.ReadFile(filepath.Join(existing, ".gitignore"))
	if !hasLine(string(b), "/.intend") || !hasLine(string(b), "*.log") {
		t.Errorf("an existing .gitignore: got\n%s\nwant *.log kept and /.intend added", b)
	}
	if !strings.Contains(out, ".gitignore") {
		t.Errorf("intend init does not say it changed .gitignore:\n%s", out)
	}

	again := t.TempDir()
	if err := os.WriteFile(filepath.Join(again, ".gitignore"), []byte(".intend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, nil, "init", again)
	if b, _ := os.ReadFile(filepath.Join(again, ".gitignore")); string(b) != ".intend\n" {
		t.Errorf("a .gitignore that has .intend was changed:\n%s", b)
	}
}

func hasLine(s, line string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// TestCompileRefreshesStd: a project's copy of the standard library (for
// the cue tools) that differs from this binary's, or is missing, is
// rewritten by intend compile, which says so; a file the binary's
// library lacks is removed.
func TestCompileRefreshesStd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	ok(t, nil, "init", dir)
	std := filepath.Join(dir, filepath.FromSlash(compiler.StdDir))
	if err := compiler.CheckStd(dir); err != nil {
		t.Fatalf("after intend init: %v", err)
	}
	fsFile := filepath.Join(std, "fs", "fs.cue")
	if err := os.WriteFile(fsFile, []byte("package fs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(std, "old", "old.cue")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("package old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if compiler.CheckStd(dir) == nil {
		t.Fatal("CheckStd accepts a changed copy")
	}
	r := cli(t, nil, "compile", dir)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	if !strings.Contains(r.stderr, compiler.StdDir) {
		t.Errorf("intend compile does not say it rewrote %s:\n%s", compiler.StdDir, r)
	}
	if err := compiler.CheckStd(dir); err != nil {
		t.Errorf("after intend compile: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", stale, err)
	}
	r = cli(t, nil, "compile", dir)
	if strings.Contains(r.stderr, compiler.StdDir) {
		t.Errorf("a second compile rewrote it again:\n%s", r)
	}
}
