package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
)

// TestConfinedResourcesNeverRun: with allowed_paths and allowed_commands
// set by a global admin after a version was exported, the embedded
// executor is never handed what lies outside them. Deploying the version
// records a file outside the prefix (and one in a sibling directory that
// merely shares its letters, alpha-evil) and a command not allowed as
// failed, naming the setting, and none of them touches the machine: the
// file keeps its content, the sibling directory is not made, the command
// leaves no trace. A resource requiring a refused one is skipped, the
// allowed one deployed. A dry-run of the version, first, does not read
// the file outside: its content appears nowhere in the report.
func TestConfinedResourcesNeverRun(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "confine", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	alpha := filepath.Join(dir, "alpha")
	if err := os.Mkdir(alpha, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("TOP SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(alpha, "command-ran")
	ok, outside, evil := file(filepath.Join(alpha, "ok"), "ok\n", "0644"), file(secret, "overwritten\n", "0644"),
		file(filepath.Join(dir, "alpha-evil", "x"), "x\n", "0644")
	after := file(filepath.Join(alpha, "after"), "after\n", "0644", outside.ID)
	cmd := res{ID: "exec::Command[localhost,name=leave-a-trace]", Attributes: map[string]any{
		"name": "leave-a-trace", "command": []string{touch, trace}, "creates": trace,
	}}
	// A first version makes the embedded executor serve the agent.
	if run := deploy(t, c, env, body(t, ok)); run.Deployed != 1 {
		t.Fatalf("version 1 = %+v", run)
	}
	// Exported while the environment is not confined (or by a path that
	// bypasses the API): the check that holds is when a batch is handed
	// out.
	v, err := c.ExportVersion(ctx, env, body(t, ok, outside, evil, after, cmd))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPatch, "/api/v1/environments/"+env, map[string]any{"settings": map[string]any{
		"allowed_paths": []string{alpha}, "allowed_commands": []string{"/bin/true"}}}, nil); err != nil {
		t.Fatal(err)
	}
	// A dry-run of the version obeys the same confinement: it does not
	// read the file.
	var dr client.DeployRun
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{"version": v.Version}, &dr); err != nil {
		t.Fatal(err)
	}
	report := waitDryrun(t, c, env, dr.Run)
	raw, err := json.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "TOP SECRET") {
		t.Errorf("the dry-run read the file outside allowed_paths: %s", raw)
	}
	found := false
	for _, r := range report.Results {
		if r.ResourceID == outside.ID {
			found = r.Error != nil && strings.Contains(*r.Error, "is outside the environment's allowed_paths")
		}
	}
	if !found {
		t.Errorf("the dry-run's result of the file outside does not name allowed_paths: %s", raw)
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("the command outside allowed_commands ran: %v", err)
	}

	rel, err := c.Release(ctx, env, v.Version)
	if err != nil || rel.Request == nil {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	run, err := c.WaitRequest(ctx, env, rel.Request.ID, 60*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.Total != 4 || run.Failed != 3 || run.Skipped != 1 {
		t.Errorf("run = %+v, want 3 failed (outside), 1 skipped (requires one outside)", run)
	}
	if got, _ := readFile(t, secret); got != "TOP SECRET\n" {
		t.Errorf("the file outside allowed_paths was written: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "alpha-evil")); !os.IsNotExist(err) {
		t.Errorf("alpha-evil, a sibling of the allowed alpha, was made: %v", err)
	}
	if _, err := os.Stat(trace); !os.IsNotExist(err) {
		t.Errorf("the command outside allowed_commands ran: %v", err)
	}
	if got, _ := readFile(t, filepath.Join(alpha, "ok")); got != "ok\n" {
		t.Errorf("the file inside allowed_paths = %q, want it deployed", got)
	}
	for rid, want := range map[string]string{
		outside.ID: "path " + secret + " is outside the environment's allowed_paths [" + alpha + "]",
		evil.ID:    "path " + filepath.Join(dir, "alpha-evil", "x") + " is outside the environment's allowed_paths [" + alpha + "]",
		cmd.ID:     "command program " + touch + " is not in the environment's allowed_commands [/bin/true]",
	} {
		st, acts := getResource(t, c, env, rid)
		// Newest first: the deploy's, then the dry-run's.
		if st.LastResult != "failed" || len(acts) != 2 || acts[0].Action != "deploy" || acts[0].Error == nil || *acts[0].Error != want ||
			acts[0].ErrorClass == nil || *acts[0].ErrorClass != "permanent" {
			t.Errorf("%s: state %+v, actions %+v; want failed (permanent): %q", rid, st, acts, want)
		}
	}
	if st, _ := getResource(t, c, env, after.ID); st.LastResult != "skipped_for_dependency" {
		t.Errorf("a resource requiring one outside: %+v, want skipped_for_dependency", st)
	}
}

// TestConfinedEndpointsNeverReached: a confined environment's rest::Object
// reaches only the APIs allowed_endpoints lists (none while it is empty),
// so its author cannot make the server's host send requests elsewhere
// (the cloud metadata service, the server's own loopback API). The
// environment is confined by allowed_paths alone first, then
// allowed_endpoints lists a prefix of the same server that the
// object's endpoint only shares letters with (/v1, the object is at
// /v10): a dry-run and a deploy of the version record the object failed
// (permanent) naming the endpoint and the setting, and no request ever
// arrives at the HTTP server the object names. Listing the endpoint
// itself lets a dry-run reach it (the server does see requests).
func TestConfinedEndpointsNeverReached(t *testing.T) {
	c, _ := startServer(t)
	ctx := context.Background()
	var requests atomic.Int64
	var mu sync.Mutex
	objects := map[string][]byte{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		mu.Lock()
		defer mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			b, ok := objects[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			objects[r.URL.Path] = b
			w.WriteHeader(http.StatusCreated)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(api.Close)
	env := newEnv(t, c, "confine-ep", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	ok := file(filepath.Join(dir, "ok"), "ok\n", "0644")
	endpoint := api.URL + "/v10"
	obj := res{ID: "rest::Object[localhost,name=app]", Attributes: map[string]any{
		"name": "app", "endpoint": endpoint, "path": "/users/app", "body": map[string]any{"tags": "admin"},
	}}
	// A first version makes the embedded executor serve the agent.
	if run := deploy(t, c, env, body(t, ok)); run.Deployed != 1 {
		t.Fatalf("version 1 = %+v", run)
	}
	v, err := c.ExportVersion(ctx, env, body(t, ok, obj))
	if err != nil {
		t.Fatal(err)
	}
	setting := func(s map[string]any) {
		t.Helper()
		if err := c.Do(ctx, http.MethodPatch, "/api/v1/environments/"+env, map[string]any{"settings": s}, nil); err != nil {
			t.Fatal(err)
		}
	}
	dryrun := func() (string, bool) {
		t.Helper()
		var dr client.DeployRun
		if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{"version": v.Version}, &dr); err != nil {
			t.Fatal(err)
		}
		for _, r := range waitDryrun(t, c, env, dr.Run).Results {
			if r.ResourceID == obj.ID {
				if r.Error == nil {
					return "", true
				}
				return *r.Error, true
			}
		}
		return "", false
	}
	steps := []struct {
		why     string
		setting map[string]any
		want    string
	}{
		{"confined by allowed_paths, allowed_endpoints empty", map[string]any{"allowed_paths": []string{dir}},
			"endpoint " + endpoint + " is outside the environment's allowed_endpoints [] (a confined environment reaches no " +
				"API or device its global admin has not listed)"},
		{"a prefix the endpoint only shares letters with", map[string]any{"allowed_endpoints": []string{api.URL + "/v1"}},
			"endpoint " + endpoint + " is outside the environment's allowed_endpoints [" + api.URL + "/v1]"},
	}
	for i, s := range steps {
		setting(s.setting)
		if got, found := dryrun(); !found || got != s.want {
			t.Errorf("%s: the dry-run's result of the object = %q (found %v), want %q", s.why, got, found, s.want)
		}
		if n := requests.Load(); n != 0 {
			t.Fatalf("%s: a dry-run sent %d requests to the API outside allowed_endpoints", s.why, n)
		}
		if i == 0 {
			rel, err := c.Release(ctx, env, v.Version)
			if err != nil || rel.Request == nil {
				t.Fatalf("release = %+v, %v", rel, err)
			}
			run, err := c.WaitRequest(ctx, env, rel.Request.ID, 60*time.Second, nil)
			if err != nil {
				t.Fatal(err)
			}
			if run.Failed != 1 || run.Deployed != 0 {
				t.Errorf("run = %+v, want the object failed", run)
			}
		} else {
			// A deploy of the object again, now released.
			var req client.Request
			if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/deploy",
				map[string]any{"mode": "incremental", "resource_ids": []string{obj.ID}}, &req); err != nil {
				t.Fatal(err)
			}
			if run, err := c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil); err != nil || run.Total != 1 || run.Failed != 1 {
				t.Errorf("%s: deploy of the object = %+v, %v; want it failed", s.why, run, err)
			}
		}
		if n := requests.Load(); n != 0 {
			t.Fatalf("%s: a deploy sent %d requests to the API outside allowed_endpoints", s.why, n)
		}
		st, acts := getResource(t, c, env, obj.ID)
		if st.LastResult != "failed" || len(acts) == 0 || acts[0].Action != "deploy" || acts[0].Error == nil ||
			*acts[0].Error != s.want || acts[0].ErrorClass == nil || *acts[0].ErrorClass != "permanent" {
			t.Errorf("%s: state %+v, newest action %+v; want failed (permanent): %q", s.why, st, acts, s.want)
		}
	}
	// The control: listed, the endpoint is reached, so the counts above
	// could have seen a request.
	setting(map[string]any{"allowed_endpoints": []string{endpoint}})
	if got, found := dryrun(); !found || got != "" {
		t.Errorf("listed: the dry-run's result of the object = %q (found %v), want no error", got, found)
	}
	if requests.Load() == 0 {
		t.Error("listed: the dry-run sent no request to the endpoint")
	}
}
