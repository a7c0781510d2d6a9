package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/pythonplugin"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestPythonPluginDeploy walks examples/python-plugin as its README does:
// the ini module's Python plugin built into the module's dist/, then
// `intend deploy` of the project, with everything embedded (PostgreSQL,
// Temporal, the server and its executor, a child process that starts the
// plugin). The plugin's artifact is uploaded once; the options are in the
// file; a second deploy changes nothing; a dry-run of a changed value
// shows that option's diff and changes nothing, the deploy then rewrites
// it; a purged option is removed. The action log holds the plugin's own
// log lines, which name the interpreter that ran it: /usr/bin/python3,
// although a python3 that must never run comes first on PATH.
func TestPythonPluginDeploy(t *testing.T) {
	pythonplugin.Check(t)
	// The embedded executor's plugin cache goes under $HOME/.cache (the
	// executor user's home, for a deploy run by root).
	t.Setenv("HOME", t.TempDir())
	// A python3 first on PATH (as pyenv's shim is on a developer's
	// machine) must not be what runs the plugin.
	shim := t.TempDir()
	ranShim := filepath.Join(shim, "ran")
	if err := os.WriteFile(filepath.Join(shim, "python3"),
		[]byte("#!/bin/sh\necho \"$0 $*\" >> "+ranShim+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))

	dir, root := copyExample(t, "python-plugin", "/tmp/intend-python-plugin")
	proj := filepath.Join(dir, "project")
	pyz := pythonplugin.Build(t, pythonplugin.INI())
	b, err := os.ReadFile(pyz)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "module", "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "module", "dist", "ini.pyz"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	file := filepath.Join(root, "app.ini")
	id := func(section, key string) string {
		return "ini::Option[localhost,option=" + file + "[" + section + "]" + key + "]"
	}
	wantFile := func(step string, want map[string]map[string]string) {
		t.Helper()
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if parsed := parseINI(string(got)); !equalINI(parsed, want) {
			t.Fatalf("%s: %s holds %v, want %v:\n%s", step, file, parsed, want, got)
		}
	}
	wants := func(step, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", step, w, out)
			}
		}
	}

	out, err := runCmd(t, "deploy", proj)
	if err != nil {
		t.Fatalf("intend deploy: %v\n%s", err, out)
	}
	wants("first deploy", out, "compiled python-plugin: 4 resources",
		"intend: uploaded plugin ini (any, "+digest+") to dev",
		"version 1 of dev: 4 resources, 4 changed", "4 deployed, 0 failed, 0 skipped")
	wantFile("first deploy", map[string]map[string]string{
		"server": {"port": "8080", "workers": "4"}, "log": {"level": "info"}})
	// The example's cue.mod and intend.lock are committed as intend writes
	// them from the module.
	for _, f := range []string{filepath.Join("cue.mod", "pkg", "example.com"), "intend.lock"} {
		if strings.Contains(out, "intend: wrote "+filepath.Join(proj, f)) {
			t.Errorf("deploy rewrote %s: run intend compile examples/python-plugin/project and commit it:\n%s", f, out)
		}
	}

	out, err = runCmd(t, "deploy", proj)
	if err != nil {
		t.Fatalf("second intend deploy: %v\n%s", err, out)
	}
	wants("second deploy", out, "version 2 of dev: 4 resources, 0 changed", "0 deployed, 0 failed, 0 skipped")
	if strings.Contains(out, "uploaded plugin") {
		t.Errorf("second deploy: uploaded the plugin the environment holds:\n%s", out)
	}

	model := filepath.Join(proj, "main.cue")
	edit := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(model)
		if err != nil {
			t.Fatal(err)
		}
		changed := bytes.Replace(b, []byte(from), []byte(to), 1)
		if bytes.Equal(b, changed) {
			t.Fatalf("examples/python-plugin/project/main.cue no longer has %s", from)
		}
		if err := os.WriteFile(model, changed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(`key: "port", value: "8080"`, `key: "port", value: "8090"`)
	out, err = runCmd(t, "deploy", proj, "--dry-run")
	if err != nil {
		t.Fatalf("intend deploy --dry-run: %v\n%s", err, out)
	}
	wants("dry-run", out, "modified    "+id("server", "port"), `"8080"`, `"8090"`, "1 modified, 3 unmodified")
	wantFile("after the dry-run", map[string]map[string]string{
		"server": {"port": "8080", "workers": "4"}, "log": {"level": "info"}})

	out, err = runCmd(t, "deploy", proj)
	if err != nil {
		t.Fatalf("deploy of the change: %v\n%s", err, out)
	}
	wants("deploy of the change", out, "1/1 done", "1 deployed, 0 failed, 0 skipped")
	wantFile("deploy of the change", map[string]map[string]string{
		"server": {"port": "8090", "workers": "4"}, "log": {"level": "info"}})

	// The purge, kept running to read the action log through the CLI.
	edit(`key: "level", value: "info"}`, `key: "level", value: "info", purged: true}`)
	out, logs := deployKeptRunning(t, proj, id("server", "port"), id("log", "level"))
	wants("deploy of the purge", out, "1/1 done", "1 deployed, 0 failed, 0 skipped")
	wantFile("deploy of the purge", map[string]map[string]string{
		"server": {"port": "8090", "workers": "4"}, "log": {}})

	// The plugin's own log lines, each naming its interpreter.
	port, level := logs[0], logs[1]
	python := "python=" + pythonplugin.Python
	if n := strings.Count(port, "INFO  set"); n != 2 || strings.Count(port, python) != 2 {
		t.Errorf("the port's action log has %d lines \"set\" by %s, want 2 (create, update):\n%s", n, python, port)
	}
	wants("the port's action log", port, "key=port path="+file, "section=server", "changed value: \"8080\" → \"8090\"")
	wants("the level's action log", level, "INFO  set", "INFO  removed", python, "key=level path="+file)
	if b, err := os.ReadFile(ranShim); err == nil {
		t.Errorf("the python3 first on PATH ran: %s", b)
	}
}

// deployKeptRunning runs `intend deploy --keep-running` on proj, reads
// the action log of each resource rid with `intend resource logs` once
// the deploy is done, stops it and returns its output and the logs.
func deployKeptRunning(t *testing.T, proj string, rids ...string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"deploy", proj, "--keep-running"}, func(string) string { return "" }, &out, &out)
	}()
	api := regexp.MustCompile(`Keeping everything running \(API (\S+),`)
	var base string
	wait.For(t, "intend deploy --keep-running to keep everything running", 5*time.Minute, func() error {
		select {
		case err := <-done:
			t.Fatalf("intend deploy --keep-running ended: %v\n%s", err, out.String())
		default:
		}
		m := api.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("not yet:\n%s", out.String())
		}
		base = m[1]
		return nil
	})
	token, err := os.ReadFile(filepath.Join(proj, "data", "deploy", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, rid := range rids {
		l, err := runCmd(t, "resource", "logs", rid, "--server", base, "--token", strings.TrimSpace(string(token)),
			"-e", "dev", "--color", "never")
		if err != nil {
			t.Fatalf("intend resource logs %s: %v\n%s", rid, err, l)
		}
		logs = append(logs, l)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("intend deploy --keep-running: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("intend deploy --keep-running did not stop in 1m after its interrupt:\n%s", out.String())
	}
	return out.String(), logs
}

// syncBuffer is a bytes.Buffer written by a command while a test reads
// it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// parseINI reads the sections and options of an INI file as configparser
// writes one ("key = value" lines under "[section]"); a line it does not
// understand is kept under the section "?".
func parseINI(text string) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if out[section] == nil {
				out[section] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(line, " = ")
			if !ok || out[section] == nil {
				if out["?"] == nil {
					out["?"] = map[string]string{}
				}
				out["?"][line] = ""
				continue
			}
			out[section][k] = v
		}
	}
	return out
}

func equalINI(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}
