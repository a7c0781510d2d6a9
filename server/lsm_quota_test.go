package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestServiceInstanceQuota: an environment holds at most its
// service_instance_quota of live instances. A create beyond it is a 409
// naming the setting and writes nothing, and so is its dry-run; an
// order's create beyond it
// fails as its item; a terminated instance no longer counts, so the next
// create is taken.
func TestServiceInstanceQuota(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "lsmquota", map[string]any{"service_instance_quota": 2})
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	create := func(name string) lsmReply {
		return lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": name}})
	}
	for _, name := range []string{"a", "b"} {
		if r := create(name); r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	r := create("c")
	if p := r.problem(t); r.status != http.StatusConflict || !strings.Contains(p.Detail, "holds 2 live service instances, its service_instance_quota") {
		t.Fatalf("a create beyond the quota: %d %s", r.status, r.body)
	}
	if r := lsmDo(t, c, env, http.MethodGet, inventory+"/c", "", nil); r.status != http.StatusNotFound {
		t.Errorf("the refused create: %d %s", r.status, r.body)
	}
	// A create's dry-run answers what the create would.
	r = lsmDo(t, c, env, http.MethodPost, inventory+"/dryrun", "", map[string]any{"attributes": map[string]any{"name": "c"}})
	if p := r.problem(t); r.status != http.StatusConflict || !strings.Contains(p.Detail, "service_instance_quota") {
		t.Errorf("a create's dry-run beyond the quota: %d %s", r.status, r.body)
	}
	// An order's create beyond it fails as its item.
	order := waitOrder(t, c, env, postOrder(t, c, env, "best_effort", createVM("d", "d", 2)))
	if len(order.Items) != 1 || order.Items[0].Status != "failed" || !strings.Contains(order.Items[0].Error, "service_instance_quota") {
		t.Errorf("the order beyond the quota: %+v", order)
	}

	a := waitState(t, c, env, "a", "up", "rejected", "failed")
	r = lsmDo(t, c, env, http.MethodDelete, inventory+"/a?current_version="+strconv.FormatInt(a.Version, 10), "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("delete a: %d %s", r.status, r.body)
	}
	waitState(t, c, env, a.ID, "terminated", "delete_failed")
	if r := create("c"); r.status != http.StatusCreated {
		t.Errorf("a create once a is terminated: %d %s", r.status, r.body)
	}
}
