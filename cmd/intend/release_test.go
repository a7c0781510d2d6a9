package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestPreviewReleasesNothing walks issue 27's report with examples/lsm
// and two live sites: a dry-run of a model change that every site's file
// would show, and a plain export of another, release nothing and leave
// the sites as they are (no version exported by system:intend, no file
// rewritten, the model source not announced); export -d releases the
// change, and then the sites re-render with it. Before, the dry-run's
// upload was announced to the live instances, which re-rendered and
// released the change within seconds.
func TestPreviewReleasesNothing(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	envName := testenv.UniqueName(t, "preview")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)
	dir, root := exportExample(t, vars, "lsm", "/tmp/intend-lsm", "service entities: alias (lifecycle simple), proxy (lifecycle simple), site (lifecycle simple)")
	sites := []string{"blog", "shop"}
	for i, name := range sites {
		ok(t, vars, "lsm", "create", "site", "--attr", "name="+name, "--attr", "port="+[]string{"8081", "8082"}[i], "--wait", "up")
	}
	config := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "sites", name, "server.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := map[string]string{}
	for _, name := range sites {
		before[name] = config(name)
	}
	env, err := c.Environment(ctx, envName)
	if err != nil || env.ReleasedVersion == nil {
		t.Fatalf("environment after the sites are up: %+v, %v", env, err)
	}
	released := *env.ReleasedVersion

	// change makes every site's server.json gain a field.
	model := filepath.Join(dir, "main.cue")
	orig, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	change := func(field string) {
		t.Helper()
		src := strings.Replace(string(orig), "workers: parameter.workers\n", "workers: parameter.workers\n\t\t\t\t"+field+": true\n", 1)
		// and the site entity an optional attribute, which the catalog
		// shows once the model is released.
		src = strings.Replace(src, "\t\tworkers: *2 | int & >=1 & <=16 @lsm(rw+)\n",
			"\t\tworkers: *2 | int & >=1 & <=16 @lsm(rw+)\n\t\t"+field+": *false | bool @lsm(rw+)\n", 1)
		if src == string(orig) || !strings.Contains(src, field+": *false") {
			t.Fatal("the model was not changed")
		}
		if err := os.WriteFile(model, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// untouched checks, for a bounded while, that nothing was released
	// and no site re-rendered: the upload was announced to nobody (the
	// model source's announced_at), no version newer than the released
	// one was released, none was exported by the system (the instances'
	// re-render), and the files are as before. The server's reconciler
	// runs every second here, so the bound covers several of its passes
	// (an announcement, when there was one, came within about a second).
	untouched := func(what string) {
		t.Helper()
		var src client.ModelSource
		if err := c.Do(ctx, "GET", client.EnvPath(envName, "model"), nil, &src); err != nil || src.AnnouncedAt != nil {
			t.Errorf("after %s: the model source %+v (%v) was announced to the live instances", what, src, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			vs := versions(t, c, envName)
			for _, v := range vs {
				if v.Version > released && (v.ReleasedAt != nil || v.ExportedBy == "system:intend") {
					t.Fatalf("after %s: version %d released or exported by the instances: %+v", what, v.Version, v)
				}
			}
			for _, name := range sites {
				if got := config(name); got != before[name] {
					t.Fatalf("after %s: site %s re-rendered: %s", what, name, got)
				}
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if e, err := c.Environment(ctx, envName); err != nil || e.ReleasedVersion == nil || *e.ReleasedVersion != released {
			t.Errorf("after %s: released version %v, %v; want %d still", what, e.ReleasedVersion, err, released)
		}
		// The catalog is still the released model's.
		if out := ok(t, vars, "lsm", "catalog", "site"); strings.Contains(out, "gzip") || strings.Contains(out, "brotli") {
			t.Errorf("after %s: the site entity has the unreleased model's attribute:\n%s", what, out)
		}
	}

	// (a) The dry-run. Whether it reports the sites' change is the fleet
	// preview's business; here it must only not be an error.
	change("gzip")
	if r := cli(t, vars, "dryrun", dir, "--detailed-exitcode"); r.code != 0 && r.code != exitChanges {
		t.Fatalf("dryrun: %s", r)
	}
	untouched("the dry-run")

	// (b) A plain export leaves its version available, not released.
	change("brotli")
	if out := ok(t, vars, "export", dir); !strings.Contains(out, "not released") {
		t.Errorf("export:\n%s", out)
	}
	untouched("a plain export")

	// Released, the change reaches the live sites.
	out := ok(t, vars, "export", dir, "-d")
	if !strings.Contains(out, "released version") {
		t.Errorf("export -d:\n%s", out)
	}
	wait.For(t, "the sites to get brotli after export -d", 60*time.Second, func() error {
		for _, name := range sites {
			if got := config(name); !strings.Contains(got, `"brotli":true`) {
				return fmt.Errorf("site %s: %s", name, got)
			}
		}
		return nil
	})
	for _, name := range sites {
		if strings.Contains(config(name), "gzip") {
			t.Errorf("site %s carries the dry-run's change: %s", name, config(name))
		}
	}
	if out := ok(t, vars, "lsm", "catalog", "site"); !strings.Contains(out, "brotli") || strings.Contains(out, "gzip") {
		t.Errorf("the site entity after export -d: want brotli, not the dry-run's gzip:\n%s", out)
	}
	system := false
	for _, v := range versions(t, c, envName) {
		system = system || (v.Version > released && v.ExportedBy == "system:intend" && v.ReleasedAt != nil)
	}
	if !system {
		t.Errorf("no version exported by the instances after export -d: %+v", versions(t, c, envName))
	}
}

// versions lists the environment's versions, newest first.
func versions(t *testing.T, c *client.Client, env string) []client.VersionInfo {
	t.Helper()
	items, err := c.List(context.Background(), client.EnvPath(env, "versions"), nil, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]client.VersionInfo, len(items))
	for i, raw := range items {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFactsRecompileInPushMode: in push mode, a resource left undefined
// by a fact nobody reported yet is deployed once the fact arrives,
// without another export: the deploy that reports the fact makes the
// server compile the released version's model source again with it
// (a compile for facts), and release what it makes, as intend deploy
// does on a laptop. Before, the resource waited for the next export.
func TestFactsRecompileInPushMode(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "facts")
	root := t.TempDir()
	seed, pin := filepath.Join(root, "seed"), filepath.Join(root, "pin")
	dir := t.TempDir()
	model := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/resource"
)

facts: resource.#Facts

resources: {
	seed: fs.#File & {path: "` + seed + `", content: "xyz", mode: "0644"}
	pin: fs.#File & {
		path:     "` + pin + `"
		content:  "seed is \(facts[seed.id].size) bytes\n"
		mode:     "0644"
		requires: [seed]
	}
}
`
	for file, text := range map[string]string{"intend.yaml": "name: facts\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ok(t, vars, "export", dir, "-d")
	wait.For(t, "pin to be defined by the fact of seed's size", 60*time.Second, func() error {
		b, err := os.ReadFile(pin)
		if err == nil && string(b) == "seed is 3 bytes\n" {
			return nil
		}
		return fmt.Errorf("pin = %q, %v\n%s", b, err, cli(t, vars, "compiles", "list"))
	})
	if b, err := os.ReadFile(seed); err != nil || string(b) != "xyz" {
		t.Errorf("seed = %q, %v", b, err)
	}
	// The server compiled the source export -d uploaded, for the facts.
	c := client.New(vars["INTEND_SERVER"])
	c.Token = vars["INTEND_TOKEN"]
	var src client.ModelSource
	if err := c.Do(context.Background(), "GET", client.EnvPath(vars["INTEND_ENVIRONMENT"], "model"), nil, &src); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "a released compile for the facts of model source "+src.Hash, 30*time.Second, func() error {
		var compiles struct{ Items []client.Compile }
		err := c.Do(context.Background(), "GET", client.EnvPath(vars["INTEND_ENVIRONMENT"], "compiles"), nil, &compiles)
		return wait.Unless(err == nil && len(compiles.Items) > 0 && compiles.Items[0].Reason == "facts" && compiles.Items[0].ModelHash == src.Hash &&
			compiles.Items[0].Released != nil && *compiles.Items[0].Released, "compiles = %+v, %v", compiles.Items, err)
	})
}
