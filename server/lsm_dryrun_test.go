package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// instanceDryrun is the answer of POST .../{id}/dryrun, as a client reads it.
type instanceDryrun struct {
	Version             int64          `json:"version"`
	State               string         `json:"state"`
	UpdateAllowed       bool           `json:"update_allowed"`
	CandidateAttributes map[string]any `json:"candidate_attributes"`
	Validation          struct {
		OK     bool            `json:"ok"`
		Errors json.RawMessage `json:"errors"`
	} `json:"validation"`
	DesiredState *client.InstanceDryrun `json:"desired_state"`
	Dryrun       *client.DeployRun      `json:"dryrun"`
	DryrunURL    string                 `json:"dryrun_url"`
	Targets      []client.DryrunResult  `json:"targets"`
}

// TestInstanceDryrun: a service instance's dry-run shows what an update
// would do — its validation, the per-attribute change of each resource in
// the desired state, and what the adapters would change on the targets,
// drift included — and changes nothing: no instance version, no desired-
// state version, no file.
func TestInstanceDryrun(t *testing.T) {
	c, _, _ := startServerDB(t)
	ctx := context.Background()
	env := newEnv(t, c, "lsmdryrun", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const item = "/lsm/v1/service_inventory/vm/web"
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 2}}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	up := waitState(t, c, env, "web", "up", "rejected", "failed")
	conf := filepath.Join(root, "web.conf")
	waitContent(t, conf, "memory=2\n")
	before, err := versions(ctx, c, env)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, item, &inst); err != nil || inst.Version != up.Version || inst.State != "up" {
			t.Errorf("%s: instance %+v (%v), want it up at version %d", when, inst, err, up.Version)
		}
		after, err := versions(ctx, c, env)
		if err != nil || len(after) != len(before) || after[0].Version != before[0].Version {
			t.Errorf("%s: versions %v (%v), want %v", when, after, err, before)
		}
	}
	dryrun := func(body any) instanceDryrun {
		t.Helper()
		r := lsmDo(t, c, env, http.MethodPost, item+"/dryrun?wait=60s", "", body)
		if r.status != http.StatusOK {
			t.Fatalf("dry-run %v: %d %s", body, r.status, r.body)
		}
		var d instanceDryrun
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	// An update of memory: the file's content would change, in the
	// desired state and on the target.
	d := dryrun(map[string]any{"current_version": up.Version, "attributes": map[string]any{"memory": 4}})
	if !d.Validation.OK || !d.UpdateAllowed || d.CandidateAttributes["memory"] != 4.0 || d.CandidateAttributes["name"] != "web" {
		t.Fatalf("dry-run of memory 4: %+v", d)
	}
	fileID := ""
	if ds := d.DesiredState; ds == nil || len(ds.Modified) != 1 || len(ds.Added)+len(ds.Removed) != 0 {
		t.Fatalf("desired state: %+v, want one modified file", d.DesiredState)
	} else {
		fileID = ds.Modified[0].ID
		ch, ok := ds.Modified[0].Changes["content"]
		if !ok || ch.From != "memory=2\n" || ch.To != "memory=4\n" {
			t.Errorf("desired change of %s: %+v, want content memory=2 → memory=4", fileID, ds.Modified[0].Changes)
		}
	}
	if d.Dryrun == nil || d.Dryrun.Status != "done" || len(d.Targets) != 1 {
		t.Fatalf("dry-run on the targets: %+v %+v", d.Dryrun, d.Targets)
	}
	if tr := d.Targets[0]; tr.ResourceID != fileID || tr.Status != "modified" || !strings.Contains(string(tr.Changes), "memory=4") {
		t.Errorf("target result: %+v (%s), want %s modified to memory=4", tr, tr.Changes, fileID)
	}
	if got, _ := readFile(t, conf); got != "memory=2\n" {
		t.Errorf("web.conf after the dry-run = %q, want it untouched", got)
	}
	unchanged("after a dry-run")

	// Its results are also where dryrun_url says.
	var page struct {
		Results []client.DryrunResult `json:"results"`
	}
	if err := lsmGet(t, c, env, d.DryrunURL, &page); err != nil || len(page.Results) != 1 || page.Results[0].Status != "modified" {
		t.Errorf("GET %s: %+v, %v", d.DryrunURL, page, err)
	}

	// The same as dict-path edits.
	d = dryrun(map[string]any{"edit": []map[string]any{{"operation": "replace", "target": "memory", "value": 8}}})
	if !d.Validation.OK || d.DesiredState == nil || len(d.DesiredState.Modified) != 1 ||
		d.DesiredState.Modified[0].Changes["content"].To != "memory=8\n" {
		t.Errorf("dry-run of an edit: %+v", d)
	}

	// A value the model refuses fails the validation, with its errors,
	// and nothing is dry-run.
	d = dryrun(map[string]any{"attributes": map[string]any{"memory": 100}})
	if d.Validation.OK || !strings.Contains(string(d.Validation.Errors), "memory") || d.DesiredState != nil || d.Dryrun != nil {
		t.Errorf("dry-run of memory 100: %+v, want a failed validation and no dry-run", d)
	}

	// Drift: the file changed by hand. The current set, dry-run as it
	// is, is unchanged in the desired state, modified on the target.
	if err := os.WriteFile(conf, []byte("memory=7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = dryrun(nil)
	if ds := d.DesiredState; ds == nil || len(ds.Unchanged) != 1 || len(ds.Modified) != 0 {
		t.Errorf("dry-run of the current set: desired state %+v, want it unchanged", d.DesiredState)
	}
	if len(d.Targets) != 1 || d.Targets[0].Status != "modified" || !strings.Contains(string(d.Targets[0].Changes), "memory=7") {
		t.Errorf("dry-run of the drifted file: %+v, want it modified back from memory=7", d.Targets)
	}
	if got, _ := readFile(t, conf); got != "memory=7\n" {
		t.Errorf("web.conf after the dry-run = %q, want the drift left alone", got)
	}

	// Refusals: each a problem, none writing anything.
	for _, tc := range []struct {
		query string
		body  any
		code  int
		field string
	}{
		{"", map[string]any{"attributes": map[string]any{"name": "other"}}, 422, "/attributes/name"},
		{"", map[string]any{"current_version": up.Version - 1, "attributes": map[string]any{"memory": 3}}, 409, "/current_version"},
		{"", map[string]any{"attributes": map[string]any{"memory": 3}, "edit": []map[string]any{{"operation": "remove", "target": "memory"}}}, 422, "/edit"},
		{"", map[string]any{"edit": []map[string]any{{"operation": "explode", "target": "memory"}}}, 422, "/edit/0/operation"},
		{"", map[string]any{"attributes": map[string]any{"memory": 3}, "color": "red"}, 422, "/color"},
		{"", map[string]any{"attributes": []int{1}}, 422, "/attributes"},
		{"", map[string]any{"current_version": "four"}, 422, "/current_version"},
		{"?wait=abc", nil, 400, ""},
		{"?wait=2h", nil, 400, ""},
		{"?wait=-1s", nil, 400, ""},
	} {
		r := lsmDo(t, c, env, http.MethodPost, item+"/dryrun"+tc.query, "", tc.body)
		if p := r.problem(t); r.status != tc.code || (tc.field != "" && !hasFieldError(p, tc.field, "")) {
			t.Errorf("dry-run %s %v: %d %s, want %d naming %q", tc.query, tc.body, r.status, r.body, tc.code, tc.field)
		}
	}
	if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm/nosuch/dryrun", "", nil); r.status != http.StatusNotFound {
		t.Errorf("dry-run of an unknown instance: %d %s", r.status, r.body)
	}
	// A reader may look but not dry-run: a dry-run puts executors to work.
	reader := as(c, mint(t, c, "dryrun-reader", "read", env))
	if r := lsmDo(t, reader, env, http.MethodPost, item+"/dryrun", "", nil); r.status != http.StatusForbidden {
		t.Errorf("a reader's dry-run: %d %s, want 403", r.status, r.body)
	}
	unchanged("after the refusals")
}
