package server_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// relationsModel has a site (a file holding its port), an alias whose
// attribute site references one site (its file holds the site's port,
// read from related) and a group whose peers reference several.
func relationsModel(root string) string {
	return `package main

import (
	"strings"

	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

services: site: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		port: int & >=1024 @lsm(rw+)
	}
	output: conf: fs.#File & {path: "` + root + `/site-\(parameter.name).conf", content: "port=\(parameter.port)\n"}
}

services: alias: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
		site: string @lsm(rw+, ref=site)
	}
	related: site: _
	output: conf: fs.#File & {path: "` + root + `/alias-\(parameter.name).conf",
		content: "site=\(related.site.name) listen=\(related.site.port)\n"}
}

services: group: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:  =~"^[a-z]+$" @lsm(rw)
		peers: [...string] @lsm(rw+, ref=site)
	}
	related: peers: [...]
	output: conf: fs.#File & {path: "` + root + `/group-\(parameter.name).conf",
		content: strings.Join([for p in related.peers {"\(p.name):\(p.port)"}], ",") + "\n"}
}
`
}

// waitEntityState polls an instance of entity until it is in state,
// failing at once in a state of fail or after 90 s.
func waitEntityState(t *testing.T, c *client.Client, env, entity, ref, state string, fail ...string) client.ServiceInstance {
	t.Helper()
	var inst client.ServiceInstance
	wait.For(t, entity+" "+ref+" to be "+state, 90*time.Second, func() error {
		inst = client.ServiceInstance{}
		if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/"+entity+"/"+ref, &inst); err != nil {
			return err
		}
		if slices.Contains(fail, inst.State) {
			t.Fatalf("%s %s is %s, not %s: %+v", entity, ref, inst.State, state, inst)
		}
		return wait.Unless(inst.State == state, "it is %s: %+v", inst.State, inst)
	})
	return inst
}

// TestServiceInstanceRelations walks relations by the REST API: a
// reference to nothing is 422 (create, PATCH v1 and v2, an order item);
// the referrer's resource reads the referenced instance's active
// attributes and follows their update; referenced_by is served; the
// referenced instance's delete is 409 naming the referrers until they
// are gone, then both end terminated.
func TestServiceInstanceRelations(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmrel", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, relationsModel(root)); err != nil {
		t.Fatal(err)
	}
	const inv = "/lsm/v1/service_inventory/"
	create := func(entity string, attrs map[string]any) lsmReply {
		t.Helper()
		return lsmDo(t, c, env, http.MethodPost, inv+entity, "", map[string]any{"attributes": attrs})
	}

	// Bad forms of referenced_by: unknown entity or instance, a NUL.
	for path, status := range map[string]int{
		inv + "nosuch/x/referenced_by":                                  404,
		inv + "site/nobody/referenced_by":                               404,
		inv + "site/00000000-0000-4000-8000-000000000000/referenced_by": 404,
		inv + "site/a%00b/referenced_by":                                400,
	} {
		if r, _ := lsmTry(c, env, http.MethodGet, path, "", nil); r.status != status || r.problem(t).Status != status {
			t.Errorf("GET %s: %d %s, want %d", path, r.status, r.body, status)
		}
	}

	// A reference to no site: 422 at the attribute, nothing created.
	r := create("alias", map[string]any{"name": "www", "site": "blog"})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/site", "no live site") {
		t.Fatalf("dangling create: %d %s", r.status, r.body)
	}
	r = create("group", map[string]any{"name": "all", "peers": []string{"nope"}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/peers", `"nope"`) {
		t.Fatalf("dangling list create: %d %s", r.status, r.body)
	}

	// The site, then an alias of it by name: its file holds the site's port.
	if r = create("site", map[string]any{"name": "blog", "port": 8081}); r.status != 201 {
		t.Fatalf("create site: %d %s", r.status, r.body)
	}
	site := waitEntityState(t, c, env, "site", "blog", "up", "rejected", "failed")
	if r = create("alias", map[string]any{"name": "www", "site": "blog"}); r.status != 201 {
		t.Fatalf("create alias: %d %s", r.status, r.body)
	}
	alias := waitEntityState(t, c, env, "alias", "www", "up", "rejected", "failed")
	aliasConf := filepath.Join(root, "alias-www.conf")
	waitContent(t, aliasConf, "site=blog listen=8081\n")
	// A list of references, by name and by id.
	if r = create("group", map[string]any{"name": "all", "peers": []string{"blog", site.ID}}); r.status != 201 {
		t.Fatalf("create group: %d %s", r.status, r.body)
	}
	group := waitEntityState(t, c, env, "group", "all", "up", "rejected", "failed")
	groupConf := filepath.Join(root, "group-all.conf")
	waitContent(t, groupConf, "blog:8081,blog:8081\n")

	// referenced_by, in the instance and on its own.
	var got struct {
		ReferencedBy []client.InstanceReferrer `json:"referenced_by"`
	}
	if err := lsmGet(t, c, env, inv+"site/blog", &got); err != nil || len(got.ReferencedBy) != 2 ||
		got.ReferencedBy[0] != (client.InstanceReferrer{ServiceEntity: "alias", ID: alias.ID, Identity: "www", Attribute: "site", State: "up"}) ||
		got.ReferencedBy[1].ID != group.ID || got.ReferencedBy[1].Attribute != "peers" {
		t.Errorf("referenced_by of blog: %+v, %v", got.ReferencedBy, err)
	}
	var page struct {
		Items []client.InstanceReferrer `json:"items"`
	}
	if err := lsmGet(t, c, env, inv+"site/"+site.ID+"/referenced_by", &page); err != nil || len(page.Items) != 2 {
		t.Errorf("GET referenced_by: %+v, %v", page, err)
	}
	if err := lsmGet(t, c, env, inv+"alias/www/referenced_by", &page); err != nil || len(page.Items) != 0 {
		t.Errorf("GET referenced_by of the alias: %+v, %v", page, err)
	}

	// Updates whose reference names nothing: 422, v1 and v2 and an order.
	r = lsmDo(t, c, env, http.MethodPatch, inv+"alias/www", "", map[string]any{"current_version": alias.Version,
		"attributes": map[string]any{"site": "nope"}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/site", "no live site") {
		t.Errorf("dangling PATCH v1: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPatch, "/lsm/v2/service_inventory/alias/www", "", map[string]any{
		"current_version": alias.Version,
		"edit":            []map[string]any{{"edit_id": "s", "operation": "replace", "target": "site", "value": "nope"}}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/site", "no live site") {
		t.Errorf("dangling PATCH v2: %d %s", r.status, r.body)
	}
	// An expert's sets are checked by the store alone (through the
	// workflow): 422 the same.
	r = lsmDo(t, c, env, http.MethodPost, inv+"alias/www/expert", "", map[string]any{"current_version": alias.Version,
		"active_attributes": map[string]any{"name": "www", "site": "nope"}, "reason": "test"})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/attributes/site", "no live site") {
		t.Errorf("dangling expert set: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/orders", "", map[string]any{"policy": "best_effort", "items": []map[string]any{
		{"id": "a", "operation": "create", "service_entity": "alias", "attributes": map[string]any{"name": "shop", "site": "nope"}},
		{"id": "b", "operation": "create", "service_entity": "site", "attributes": map[string]any{"name": "new", "port": 9000}},
		{"id": "c", "operation": "create", "service_entity": "alias", "attributes": map[string]any{"name": "neu", "site": "new"},
			"depends_on": []string{"b"}},
	}})
	if p := r.problem(t); r.status != 422 || !hasFieldError(p, "/items/0/attributes/site", "no live site") || len(p.Errors) != 1 {
		t.Errorf("dangling order item: %d %s", r.status, r.body)
	}

	// The site's port changes: its referrers' files follow.
	r = lsmDo(t, c, env, http.MethodPatch, inv+"site/blog", "", map[string]any{"current_version": site.Version,
		"attributes": map[string]any{"port": 8082}})
	if r.status != 200 {
		t.Fatalf("update site: %d %s", r.status, r.body)
	}
	site = waitEntityState(t, c, env, "site", "blog", "up", "update_rejected", "update_failed")
	waitContent(t, filepath.Join(root, "site-blog.conf"), "port=8082\n")
	waitContent(t, aliasConf, "site=blog listen=8082\n")
	waitContent(t, groupConf, "blog:8082,blog:8082\n")

	// The site cannot go while they reference it: 409 naming them.
	del := func(entity, ref string, version int64) lsmReply {
		return lsmDo(t, c, env, http.MethodDelete, inv+entity+"/"+ref+"?current_version="+strconv.FormatInt(version, 10), "", nil)
	}
	r = del("site", "blog", site.Version)
	p := r.problem(t)
	if r.status != 409 || p.Type != client.TypeConflict || len(p.Referrers) != 2 || p.Referrers[0].ID != alias.ID ||
		p.Referrers[0].Attribute != "site" || p.Referrers[1].ID != group.ID || !hasFieldError(p, "", "alias www") {
		t.Fatalf("delete of a referenced site: %d %s", r.status, r.body)
	}
	if now := waitEntityState(t, c, env, "site", "blog", "up"); now.Version != site.Version {
		t.Errorf("the refused delete moved the site: %+v", now)
	}

	// The referrers go, then the site: all terminated.
	alias = waitEntityState(t, c, env, "alias", "www", "up")
	if r = del("alias", "www", alias.Version); r.status != 200 {
		t.Fatalf("delete alias: %d %s", r.status, r.body)
	}
	if r = del("group", "all", group.Version); r.status != 200 {
		t.Fatalf("delete group: %d %s", r.status, r.body)
	}
	// While they are deleting, they still reference the site: refused,
	// unless both were already gone (a quick deploy), then accepted.
	r = del("site", "blog", site.Version)
	if r.status != 409 && r.status != 200 {
		t.Fatalf("delete of the site while its referrers go: %d %s", r.status, r.body)
	}
	siteDeleted := r.status == 200
	waitEntityState(t, c, env, "alias", alias.ID, "terminated", "delete_failed")
	waitEntityState(t, c, env, "group", group.ID, "terminated", "delete_failed")
	if _, err := os.Stat(aliasConf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the alias's file after its delete: %v", err)
	}
	if !siteDeleted {
		if now := waitEntityState(t, c, env, "site", site.ID, "up", "deleting", "terminated"); now.Version != site.Version {
			t.Errorf("the refused delete moved the site: %+v", now)
		}
		if r = del("site", "blog", site.Version); r.status != 200 {
			t.Fatalf("delete of the unreferenced site: %d %s", r.status, r.body)
		}
	}
	waitEntityState(t, c, env, "site", site.ID, "terminated", "delete_failed")

	// A site the model rejected has no active attributes: an alias of it
	// is accepted (the site is live) and fails its validation, saying so.
	if r = create("site", map[string]any{"name": "low", "port": 80}); r.status != 201 {
		t.Fatalf("create site low: %d %s", r.status, r.body)
	}
	low := waitEntityState(t, c, env, "site", "low", "rejected", "up")
	if r = create("alias", map[string]any{"name": "lo", "site": "low"}); r.status != 201 {
		t.Fatalf("create alias of low: %d %s", r.status, r.body)
	}
	lo := waitEntityState(t, c, env, "alias", "lo", "rejected", "up")
	var diag struct {
		Validation *struct {
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		} `json:"validation"`
	}
	if err := lsmGet(t, c, env, inv+"alias/lo/diagnose", &diag); err != nil || diag.Validation == nil ||
		len(diag.Validation.Errors) != 1 || !strings.Contains(diag.Validation.Errors[0].Message, "has no active attributes yet") {
		t.Errorf("diagnose of the alias of a rejected site: %+v, %v", diag, err)
	}
	// A rejected referrer still references (it is not terminated).
	if r = del("site", "low", low.Version); r.status != 409 {
		t.Errorf("delete of a site a rejected alias references: %d %s", r.status, r.body)
	}
	if r = del("alias", "lo", lo.Version); r.status != 200 {
		t.Fatalf("delete of the rejected alias: %d %s", r.status, r.body)
	}
	if r = del("site", "low", low.Version); r.status != 200 || r.instance(t).State != "terminated" {
		t.Errorf("delete of the rejected site: %d %s", r.status, r.body)
	}
}

// TestServiceInstanceRelationRace sends, many times at once, the create
// of an alias of a site and the delete of that site over REST: each pair
// ends with one of the two refused, never with an alias of a deleted
// site.
func TestServiceInstanceRelationRace(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmrace", nil)
	if err := uploadModel(t, c, env, relationsModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	const inv = "/lsm/v1/service_inventory/"
	const pairs = 10
	sites := make([]client.ServiceInstance, pairs)
	for i := range pairs {
		name := "s" + strings.Repeat("x", i)
		r := lsmDo(t, c, env, http.MethodPost, inv+"site", "", map[string]any{"attributes": map[string]any{"name": name, "port": 2000 + i}})
		if r.status != 201 {
			t.Fatalf("create site: %d %s", r.status, r.body)
		}
	}
	for i := range pairs {
		sites[i] = waitEntityState(t, c, env, "site", "s"+strings.Repeat("x", i), "up", "rejected", "failed")
	}
	type outcome struct{ create, del lsmReply }
	out := make([]outcome, pairs)
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			out[i].create, _ = lsmTry(c, env, http.MethodPost, inv+"alias", "", map[string]any{"attributes": map[string]any{
				"name": "a" + strings.Repeat("x", i), "site": sites[i].ID}})
		}()
		go func() {
			defer wg.Done()
			// Staggered, so that both orders happen: a create takes a
			// workflow start, a delete one update.
			time.Sleep(time.Duration(i) * 30 * time.Millisecond)
			out[i].del, _ = lsmTry(c, env, http.MethodDelete, inv+"site/"+sites[i].ID+"?current_version="+
				strconv.FormatInt(sites[i].Version, 10), "", nil)
		}()
	}
	wg.Wait()
	won := 0
	for i, o := range out {
		created, deleted := o.create.status == 201, o.del.status == 200
		if created == deleted {
			t.Errorf("pair %d: create %d %s; delete %d %s", i, o.create.status, o.create.body, o.del.status, o.del.body)
			continue
		}
		if created {
			won++
			a := waitEntityState(t, c, env, "alias", "a"+strings.Repeat("x", i), "up", "rejected", "failed")
			var s client.ServiceInstance
			if err := lsmGet(t, c, env, inv+"site/"+sites[i].ID, &s); err != nil || s.State != "up" {
				t.Errorf("pair %d: alias %s up, site %+v, %v", i, a.ID, s, err)
			}
		} else {
			if o.create.status != 422 {
				t.Errorf("pair %d: the create after the delete: %d %s", i, o.create.status, o.create.body)
			}
			waitEntityState(t, c, env, "site", sites[i].ID, "terminated", "delete_failed")
		}
	}
	t.Logf("%d pairs: the alias won %d, the delete %d", pairs, won, pairs-won)
}
