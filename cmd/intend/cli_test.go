package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// cliResult is what one run of the CLI did.
type cliResult struct {
	args        []string
	out, stderr string
	err         error
	code        int // the exit code main would use
}

func (r cliResult) String() string {
	return fmt.Sprintf("intend %s: exit %d, %v\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.err, r.out, r.stderr)
}

// cli runs intend with args and the variables in env, as main does.
func cli(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	r := cliResult{args: args, out: out.String(), stderr: errOut.String(), err: err}
	if err != nil {
		r.code = exitCode(err)
	}
	return r
}

// ok runs intend and fails the test unless it exits 0.
func ok(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	r := cli(t, env, args...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	return r.out
}

// fails runs intend and fails the test unless it exits with code and its
// error holds every one of want.
func fails(t *testing.T, env map[string]string, code int, want []string, args ...string) cliResult {
	t.Helper()
	r := cli(t, env, args...)
	if r.code != code {
		t.Errorf("exit %d, want %d: %s", r.code, code, r)
		return r
	}
	for _, w := range want {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("error lacks %q: %s", w, r)
		}
	}
	return r
}

// jsonOf decodes a command's --json output into v.
func jsonOf(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
}

// rowOf returns the fields of the table row whose first column is first.
func rowOf(t *testing.T, out, first string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", first, out)
	return nil
}

// field returns the value of "name:" in a command's name/value output.
func field(t *testing.T, out, name string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, found := strings.CutPrefix(line, name+":"); found {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no field %q in:\n%s", name, out)
	return ""
}

// TestCLIHelp: every REST client command has a Short, a Long with its
// endpoint and an example, and help for every flag.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	root := &cobra.Command{Use: "intend"}
	g := &globals{getenv: func(string) string { return "" }, stdout: &out, stderr: &out}
	root.AddCommand(envCommand(g), versionCommand(g), resourceCommand(g), agentCommand(g),
		deployNowCommand(g, "deploy-now"), deployNowCommand(g, "repair-now"),
		haltCommand(g, true), haltCommand(g, false), runsCommand(g))
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		name := c.CommandPath()
		if c.Short == "" || c.Long == "" {
			t.Errorf("%s: no Short or Long", name)
		}
		if c.Runnable() && !c.HasSubCommands() {
			if !strings.Contains(c.Long, "/api/v1/") {
				t.Errorf("%s: Long names no endpoint", name)
			}
			if !strings.Contains(c.Long, "Example") {
				t.Errorf("%s: Long has no example", name)
			}
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Usage == "" {
				t.Errorf("%s --%s: no help", name, f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range root.Commands() {
		walk(c)
	}
	for _, args := range [][]string{{"--help"}, {"env", "--help"}, {"env", "settings", "set", "--help"},
		{"versions", "diff", "--help"}, {"rollback", "--help"}, {"resource", "logs", "--help"}, {"deploy-now", "--help"},
		{"agent", "pause", "--help"}, {"halt", "--help"}, {"runs", "show", "--help"}} {
		r := cli(t, nil, args...)
		if r.err != nil || !strings.Contains(r.out, "Usage:") {
			t.Errorf("%s", r)
		}
	}
	if r := cli(t, nil, "--help"); !strings.Contains(r.out, "Exit codes:") {
		t.Errorf("intend --help documents no exit codes:\n%s", r.out)
	}
}

// TestCLISettingsPrecedence: each of server, token and environment comes
// from the flag, else the variable, else .intend, else intend.yaml, else
// the default; a missing file is fine and a malformed one an error; a
// token from .intend goes only to .intend's (or the project's) server.
func TestCLISettingsPrecedence(t *testing.T) {
	t.Parallel()
	const (
		yaml  = "name: shop\nenvironment: from-yaml\nserver: http://yaml.example:1\n"
		local = "server: http://local.example:1\ntoken: local-token\nenvironment: from-local\n"
	)
	all := map[string]string{"INTEND_SERVER": "http://env.example:1", "INTEND_TOKEN": "env-token",
		"INTEND_ENVIRONMENT": "from-env"}
	flags := []string{"--server", "http://flag.example:1", "--token", "flag-token", "-e", "from-flag"}
	cases := []struct {
		why         string
		yaml, local string
		vars        map[string]string
		flags       []string
		server      string
		token       string
		env         string // "" : the no-environment usage error
		wantErr     string // an error resolving anything
	}{
		{"flags beat everything", yaml, local, all, flags,
			"http://flag.example:1", "flag-token", "from-flag", ""},
		{"variables beat the files", yaml, local, all, nil,
			"http://env.example:1", "env-token", "from-env", ""},
		{".intend beats intend.yaml", yaml, local, nil, nil,
			"http://local.example:1", "local-token", "from-local", ""},
		{"intend.yaml alone (no token there)", yaml, "", nil, nil,
			"http://yaml.example:1", "", "from-yaml", ""},
		{"intend.yaml without environment means dev", "name: shop\n", "", nil, nil,
			defaultServer, "", "dev", ""},
		{"each setting on its own: a flag for one, files for the others", yaml, local, nil, []string{"-e", "from-flag"},
			"http://local.example:1", "local-token", "from-flag", ""},
		{".intend's token is not sent to another --server", yaml, local, nil, []string{"--server", "http://other.example:1"},
			"http://other.example:1", "", "from-local", ""},
		{".intend's token is not sent to another INTEND_SERVER", yaml, local,
			map[string]string{"INTEND_SERVER": "http://other.example:1"}, nil,
			"http://other.example:1", "", "from-local", ""},
		{".intend's token goes to .intend's server named by --server", yaml, local, nil,
			[]string{"--server", "http://local.example:1/"},
			"http://local.example:1", "local-token", "from-local", ""},
		{".intend's token without .intend's server goes to intend.yaml's", yaml, "token: local-token\n", nil, nil,
			"http://yaml.example:1", "local-token", "from-yaml", ""},
		{"INTEND_TOKEN is not sent to a server only a cloned intend.yaml names", yaml, "", map[string]string{"INTEND_TOKEN": "env-token"}, nil,
			"http://yaml.example:1", "", "from-yaml", ""},
		{"INTEND_TOKEN goes to intend.yaml's server once .intend names it too", yaml, "server: http://yaml.example:1\n",
			map[string]string{"INTEND_TOKEN": "env-token"}, nil,
			"http://yaml.example:1", "env-token", "from-yaml", ""},
		{"INTEND_TOKEN goes to INTEND_SERVER", yaml, "",
			map[string]string{"INTEND_TOKEN": "env-token", "INTEND_SERVER": "http://yaml.example:1"}, nil,
			"http://yaml.example:1", "env-token", "from-yaml", ""},
		{"INTEND_TOKEN goes to the default server outside a project", "", "", map[string]string{"INTEND_TOKEN": "env-token"}, nil,
			defaultServer, "env-token", "", ""},
		{"--token goes where the command line says, even to intend.yaml's server", yaml, "", nil, []string{"--token", "flag-token"},
			"http://yaml.example:1", "flag-token", "from-yaml", ""},
		{"outside a project: the default server, no environment", "", "", nil, nil,
			defaultServer, "", "", ""},
		{"a malformed .intend is an error", yaml, "servr: http://x:1\n", nil, nil,
			"", "", "", "servr"},
		{"a malformed intend.yaml is an error", "name: Not A Name\n", "", nil, nil,
			"", "", "", "name"},
		{"a bad --server is named", "", "", nil, []string{"--server", "localhost:8888"},
			"", "", "", `--server "localhost:8888"`},
		{"a bad INTEND_SERVER is named", "", "", map[string]string{"INTEND_SERVER": "ftp://x"}, nil,
			"", "", "", `INTEND_SERVER "ftp://x"`},
	}
	for _, tc := range cases {
		t.Run(tc.why, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.yaml != "" {
				if err := os.WriteFile(filepath.Join(dir, "intend.yaml"), []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.local != "" {
				if err := os.WriteFile(filepath.Join(dir, ".intend"), []byte(tc.local), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			g := &globals{getenv: func(k string) string { return tc.vars[k] }}
			cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
			s := g.clientFlags(cmd)
			cmd.SetArgs(append([]string{"--project-dir", dir}, tc.flags...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			c, cerr := s.client()
			env, eerr := s.environment()
			if tc.wantErr != "" {
				if cerr == nil || !strings.Contains(cerr.Error(), tc.wantErr) || exitCode(cerr) != exitUsage {
					t.Fatalf("client: %v, want a usage error containing %q", cerr, tc.wantErr)
				}
				return
			}
			if cerr != nil {
				t.Fatal(cerr)
			}
			if c.Base != tc.server || c.Token != tc.token {
				t.Errorf("server %q token %q, want %q %q", c.Base, c.Token, tc.server, tc.token)
			}
			switch {
			case tc.env == "" && (eerr == nil || exitCode(eerr) != exitUsage ||
				!strings.Contains(eerr.Error(), "no environment: pass -e, set INTEND_ENVIRONMENT or add environment to .intend")):
				t.Errorf("environment %q, %v; want the no-environment usage error", env, eerr)
			case tc.env != "" && (eerr != nil || env != tc.env):
				t.Errorf("environment %q, %v; want %q", env, eerr, tc.env)
			}
		})
	}
}

// TestCLITokenIsSent: the resolved token goes with every request as a
// bearer token.
func TestCLITokenIsSent(t *testing.T) {
	t.Parallel()
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Write([]byte(`{"items": []}`))
	}))
	defer srv.Close()
	ok(t, map[string]string{"INTEND_SERVER": srv.URL, "INTEND_TOKEN": "t0ken"}, "env", "list", "--json")
	if got != "Bearer t0ken" {
		t.Errorf("Authorization %q, want Bearer t0ken", got)
	}
}

// TestCLIUsageErrors: command lines that cannot be right exit 2 without
// asking a server.
func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	// No server listens here: a usage error must be found before asking.
	vars := map[string]string{"INTEND_SERVER": closedPort(t), "INTEND_ENVIRONMENT": "prod"}
	cases := []struct {
		why  string
		args []string
		want string
	}{
		{"an unknown flag", []string{"env", "list", "--bogus"}, "unknown flag: --bogus"},
		{"too many arguments", []string{"env", "show", "a", "b"}, "accepts at most 1 arg"},
		{"too few arguments", []string{"versions", "diff", "1"}, "accepts 2 arg"},
		{"an unknown subcommand", []string{"versions", "bogus"}, `unknown command "bogus"`},
		{"an unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"delete needs --yes", []string{"env", "delete", "prod"}, "pass --yes"},
		{"clear needs --yes", []string{"env", "clear", "prod"}, "pass --yes"},
		{"clear needs its environment named", []string{"env", "clear", "--yes"}, "accepts 1 arg"},
		{"decommission needs --yes", []string{"env", "decommission", "prod"}, "pass --yes"},
		{"unprotect needs its environment named", []string{"env", "unprotect"}, "accepts 1 arg"},
		{"project delete needs --yes", []string{"project", "delete", "web"}, "pass --yes"},
		{"versions delete needs --yes", []string{"versions", "delete", "3"}, "pass --yes"},
		{"versions delete takes a number", []string{"versions", "delete", "latest", "--yes"}, `version "latest": want a version number`},
		{"a setting needs =", []string{"env", "settings", "set", "deploy_interval"}, `"deploy_interval": want KEY=VALUE`},
		{"--set needs =", []string{"env", "create", "x", "--project", "p", "--set", "x"}, `--set "x": want KEY=VALUE`},
		{"a version is a number", []string{"versions", "show", "three"}, `version "three"`},
		{"a run is a number", []string{"runs", "show", "x"}, `run "x"`},
		{"a bad --limit", []string{"resource", "logs", "fs::File[a,path=/x]", "--limit", "0"}, "--limit 0"},
		{"a negative dev-cluster port", []string{"dev-cluster", "--dir", "/nonexistent/x", "--port", "-1"}, "--port -1: want a port from 1 to 65535"},
		{"a dev-cluster port too high", []string{"dev-cluster", "--dir", "/nonexistent/x", "--ui-port", "70000"}, "--ui-port 70000"},
		{"a bad -o", []string{"env", "list", "-o", "xml"}, `invalid argument "xml" for "-o, --output" flag: want table, wide, json or yaml`},
		{"a bad --output on a subcommand", []string{"versions", "list", "--output=JSON"}, "want table, wide, json or yaml"},
	}
	for _, tc := range cases {
		fails(t, vars, exitUsage, []string{tc.want}, tc.args...)
	}
	// Without any environment, commands that need one say how to give it.
	fails(t, map[string]string{"INTEND_SERVER": closedPort(t)}, exitUsage,
		[]string{"no environment: pass -e, set INTEND_ENVIRONMENT or add environment to .intend"},
		"resource", "list", "--project-dir", t.TempDir())
}

// closedPort returns the URL of a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestCLIUnreachable: a server that cannot be reached is exit code 3, and
// the message names the address and what to do.
func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	base := closedPort(t)
	for _, args := range [][]string{{"env", "list"}, {"versions", "list", "-e", "prod"}, {"deploy-now", "-e", "prod", "--wait"}} {
		fails(t, nil, exitUnreachable, []string{base, "connection refused", "intend server", "--server"},
			append(args, "--server", base)...)
	}
}

// TestCLIAgainstServer drives every REST client command against a real
// server (PostgreSQL, Temporal and the embedded executor).
func TestCLIAgainstServer(t *testing.T) {
	// Not parallel: servers of one test binary share the Temporal dev
	// server and task queue, so one server's worker could take another's
	// workflows (servertest.StartServer).
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "cli")
	project := "p-" + envName
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	withEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ctx := context.Background()

	// env create makes the project too; settings parse as JSON or strings.
	out := ok(t, vars, "env", "create", envName, "--project", project, "--description", "made by the CLI test",
		"--set", "retry_attempts=0", "--set", "deploy_interval=0", "--set", `autostart_agents=["*"]`)
	if field(t, out, "name") != envName || !strings.HasPrefix(field(t, out, "project"), project+" (") ||
		field(t, out, "description") != "made by the CLI test" {
		t.Errorf("env create printed:\n%s", out)
	}
	if row := rowOf(t, out, "retry_attempts"); row[1] != "0" {
		t.Errorf("retry_attempts = %v", row)
	}
	// A second environment with the same name is refused: exit 1 with
	// the problem.
	fails(t, vars, exitFailed, []string{"Conflict (409)"}, "env", "create", envName, "--project", project)
	// A setting that does not exist: exit 1 with the field error.
	r := fails(t, vars, exitFailed, []string{"Validation failed (422)", "\n  /settings/nope: "},
		"env", "create", envName+"-x", "--project", project, "--set", "nope=1")
	if strings.Contains(r.err.Error(), "urn:intend") {
		t.Errorf("the problem is shown by its type URN, not its title: %v", r.err)
	}

	// env list: a table row and the JSON array.
	out = ok(t, vars, "env", "list", "--project", project)
	if row := rowOf(t, out, envName); row[1] != project {
		t.Errorf("env list row %v, want project %s", row, project)
	}
	if h := rowOf(t, out, "NAME"); strings.Join(h, " ") != "NAME PROJECT RELEASED LATEST HALTED UPDATED DESCRIPTION" {
		t.Errorf("env list header %v", h)
	}
	var envs []map[string]any
	jsonOf(t, ok(t, vars, "env", "list", "--json"), &envs)
	if len(envs) != 1 || envs[0]["name"] != envName {
		t.Errorf("env list --json = %v", envs)
	}

	// env show by argument and by -e; settings set and show.
	out = ok(t, vars, "env", "show", envName)
	if field(t, out, "halted") != "no" || field(t, out, "released version") != "-" {
		t.Errorf("env show:\n%s", out)
	}
	var shown map[string]any
	jsonOf(t, ok(t, vars, "env", "show", "-e", envName, "--json"), &shown)
	if shown["name"] != envName {
		t.Errorf("env show --json = %v", shown)
	}
	out = ok(t, withEnv, "env", "settings", "set", "keep_versions=50", "repair_interval=3600")
	if rowOf(t, out, "keep_versions")[1] != "50" || rowOf(t, out, "repair_interval")[1] != "3600" ||
		rowOf(t, out, "retry_attempts")[1] != "0" {
		t.Errorf("env settings set:\n%s", out)
	}
	var settings map[string]any
	jsonOf(t, ok(t, vars, "env", "settings", envName, "--json"), &settings)
	if settings["keep_versions"] != 50.0 || settings["auto_deploy"] != true {
		t.Errorf("env settings --json = %v", settings)
	}
	fails(t, withEnv, exitFailed, []string{"Validation failed (422)", "/settings/keep_versions"},
		"env", "settings", "set", "keep_versions=lots")

	// Two versions: motd and issue, then motd changed and index added.
	dir := t.TempDir()
	motd, issue, index := filepath.Join(dir, "motd"), filepath.Join(dir, "issue"), filepath.Join(dir, "index")
	id := func(path string) string { return "fs::File[localhost,path=" + path + "]" }
	file := func(path, content string) map[string]any {
		return map[string]any{"id": id(path), "attributes": map[string]any{"path": path, "content": content}}
	}
	export := func(rs ...map[string]any) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"resources": rs})
		if _, err := c.ExportVersion(ctx, envName, b); err != nil {
			t.Fatal(err)
		}
	}
	export(file(motd, "hello\n"), file(issue, "issue\n"))
	export(file(motd, "hello again\n"), file(issue, "issue\n"), file(index, "index\n"))

	out = ok(t, withEnv, "versions", "list")
	if rowOf(t, out, "1")[1] != "2" || rowOf(t, out, "2")[1] != "3" {
		t.Errorf("version list:\n%s", out)
	}
	var versions []map[string]any
	jsonOf(t, ok(t, withEnv, "versions", "list", "--json"), &versions)
	if len(versions) != 2 || versions[0]["version"] != 2.0 {
		t.Errorf("version list --json = %v", versions)
	}
	out = ok(t, withEnv, "versions", "show", "2")
	if field(t, out, "resources") != "3" {
		t.Errorf("version show:\n%s", out)
	}
	for _, p := range []string{motd, issue, index} {
		rowOf(t, out, id(p))
	}
	var v2 struct {
		Version   int64            `json:"version"`
		Resources []map[string]any `json:"resources"`
		Next      *string          `json:"next"`
	}
	jsonOf(t, ok(t, withEnv, "versions", "show", "latest", "--json"), &v2)
	if v2.Version != 2 || len(v2.Resources) != 3 || v2.Next != nil {
		t.Errorf("version show --json = %+v", v2)
	}
	// What version show pages through, a page of one resource at a time.
	page, err := c.All(ctx, client.EnvPath(envName, "versions", "2"), url.Values{"limit": {"1"}}, "resources", "after", 0)
	if err != nil || len(page.Items) != 3 {
		t.Errorf("paging a version one resource at a time: %d items, %v", len(page.Items), err)
	}
	out = ok(t, withEnv, "versions", "diff", "1", "2")
	for _, want := range []string{"version 1 → 2: 1 added, 0 removed, 1 modified", "+ " + id(index),
		"~ " + id(motd), `content: "hello\n" → "hello again\n"`} {
		if !strings.Contains(out, want) {
			t.Errorf("version diff lacks %q:\n%s", want, out)
		}
	}
	var diff struct {
		Added    []string         `json:"added"`
		Modified []map[string]any `json:"modified"`
	}
	jsonOf(t, ok(t, withEnv, "versions", "diff", "2", "1", "--json"), &diff)
	if len(diff.Added) != 0 || len(diff.Modified) != 1 {
		t.Errorf("reverse version diff --json = %+v", diff)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)"}, "versions", "diff", "1", "9")

	// Release version 1 and deploy now, waiting: the files are written.
	out = ok(t, withEnv, "versions", "release", "1")
	if !strings.Contains(out, "released version 1 of "+envName) || !strings.Contains(out, "deploy request") {
		t.Errorf("version release:\n%s", out)
	}
	r = cli(t, withEnv, "deploy-now", "--wait")
	if r.err != nil || !regexp.MustCompile(`run \d+ \(env/.*\) done.*: \d deployed, 0 failed, 0 skipped, 0 unavailable of \d`).MatchString(r.out) {
		t.Fatalf("deploy-now --wait: %s", r)
	}
	if b, err := os.ReadFile(motd); err != nil || string(b) != "hello\n" {
		t.Fatalf("motd = %q, %v", b, err)
	}
	// Version 2 now; releasing the older version 1 again is refused.
	ok(t, withEnv, "versions", "release", "2")
	fails(t, withEnv, exitFailed, []string{"Conflict (409)"}, "versions", "release", "1")
	ok(t, withEnv, "deploy-now", "--wait")
	if b, err := os.ReadFile(motd); err != nil || string(b) != "hello again\n" {
		t.Fatalf("motd after version 2 = %q, %v", b, err)
	}
	// Everything was attempted before the repair: it re-verifies all.
	var run struct {
		Run      int64  `json:"run"`
		Status   string `json:"status"`
		Action   string `json:"action"`
		Total    int    `json:"total"`
		Deployed int    `json:"deployed"`
	}
	jsonOf(t, ok(t, withEnv, "repair-now", "--wait", "--json"), &run)
	if run.Status != "done" || run.Action != "repair" || run.Total != 3 {
		t.Errorf("repair-now --wait --json = %+v", run)
	}
	// Without --wait: the request.
	var req struct {
		ID     int64  `json:"id"`
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
	}
	jsonOf(t, ok(t, withEnv, "deploy-now", "--agent", "localhost", "--resource", id(motd), "--json"), &req)
	if req.ID == 0 || req.Kind != "deploy" || req.Reason != "user deploy" {
		t.Errorf("deploy-now --json = %+v", req)
	}

	// resource list, show and logs.
	out = ok(t, withEnv, "resource", "list")
	for _, p := range []string{motd, issue, index} {
		if row := rowOf(t, out, id(p)); row[1] != "localhost" || row[3] != "compliant" {
			t.Errorf("resource list row %v", row)
		}
	}
	var states []map[string]any
	jsonOf(t, ok(t, withEnv, "resource", "list", "--agent", "localhost", "--result", "deployed", "--json"), &states)
	if len(states) != 3 {
		t.Errorf("resource list --json: %d resources, want 3", len(states))
	}
	jsonOf(t, ok(t, withEnv, "resource", "list", "--result", "failed", "--json"), &states)
	if len(states) != 0 {
		t.Errorf("resource list --result failed --json = %v, want []", states)
	}
	out = ok(t, withEnv, "resource", "show", id(motd))
	if field(t, out, "compliance") != "compliant" || field(t, out, "version") != "2" {
		t.Errorf("resource show:\n%s", out)
	}
	if h := rowOf(t, out, "ACTION"); len(h) < 3 || !strings.Contains(out, "\n") {
		t.Errorf("resource show has no actions table:\n%s", out)
	}
	var detail struct {
		ID      string           `json:"id"`
		Actions []map[string]any `json:"actions"`
	}
	jsonOf(t, ok(t, withEnv, "resource", "show", id(motd), "--json"), &detail)
	if detail.ID != id(motd) || len(detail.Actions) < 2 {
		t.Errorf("resource show --json = %+v", detail)
	}
	out = ok(t, withEnv, "resource", "logs", id(motd))
	for _, want := range []string{"deploy  deployed  version 1", "INFO  wrote file bytes=6 mode=0644 path=" + motd,
		"    changed content:\n      @@ -1 +1 @@\n      -hello\n      +hello again\n", "user repair"} {
		if !strings.Contains(out, want) {
			t.Errorf("resource logs lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "version 1") > strings.Index(out, "version 2") {
		t.Errorf("resource logs is not oldest first:\n%s", out)
	}
	var actions []map[string]any
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(motd), "--limit", "1", "--json"), &actions)
	if len(actions) != 1 {
		t.Errorf("resource logs --limit 1 --json: %d actions", len(actions))
	}
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(motd), "--action", "deploy", "--json"), &actions)
	if len(actions) != 2 || actions[0]["action"] != "deploy" || actions[0]["version"] != 2.0 {
		t.Errorf("resource logs --action deploy --json = %v", actions)
	}
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(motd), "--action", "repair", "--json"), &actions)
	if len(actions) != 1 || actions[0]["action"] != "repair" || actions[0]["reason"] != "user repair" {
		t.Errorf("resource logs --action repair --json = %v", actions)
	}
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(motd), "--action", "dryrun", "--json"), &actions)
	if len(actions) != 0 {
		t.Errorf("resource logs --action dryrun --json = %v, want []", actions)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)"}, "resource", "show", id(filepath.Join(dir, "nope")))
	fails(t, withEnv, exitFailed, []string{"Invalid field (422)", "?action"}, "resource", "logs", id(motd), "--action", "x")

	// Agents: pause, list, unpause.
	out = ok(t, withEnv, "agent", "pause", "localhost")
	if !strings.Contains(out, "agent localhost of "+envName+" paused") {
		t.Errorf("agent pause: %s", out)
	}
	if row := rowOf(t, ok(t, withEnv, "agent", "list"), "localhost"); row[1] != "yes" {
		t.Errorf("agent list after pause: %v", row)
	}
	ok(t, withEnv, "agent", "unpause", "localhost")
	var agents []struct {
		Name      string           `json:"name"`
		Paused    bool             `json:"paused"`
		Executors []map[string]any `json:"executors"`
	}
	jsonOf(t, ok(t, withEnv, "agent", "list", "--json"), &agents)
	if len(agents) != 1 || agents[0].Name != "localhost" || agents[0].Paused || len(agents[0].Executors) == 0 {
		t.Errorf("agent list --json = %+v", agents)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)"}, "agent", "pause", "nobody")

	// Halt and resume.
	ok(t, withEnv, "halt")
	if field(t, ok(t, vars, "env", "show", envName), "halted") != "yes" {
		t.Error("env show after halt: not halted")
	}
	var resumed map[string]any
	jsonOf(t, ok(t, withEnv, "resume", "--json"), &resumed)
	if resumed["halted"] != false {
		t.Errorf("resume --json = %v", resumed)
	}

	// Runs.
	out = ok(t, withEnv, "runs", "list")
	if h := rowOf(t, out, "RUN"); h[1] != "ACTION" {
		t.Errorf("runs list header %v", h)
	}
	var runs []map[string]any
	jsonOf(t, ok(t, withEnv, "runs", "list", "--json"), &runs)
	if len(runs) < 2 {
		t.Errorf("runs list --json: %d runs", len(runs))
	}
	out = ok(t, withEnv, "runs", "show", fmt.Sprint(run.Run))
	if field(t, out, "action") != "repair" || field(t, out, "status") != "done" {
		t.Errorf("runs show:\n%s", out)
	}
	// Where its batches spent their time: every stage, at least one batch.
	for _, stage := range []string{"queued", "poll_wait", "execute", "record"} {
		if row := rowOf(t, out, stage); len(row) != 7 || row[1] == "0" {
			t.Errorf("runs show: stage %s = %v, want its batches and times:\n%s", stage, row, out)
		}
	}
	if !strings.Contains(out, "batches in flight at most ") {
		t.Errorf("runs show lacks the batches in flight:\n%s", out)
	}

	// A resource that cannot be deployed (its path is a directory): the
	// run fails and deploy-now --wait exits 1.
	export(file(motd, "hello again\n"), file(issue, "issue\n"), file(index, "index\n"), file(dir, "not a dir\n"))
	ok(t, withEnv, "versions", "release", "latest")
	r = fails(t, withEnv, exitFailed, []string{"1 failed", "resource list"}, "deploy-now", "--wait")
	if !strings.Contains(r.out, "1 failed") {
		t.Errorf("deploy-now --wait printed no counters: %s", r)
	}
	out = ok(t, withEnv, "resource", "logs", id(dir), "--limit", "1")
	if !strings.Contains(out, "failed") || !strings.Contains(out, "error (") {
		t.Errorf("resource logs of the failed resource:\n%s", out)
	}
	// The failed run: runs show lists what did not deploy, with its
	// error; resource logs --run keeps that run's attempts.
	jsonOf(t, ok(t, withEnv, "runs", "list", "--limit", "1", "--json"), &runs)
	failedRun := fmt.Sprint(runs[0]["run"])
	out = ok(t, withEnv, "runs", "show", failedRun)
	if row := rowOf(t, out, id(dir)); len(row) < 3 || row[1] != "failed" || !strings.Contains(out, "(permanent)") {
		t.Errorf("runs show of the failed run lacks its failure:\n%s", out)
	}
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(dir), "--run", failedRun, "--json"), &actions)
	if len(actions) != 1 || actions[0]["result"] != "failed" {
		t.Errorf("resource logs --run %s of the failed resource = %v", failedRun, actions)
	}
	jsonOf(t, ok(t, withEnv, "resource", "logs", id(motd), "--run", failedRun, "--json"), &actions)
	if len(actions) != 0 {
		t.Errorf("resource logs --run %s of motd (not in that run) = %v, want []", failedRun, actions)
	}

	// Delete: refused without --yes, then gone.
	fails(t, vars, exitUsage, []string{"--yes"}, "env", "delete", envName)
	ok(t, vars, "env", "delete", envName, "--yes")
	r = fails(t, vars, exitFailed, []string{"Not found (404)", envName}, "env", "show", envName)
	var ee *exitError
	if !errors.As(r.err, &ee) {
		t.Errorf("a problem is not an *exitError: %T", r.err)
	}
}

// TestRollbackCommand: intend rollback V releases a new version equal to
// V (and a deploy puts V's content back); intend versions rollback is the
// same; the deprecated "intend version" still answers, with its note on
// standard error only.
func TestRollbackCommand(t *testing.T) {
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "rollback")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	withEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName, "--set", `autostart_agents=["*"]`)
	motd := filepath.Join(t.TempDir(), "motd")
	for _, content := range []string{"hello\n", "hello again\n"} {
		b, _ := json.Marshal(map[string]any{"resources": []map[string]any{{"id": "fs::File[localhost,path=" + motd + "]",
			"attributes": map[string]any{"path": motd, "content": content}}}})
		if _, err := c.ExportVersion(context.Background(), envName, b); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, withEnv, "versions", "release", "2")
	ok(t, withEnv, "deploy-now", "--wait")
	fails(t, withEnv, exitFailed, []string{"Conflict (409)"}, "versions", "release", "1")

	out := ok(t, withEnv, "rollback", "1")
	if !strings.Contains(out, "rolled "+envName+" back to version 1: version 3 released (1 resource changed); deploy request") {
		t.Errorf("rollback:\n%s", out)
	}
	ok(t, withEnv, "deploy-now", "--wait")
	if b, err := os.ReadFile(motd); err != nil || string(b) != "hello\n" {
		t.Fatalf("motd after rolling back to version 1 = %q, %v", b, err)
	}
	var rb struct {
		From    int64 `json:"rolled_back_from"`
		Version struct {
			Version int64 `json:"version"`
		} `json:"version"`
	}
	jsonOf(t, ok(t, withEnv, "versions", "rollback", "latest", "--json"), &rb)
	if rb.From != 3 || rb.Version.Version != 4 {
		t.Errorf("versions rollback latest --json = %+v", rb)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)"}, "rollback", "9")

	r := cli(t, withEnv, "version", "list", "--json")
	if r.err != nil || !strings.Contains(r.stderr, `"intend version" is deprecated`) || !strings.HasPrefix(strings.TrimSpace(r.out), "[") {
		t.Errorf("the deprecated version list: %s", r)
	}
}
