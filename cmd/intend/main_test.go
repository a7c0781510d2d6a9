package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
)

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, &out, &out)
	return out.String(), err
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{}, {"server"}, {"executor"}, {"migrate"}, {"deploy"}, {"init"}, {"compile"},
		{"export"}, {"dryrun"}, {"std"}, {"compiles"}, {"compiles", "request"}} {
		out, err := runCmd(t, append(cmd, "--help")...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Errorf("intend %v --help: %v\n%s", cmd, err, out)
		}
	}
}

func TestFlagErrorsAreClear(t *testing.T) {
	t.Parallel()
	shortKey := filepath.Join(t.TempDir(), "console.key")
	if err := os.WriteFile(shortKey, []byte("\nshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
		why  string
	}{
		{[]string{"executor"}, "--environment and at least one --agent", "executor needs to know what to serve"},
		{[]string{"server", "--log-level", "loud"}, `--log-level "loud"`, "a bad log level is named"},
		{[]string{"server", "--compile-memory", "lots"}, `--compile-memory: "lots": want a size`, "a compile memory limit is a size"},
		{[]string{"server", "--compile-memory", "10MiB"}, "at least 64MiB", "a compile needs room"},
		{[]string{"server", "--compile-memory", "99999999999GiB"}, "want a size", "a size that overflows is refused"},
		{[]string{"server", "--compile-workers", "0"}, "--compile-workers at least 1", "a compile needs a worker"},
		{[]string{"server", "--compile-timeout", "0s"}, "--compile-timeout must be positive", "a compile needs time"},
		{[]string{"server", "--audit-retention", "10m"}, "--audit-retention must be 0", "an audit trail of minutes is a mistake"},
		{[]string{"server", "--audit-retention", "-1h"}, "--audit-retention must be 0", "a negative retention is refused"},
		{[]string{"server", "--access-log", "loud"}, `--access-log "loud": want debug, info, warn or off`, "a bad access log level is named"},
		{[]string{"server", "--oidc-issuer", "https://id.example.com", "--oidc-audience", "intend", "--oidc-client-secret-file", "/does/not/exist"},
			"--oidc-client-secret-file", "a missing client secret file is named"},
		{[]string{"server", "--console-key-file", "/does/not/exist"}, "--console-key-file", "a missing console key file is named"},
		{[]string{"server", "--console-key-file", shortKey}, "line 2 of " + shortKey + ": a key of 5 bytes, want at least 32",
			"a console key too short to sign is refused, its line named"},
		{[]string{"deploy", "/does/not/exist"}, "/does/not/exist", "a missing path is named"},
		{[]string{"nonsense"}, `unknown command "nonsense"`, "unknown commands are refused"},
	}
	for _, c := range cases {
		_, err := runCmd(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: intend %v: got %v, want an error containing %q", c.why, c.args, err, c.want)
		}
	}
}

// TestQuickstartIsAValidVersion keeps the example that `make demo` deploys
// compiling into a valid version.
func TestQuickstartIsAValidVersion(t *testing.T) {
	t.Parallel()
	out, err := runCmd(t, "compile", "../../examples/quickstart", "--json")
	if err != nil {
		t.Fatalf("intend compile examples/quickstart: %v\n%s", err, out)
	}
	v, err := intent.DecodeBytes([]byte(out))
	if err != nil {
		t.Fatalf("examples/quickstart: %v", err)
	}
	types := map[string]int{}
	for _, r := range v.Resources {
		types[r.ID.Type]++
	}
	if types["fs::Directory"] < 2 || types["fs::File"] < 2 || types["fs::Symlink"] < 1 {
		t.Errorf("the quick start should show directories, files and a symlink: %v", types)
	}
}

// quickstart copies examples/quickstart into a temporary directory, with
// its root directory moved there too, and returns the project and the root.
func quickstart(t *testing.T) (dir, root string) {
	t.Helper()
	return copyExample(t, "quickstart", "/tmp/intend-quickstart")
}

// copyExample copies examples/NAME into a temporary directory (without its
// data), with the root directory its model writes to (the string literal
// from) moved there too, and returns the project and the root.
func copyExample(t *testing.T, name, from string) (dir, root string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "www")
	return copyExampleWith(t, name, map[string]string{from: root}), root
}

// TestEmbeddedDeploy runs `intend deploy` on the quick start as `make demo`
// does: it starts PostgreSQL and Temporal from the local binaries, compiles,
// deploys, stops; a second run on the same data changes nothing; a changed
// model deploys only the change, and --dry-run shows it first.
func TestEmbeddedDeploy(t *testing.T) {
	dir, root := quickstart(t)
	out, err := runCmd(t, "deploy", dir)
	if err != nil {
		t.Fatalf("intend deploy: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(root, "apps", "shop", "config.json")); err != nil ||
		string(got) != `{"listen":"127.0.0.1:8080","workers":2}`+"\n" {
		t.Fatalf("deployed config = %q, %v\n%s", got, err, out)
	}
	if target, err := os.Readlink(filepath.Join(root, "apps", "blog", "current")); err != nil || target != "releases/v1" {
		t.Errorf("symlink = %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "deploy", "pg")); err != nil {
		t.Errorf("state is not in the project's data/deploy: %v", err)
	}
	for _, want := range []string{"compiled quickstart: 11 resources from 2 refinement instances",
		"version 1 of dev: 11 resources, 11 changed", "11/11 done", "11 deployed, 0 failed, 0 skipped",
		"RESULT", "Temporal UI: http://"} {
		if !strings.Contains(out, want) {
			t.Errorf("first deploy: output lacks %q:\n%s", want, out)
		}
	}

	out, err = runCmd(t, "deploy", dir)
	if err != nil {
		t.Fatalf("second intend deploy: %v\n%s", err, out)
	}
	for _, want := range []string{"version 2 of dev: 11 resources, 0 changed", "0 deployed, 0 failed, 0 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("second deploy: output lacks %q:\n%s", want, out)
		}
	}

	model := filepath.Join(dir, "main.cue")
	b, _ := os.ReadFile(model)
	changed := bytes.Replace(b, []byte("instances: shop: port: 8080"), []byte("instances: shop: port: 8090"), 1)
	if bytes.Equal(b, changed) {
		t.Fatal("the quick start no longer has the shop's port to change")
	}
	if err := os.WriteFile(model, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "deploy", dir, "--dry-run")
	if err != nil {
		t.Fatalf("intend deploy --dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"modified    fs::File[localhost,path=" + root + "/apps/shop/config.json]",
		`127.0.0.1:8080`, `127.0.0.1:8090`, "1 modified, 10 unmodified"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run: output lacks %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "apps", "shop", "config.json")); !bytes.Contains(got, []byte("8080")) {
		t.Errorf("the dry-run changed the file: %s", got)
	}

	out, err = runCmd(t, "deploy", dir)
	if err != nil {
		t.Fatalf("third intend deploy: %v\n%s", err, out)
	}
	// (Version 4 changes nothing from version 3, the dry-run's: what counts
	// is what the run deploys.)
	for _, want := range []string{"version 4 of dev: 11 resources", "1/1 done", "1 deployed, 0 failed, 0 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy of the change: output lacks %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "apps", "shop", "config.json")); !bytes.Contains(got, []byte("8090")) {
		t.Errorf("the change was not deployed: %s", got)
	}

	// On a data directory of earlier deploys the services start while
	// the model compiles; a broken model stops them again, says nothing
	// of them, and the next deploy starts them as usual.
	if err := os.WriteFile(model, bytes.Replace(changed, []byte("port: 8090"), []byte(`port: "http"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "deploy", dir)
	if err == nil || !strings.Contains(err.Error(), "parameter.port") || strings.Contains(out, "starting PostgreSQL") {
		t.Fatalf("deploy of a broken model on earlier data: err = %v\n%s", err, out)
	}
	if err := os.WriteFile(model, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "deploy", dir)
	if err != nil || !strings.Contains(out, "0 deployed, 0 failed, 0 skipped") {
		t.Fatalf("deploy after the broken model: %v\n%s", err, out)
	}

	// A resource that fails fails the command: exit 1, named on stderr.
	config := filepath.Join(root, "apps", "shop", "config.json")
	if err := os.Remove(config); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(config, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, bytes.Replace(changed, []byte("port: 8090"), []byte("port: 8095"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, "deploy", dir)
	if err == nil || exitCode(err) != exitFailed || !strings.Contains(err.Error(), "some resources did not deploy") ||
		!strings.Contains(out, "0 deployed, 1 failed") {
		t.Fatalf("deploy with a resource that fails: %v (exit %d)\n%s", err, exitCode(err), out)
	}
}

// TestDeployRefusesABrokenModel: a compile error names the problem with
// its position, exits non-zero and starts nothing.
func TestDeployRefusesABrokenModel(t *testing.T) {
	t.Parallel()
	dir, _ := quickstart(t)
	model := filepath.Join(dir, "main.cue")
	b, _ := os.ReadFile(model)
	if err := os.WriteFile(model, bytes.Replace(b, []byte("port: 8080"), []byte(`port: "http"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "deploy", dir)
	if err == nil || !strings.Contains(err.Error(), "parameter.port") || !strings.Contains(err.Error(), "main.cue:") {
		t.Fatalf("err = %v\n%s", err, out)
	}
	if strings.Contains(out, "starting PostgreSQL") {
		t.Errorf("started services for a broken model:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("created a data directory for a broken model")
	}
}

// TestComposeUsesKnownVariables keeps deploy/compose.yaml honest: every
// INTEND_* variable it sets is one some intend command reads.
func TestComposeUsesKnownVariables(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var help strings.Builder
	for _, cmd := range []string{"server", "executor", "migrate", "deploy"} {
		out, err := runCmd(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		help.WriteString(out)
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "INTEND_") {
			continue
		}
		name := strings.TrimSuffix(strings.Fields(line)[0], ":")
		found++
		if !strings.Contains(help.String(), "env "+name+")") {
			t.Errorf("deploy/compose.yaml sets %s, which no intend command reads", name)
		}
	}
	if found == 0 {
		t.Error("deploy/compose.yaml sets no INTEND_* variable")
	}
}

// TestEmbeddedDeployResolvesFacts: a file whose content uses a fact of
// another (its size) is undefined until that one is deployed; intend
// deploy compiles again with the reported facts and deploys it in the same
// invocation.
func TestEmbeddedDeployResolvesFacts(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "out")
	files := map[string]string{
		"intend.yaml": "name: facts\n",
		"main.cue": `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/resource"
)

facts: resource.#Facts

resources: {
	seed: fs.#File & {path: "` + root + `/seed", content: "twelve bytes"}
	pin: fs.#File & {
		path:     "` + root + `/pin"
		content:  "seed has \(facts[seed.id].size) bytes\n"
		requires: [seed]
	}
	after: fs.#File & {path: "` + root + `/after", content: "last\n", requires: [pin]}
}
`}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCmd(t, "compile", dir)
	if err != nil || !strings.Contains(out, "undefined") || !strings.Contains(out, "1 undefined (they wait for facts)") {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	out, err = runCmd(t, "deploy", dir)
	if err != nil {
		t.Fatalf("intend deploy: %v\n%s", err, out)
	}
	for _, want := range []string{"1 deployed, 0 failed, 2 skipped", "facts arrived: 1 undefined resources are now defined",
		"2 deployed, 0 failed, 0 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "did not deploy") {
		t.Errorf("reports resources that did not deploy, though the last run deployed them:\n%s", out)
	}
	if got, err := os.ReadFile(filepath.Join(root, "pin")); err != nil || string(got) != "seed has 12 bytes\n" {
		t.Errorf("pin = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(root, "after")); err != nil {
		t.Errorf("the dependent of the undefined resource was not deployed after it: %v", err)
	}
}

// TestVersionFromBuildInfo: --version without the Makefile's -ldflags is
// what the toolchain recorded: the module version of go install
// ...@version, the commit of a checkout's build (and whether it was
// modified), or "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"v1.4.0", nil, "v1.4.0"},
		{"(devel)", nil, "dev"},
		{"", nil, "dev"},
		{"(devel)", rev, "dev (commit 0123456789ab, modified)"},
		{"v1.4.0", rev[:1], "v1.4.0 (commit 0123456789ab)"},
		{"v0.0.0-20261124120000-0123456789ab+dirty", rev, "v0.0.0-20261124120000-0123456789ab+dirty"},
	} {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/intendhq/intend", Version: c.version}, Settings: c.settings}
		if got := versionFromBuildInfo(info); got != c.want {
			t.Errorf("version %q with %v = %q, want %q", c.version, c.settings, got, c.want)
		}
	}
}
