package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// previewModel is a model of the entity vm (as lsmFileModel) in two
// versions of the model: v1 renders conf and old per instance; v2 adds
// the attribute cpus (which changes conf's content), renders extra
// instead of old, and allows at most 32 GiB of memory.
func previewModel(root string, v2 bool) string {
	memory, param, conf, third := "int & >=1", "", `"memory=\(parameter.memory)\n"`,
		`old: fs.#File & {path: "`+root+`/\(parameter.name).old", content: "old\n"}`
	if v2 {
		memory, param, conf = "int & >=1 & <=32", `cpus: *1 | int @lsm(rw+)`, `"memory=\(parameter.memory)\ncpus=\(parameter.cpus)\n"`
		third = `extra: fs.#File & {path: "` + root + `/\(parameter.name).extra", content: "extra\n"}`
	}
	return `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		memory: *2 | ` + memory + ` @lsm(rw+)
		` + param + `
	}
	output: {
		conf: fs.#File & {path: "` + root + `/\(parameter.name).conf", content: ` + conf + `}
		` + third + `
	}
}

services: vm: #VM
`
}

// preview posts a model archive to POST .../lsm/preview.
func preview(t *testing.T, c *client.Client, env string, archive []byte, query string) (client.ModelPreview, error) {
	t.Helper()
	var p client.ModelPreview
	err := c.Do(context.Background(), http.MethodPost, client.EnvPath(env, "lsm", "preview")+query,
		client.Raw{ContentType: "application/gzip", Body: archive}, &p)
	return p, err
}

// TestModelPreview: a model change is previewed over every live service
// instance — each instance's resources added, removed and modified (with
// the per-attribute change), an instance the new model refuses listed as
// failed with its errors — paged, and nothing changes: no version, no
// instance version, no model source, no file.
func TestModelPreview(t *testing.T) {
	c, _, _ := startServerDB(t)
	ctx := context.Background()
	env := newEnv(t, c, "preview", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, previewModel(root, false)); err != nil {
		t.Fatal(err)
	}
	memory := map[string]int{"big": 50, "db": 4, "web": 2}
	for _, name := range []string{"big", "db", "web"} {
		if r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
			map[string]any{"attributes": map[string]any{"name": name, "memory": memory[name]}}); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	ups := map[string]client.ServiceInstance{}
	for _, name := range []string{"big", "db", "web"} {
		ups[name] = waitState(t, c, env, name, "up", "rejected", "failed")
		waitContent(t, filepath.Join(root, name+".conf"), fmt.Sprintf("memory=%d\n", memory[name]))
	}
	var model client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &model); err != nil {
		t.Fatal(err)
	}
	before, err := versions(ctx, c, env)
	if err != nil {
		t.Fatal(err)
	}

	// The same model: nothing would change.
	same, err := preview(t, c, env, modelArchive(t, previewModel(root, false)).Archive, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(same.Instances) != 3 || same.Counts["unchanged"] != 3 || same.Next != "" {
		t.Errorf("preview of the released model: %+v, want 3 instances unchanged", same)
	}

	archive := modelArchive(t, previewModel(root, true)).Archive
	p, err := preview(t, c, env, archive, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseVersion != before[0].Version || p.Counts["changed"] != 2 || p.Counts["failed"] != 1 || len(p.Instances) != 3 {
		t.Fatalf("preview: %+v, want 2 changed and 1 failed against version %d", p, before[0].Version)
	}
	byName := map[string]client.InstancePreview{}
	for _, in := range p.Instances {
		byName[in.Identity] = in
	}
	for _, name := range []string{"db", "web"} {
		in := byName[name]
		if in.Status != "changed" || in.ID != ups[name].ID || in.State != "up" || in.ServiceEntity != "vm" {
			t.Errorf("%s: %+v, want it changed", name, in)
			continue
		}
		if len(in.Added) != 1 || !strings.Contains(in.Added[0], name+".extra") {
			t.Errorf("%s added %v, want its extra file", name, in.Added)
		}
		if len(in.Removed) != 1 || !strings.Contains(in.Removed[0], name+".old") {
			t.Errorf("%s removed %v, want its old file", name, in.Removed)
		}
		want := client.Change{From: fmt.Sprintf("memory=%d\n", memory[name]), To: fmt.Sprintf("memory=%d\ncpus=1\n", memory[name])}
		if len(in.Modified) != 1 || !strings.Contains(in.Modified[0].ID, name+".conf") || in.Modified[0].Changes["content"] != want ||
			len(in.Modified[0].Changes) != 1 {
			t.Errorf("%s modified %+v, want its conf's content %q → %q", name, in.Modified, want.From, want.To)
		}
	}
	if big := byName["big"]; big.Status != "failed" || !strings.Contains(string(big.Errors), "memory") ||
		big.Added != nil || big.Modified != nil {
		t.Errorf("big: %+v (%s), want it failed on its memory", big, big.Errors)
	}

	// Paged: two instances, then the third.
	first, err := preview(t, c, env, archive, "?limit=2")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Instances) != 2 || first.Next == "" {
		t.Fatalf("first page: %+v, want 2 instances and a next cursor", first)
	}
	second, err := preview(t, c, env, archive, "?limit=2&after="+first.Next)
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Instances) != 1 || second.Next != "" || second.Instances[0].ID == first.Instances[0].ID ||
		second.Instances[0].ID == first.Instances[1].ID {
		t.Errorf("second page: %+v, want the third instance only", second)
	}

	// A model that does not compile by itself: 422, naming the problem.
	_, err = preview(t, c, env, modelArchive(t, "package main\nservices: vm: 1 & 2\n").Archive, "")
	if status(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "conflicting") {
		t.Errorf("preview of a broken model: %v, want 422", err)
	}

	// Nothing changed: versions, instances, the model source, the files.
	after, err := versions(ctx, c, env)
	if err != nil || len(after) != len(before) || after[0].Version != before[0].Version {
		t.Errorf("versions after the previews: %+v (%v), want %+v", after, err, before)
	}
	for name, up := range ups {
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/"+name, &inst); err != nil || inst.Version != up.Version ||
			inst.State != "up" || inst.Candidate != nil {
			t.Errorf("%s after the previews: %+v (%v), want it up at version %d", name, inst, err, up.Version)
		}
		if got, _ := readFile(t, filepath.Join(root, name+".conf")); got != fmt.Sprintf("memory=%d\n", memory[name]) {
			t.Errorf("%s.conf after the previews = %q", name, got)
		}
	}
	var now client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &now); err != nil || now.Hash != model.Hash {
		t.Errorf("model source after the previews: %+v (%v), want %s", now, err, model.Hash)
	}
	var cat struct {
		Attributes []struct {
			Name string `json:"name"`
		} `json:"attributes"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog/vm", &cat); err != nil || len(cat.Attributes) != 2 {
		t.Fatalf("catalog: %+v (%v), want vm's two attributes", cat, err)
	}
	for _, a := range cat.Attributes {
		if a.Name == "cpus" {
			t.Errorf("the catalog has the previewed model's attribute cpus: %+v", cat)
		}
	}
	diff, err := json.Marshal(p)
	if err != nil || !strings.Contains(string(diff), `"status":"changed"`) {
		t.Errorf("preview on the wire: %s", diff)
	}
}
