package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestArgNames: the positional arguments of a Use line, which completion
// goes by.
func TestArgNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		use  string
		want []string
	}{
		{"show [ENV]", []string{"ENV"}},
		{"diff A B", []string{"A", "B"}},
		{"logs RID [--limit N] [--action A]", []string{"RID"}},
		{"migrate ENTITY [ID] [--from N] [--to M]", []string{"ENTITY", "ID"}},
		{"list", nil},
		{"delete ENV --yes", []string{"ENV"}},
	}
	for _, tc := range cases {
		if got := argNames(tc.use); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("argNames(%q) = %q, want %q", tc.use, got, tc.want)
		}
	}
	// ID is an instance only after ENTITY.
	if argListerFor([]string{"ENTITY"}, "ID") == nil || argListerFor(nil, "ID") != nil {
		t.Error("ID completes an instance only after ENTITY")
	}
}

// completion is what `intend __complete ARGS` offered: the candidates
// (without their descriptions) and the directive.
type completion struct {
	values    []string
	directive string
}

// complete runs cobra's hidden __complete command as a shell would.
func complete(t *testing.T, env map[string]string, args ...string) completion {
	t.Helper()
	r := cli(t, env, append([]string{"__complete"}, args...)...)
	if r.err != nil {
		t.Fatalf("%s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, ":") {
		t.Fatalf("no directive line: %s", r)
	}
	var c completion
	c.directive = last
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		c.values = append(c.values, v)
	}
	return c
}

// The directives as __complete prints them.
const (
	directiveError      = ":1"
	directiveNoFileComp = ":4"
)

// TestCLICompletion: environments, versions, resources and agents
// complete from a real server, filtered by what is typed.
func TestCLICompletion(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	c, _, _ := servertest.StartServer(t, server.Config{ReconcileEvery: time.Second})
	envName := testenv.UniqueName(t, "comp")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName, "--set", "auto_deploy=false", "--description", "for completion")
	dir := t.TempDir()
	file := func(name string) map[string]any {
		path := filepath.Join(dir, name)
		return map[string]any{"id": "fs::File[localhost,path=" + path + "]", "attributes": map[string]any{"path": path, "content": name}}
	}
	dirEntry := map[string]any{"id": "fs::Directory[localhost,path=" + dir + "]", "attributes": map[string]any{"path": dir}}
	for _, rs := range [][]any{{file("a")}, {file("a"), file("b"), dirEntry}} {
		b, _ := json.Marshal(map[string]any{"resources": rs})
		if _, err := c.ExportVersion(t.Context(), envName, b); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "versions", "release", "2")
	fileA, fileB := file("a")["id"].(string), file("b")["id"].(string)
	dirID := dirEntry["id"].(string)
	noEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}

	cases := []struct {
		why  string
		vars map[string]string
		args []string
		want []string
	}{
		{"-e lists environments", noEnv, []string{"resource", "list", "-e", ""}, []string{envName}},
		{"-e keeps those with the prefix typed", noEnv, []string{"versions", "list", "-e", envName[:len(envName)-1]}, []string{envName}},
		{"-e with a prefix that none has", noEnv, []string{"versions", "list", "-e", "zz-none"}, nil},
		{"env show's argument is an environment", noEnv, []string{"env", "show", ""}, []string{envName}},
		{"versions show: latest, released, then the versions newest first", vars, []string{"versions", "show", ""},
			[]string{"latest", "released", "2", "1"}},
		{"versions diff: both arguments", vars, []string{"versions", "diff", "2", "l"}, []string{"latest"}},
		{"versions diff takes two", vars, []string{"versions", "diff", "1", "2", ""}, nil},
		{"rollback's argument is a version", vars, []string{"rollback", "1"}, []string{"1"}},
		{"resource show: the resources", vars, []string{"resource", "show", ""}, []string{dirID, fileA, fileB}},
		{"resource show: the prefix typed, a whole type (fetched by type)", vars, []string{"resource", "show", "fs::File["},
			[]string{fileA, fileB}},
		{"resource logs: a longer prefix", vars, []string{"resource", "logs", strings.TrimSuffix(fileB, "b]")}, []string{fileA, fileB}},
		{"resource show with -e on the command line", noEnv, []string{"resource", "show", "-e", envName, "fs::Dir"}, []string{dirID}},
		{"deploy-now --resource", vars, []string{"deploy-now", "--resource", "fs::Directory"}, []string{dirID}},
		{"agents", vars, []string{"agent", "pause", ""}, []string{"localhost"}},
		{"resource list --agent", vars, []string{"resource", "list", "--agent", "local"}, []string{"localhost"}},
		{"-o", vars, []string{"env", "list", "-o", ""}, []string{"table", "wide", "json", "yaml"}},
		{"--color", vars, []string{"versions", "diff", "1", "2", "--color", "a"}, []string{"auto", "always"}},
	}
	for _, tc := range cases {
		got := complete(t, tc.vars, tc.args...)
		if !reflect.DeepEqual(got.values, tc.want) || got.directive != directiveNoFileComp {
			t.Errorf("%s: intend __complete %q offered %q %s, want %q %s", tc.why, tc.args, got.values, got.directive,
				tc.want, directiveNoFileComp)
		}
	}
	// Descriptions come along, after a tab.
	if r := ok(t, noEnv, "__complete", "env", "show", ""); !strings.Contains(r, envName+"\tfor completion\n") {
		t.Errorf("env show's candidates lack the description:\n%s", r)
	}
	// The server refuses (no such environment): nothing, and no files.
	if got := complete(t, noEnv, "resource", "show", "-e", "nope", ""); len(got.values) != 0 || got.directive != directiveError {
		t.Errorf("completion in an unknown environment: %+v", got)
	}
}

// TestCLICompletionUnreachable: a server that refuses connections, or
// never answers, gives no candidates within the completion's timeout.
func TestCLICompletionUnreachable(t *testing.T) {
	t.Parallel()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	for _, base := range []string{closedPort(t), hang.URL} {
		vars := map[string]string{"INTEND_SERVER": base, "INTEND_ENVIRONMENT": "prod"}
		for _, args := range [][]string{{"resource", "show", ""}, {"env", "list", "-e", ""}, {"lsm", "show", "vm", ""}} {
			start := time.Now()
			got := complete(t, vars, args...)
			if took := time.Since(start); took > completionTimeout+time.Second {
				t.Errorf("%s: completing %q took %s", base, args, took)
			}
			if len(got.values) != 0 || got.directive != directiveError {
				t.Errorf("%s: completing %q offered %q %s, want nothing and %s", base, args, got.values, got.directive, directiveError)
			}
		}
	}
}
