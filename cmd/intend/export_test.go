package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestExportAndDryrun pushes the quick start to a running server, as seed
// 001's push-to-server mode does: export -j, export, export -d, a partial
// export of one refinement instance, and dryrun.
func TestExportAndDryrun(t *testing.T) {
	// Not parallel: servers of one test binary share the Temporal dev
	// server and task queue, so one server's worker could take another's
	// workflows (servertest.StartServer).
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "export")
	dir, root := quickstart(t)
	// The project's .intend names the server and environment.
	local := "server: " + c.Base + "\ntoken: " + c.Token + "\nenvironment: " + envName + "\n"
	if err := os.WriteFile(filepath.Join(dir, ".intend"), []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	none := map[string]string{}
	ok(t, none, "env", "create", envName, "--project", "p-"+envName, "--project-dir", dir)

	// -j writes the version, needing no server.
	file := filepath.Join(t.TempDir(), "v.json")
	ok(t, map[string]string{"INTEND_SERVER": "http://127.0.0.1:1"}, "export", dir, "-j", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := intent.DecodeBytes(b); err != nil || len(v.Resources) != 11 {
		t.Fatalf("export -j: %d resources, %v", len(v.Resources), err)
	}

	// export uploads without releasing; -d releases and deploys.
	out := ok(t, none, "export", dir)
	if !strings.Contains(out, "exported version 1 of "+envName+": 11 resources, 11 changed") || !strings.Contains(out, "not released") {
		t.Errorf("export:\n%s", out)
	}
	// The project went along as the model source (without .intend).
	var source struct {
		Files  int    `json:"files"`
		Origin string `json:"origin"`
	}
	if err := c.Do(context.Background(), "GET", client.EnvPath(envName, "model"), nil, &source); err != nil ||
		source.Files != 3 || source.Origin != "cli" {
		t.Errorf("model source after export: %+v, %v (want 3 files from the cli)", source, err)
	}
	out = ok(t, none, "export", dir, "-d")
	if !strings.Contains(out, "exported version 2") || !strings.Contains(out, "released version 2: deploy request") {
		t.Errorf("export -d:\n%s", out)
	}
	ok(t, none, "deploy-now", "--project-dir", dir, "--wait")
	if _, err := os.Readlink(filepath.Join(root, "apps", "shop", "current")); err != nil {
		t.Fatalf("export -d deployed nothing: %v", err)
	}

	// A partial export of one instance's set: only that set changes.
	model := filepath.Join(dir, "main.cue")
	src, _ := os.ReadFile(model)
	src = []byte(strings.Replace(string(src), "instances: blog: {port: 8081, workers: 4}", "instances: blog: {port: 8082, workers: 4}", 1))
	src = []byte(strings.Replace(string(src), "instances: shop: port: 8080", "instances: shop: port: 8083", 1))
	if err := os.WriteFile(model, src, 0o644); err != nil {
		t.Fatal(err)
	}
	out = ok(t, none, "export", dir, "--partial", "--set", "app/blog", "--json")
	var exp struct {
		Version struct {
			Version       int64 `json:"version"`
			ChangedCount  int   `json:"changed_count"`
			ResourceCount int   `json:"resource_count"`
		} `json:"version"`
	}
	jsonOf(t, out, &exp)
	if exp.Version.Version != 3 || exp.Version.ChangedCount != 1 || exp.Version.ResourceCount != 11 {
		t.Errorf("partial export of app/blog: %+v (want version 3, 1 changed of 11)", exp.Version)
	}

	// dryrun uploads the whole model unreleased and shows the shop's
	// change, still pending, and nothing else.
	out = ok(t, none, "dryrun", dir)
	for _, want := range []string{"modified    fs::File[localhost,path=" + root + "/apps/shop/config.json]",
		"127.0.0.1:8080", "127.0.0.1:8083", "modified    fs::File[localhost,path=" + root + "/apps/blog/config.json]"} {
		if !strings.Contains(out, want) {
			t.Errorf("dryrun lacks %q:\n%s", want, out)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "apps", "shop", "config.json")); !strings.Contains(string(got), "8080") {
		t.Errorf("dryrun changed the target: %s", got)
	}
	// --detailed-exitcode: changes pending exit 2, listed as usual, and
	// main prints no error for it.
	dx := cli(t, none, "dryrun", dir, "--detailed-exitcode")
	var ee *exitError
	if dx.code != exitChanges || !errors.As(dx.err, &ee) || !ee.quiet ||
		!strings.Contains(dx.out, "modified    fs::File[localhost,path="+root+"/apps/shop/config.json]") {
		t.Errorf("dryrun --detailed-exitcode with changes pending: %s", dx)
	}
	out = ok(t, none, "dryrun", dir, "--json")
	var dr struct {
		Results []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &dr); err != nil || len(dr.Results) != 11 {
		t.Fatalf("dryrun --json: %d results, %v\n%s", len(dr.Results), err, out)
	}

	// A broken model: exit 1, the errors as JSON, nothing uploaded.
	if err := os.WriteFile(model, append(src, []byte("\nresources: motd: mode: \"644\"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := fails(t, none, exitFailed, []string{"does not compile"}, "export", dir, "--json")
	var errs struct {
		Errors []struct {
			Path      string `json:"path"`
			Positions []struct {
				File string `json:"file"`
				Line int    `json:"line"`
			} `json:"positions"`
		} `json:"errors"`
	}
	jsonOf(t, r.out, &errs)
	if len(errs.Errors) == 0 || errs.Errors[0].Path != "resources.motd.mode" {
		t.Errorf("errors = %+v", errs)
	}
	var versions []struct {
		Version int64 `json:"version"`
	}
	jsonOf(t, ok(t, none, "versions", "list", "--project-dir", dir, "--json"), &versions)
	if len(versions) != 6 || versions[0].Version != 6 {
		t.Errorf("versions after a broken model: %+v, want 6 down to 1 (three from the dry-runs)", versions)
	}
}
