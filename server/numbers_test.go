package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestNumbersBeyondFloat64Refused: a number no float64 holds (1e309, or
// an integer of 400 digits) is refused with 422 naming it at every door
// a JSON body enters: an instance's create (it answered 500 and left a
// lifecycle workflow with no instance), update and set-state, an order's
// items (accepted, the order then retried for ever), the environment's
// settings and a version export. Nothing is stored.
func TestNumbersBeyondFloat64Refused(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "bignum", nil)
	if err := uploadModel(t, c, env, lsmFileModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "", map[string]any{
		"attributes": map[string]any{"name": "live", "memory": 2}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	live := waitState(t, c, env, "live", "up")
	cur := fmt.Sprint(live.Version)
	versionsBefore := countVersions(t, c, env)
	huge := "1" + strings.Repeat("0", 400)

	for _, tc := range []struct {
		why, method, path, body, field string
	}{
		{"an instance's create", http.MethodPost, "/lsm/v1/service_inventory/vm",
			`{"attributes": {"name": "big", "memory": 1e309}}`, "/attributes/memory"},
		{"a create, 400 digits", http.MethodPost, "/lsm/v1/service_inventory/vm",
			`{"attributes": {"name": "big", "memory": ` + huge + `}}`, "/attributes/memory"},
		{"an instance's update", http.MethodPatch, "/lsm/v1/service_inventory/vm/" + live.ID,
			`{"current_version": ` + cur + `, "attributes": {"memory": -1E+309}}`, "/attributes/memory"},
		{"an instance's edit", http.MethodPatch, "/lsm/v2/service_inventory/vm/" + live.ID,
			`{"current_version": ` + cur + `, "edit": [{"edit_id": "e", "operation": "replace", "target": "memory", "value": 1e309}]}`, "/edit/0/value"},
		{"a set-state", http.MethodPost, "/lsm/v1/services/vm/" + live.ID + "/state",
			`{"target_state": "up", "current_version": 1e309}`, "/current_version"},
		{"an order item", http.MethodPost, ordersPath, `{"policy": "best_effort", "items": [{"id": "a",
			"operation": "create", "service_entity": "vm", "attributes": {"name": "big", "memory": 1e309}}]}`,
			"/items/0/attributes/memory"},
		{"a setting", http.MethodPatch, client.EnvPath(env), `{"settings": {"deploy_interval": 1e309}}`,
			"/settings/deploy_interval"},
		{"a version export", http.MethodPut, client.EnvPath(env, "versions"),
			`{"resources": [{"id": "fs::File[localhost,path=/tmp/x]", "attributes": {"path": "/tmp/x", "n": [1e309]}}]}`,
			"/resources/0/attributes/n/0"},
	} {
		status, p := send(t, c, env, tc.method, tc.path, tc.body)
		if status != http.StatusUnprocessableEntity || !hasField(p, tc.field) {
			t.Errorf("%s: %d %+v, want 422 naming %s", tc.why, status, p, tc.field)
		}
	}

	// Nothing was stored: no instance big, no order, live unchanged.
	if r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_inventory/vm/big", "", nil); r.status != http.StatusNotFound {
		t.Errorf("instance big after the refusals: %d %s", r.status, r.body)
	}
	var orders client.List[client.Order]
	if err := lsmGet(t, c, env, ordersPath, &orders); err != nil || len(orders.Items) != 0 {
		t.Errorf("orders after the refusals: %+v %v", orders.Items, err)
	}
	if got := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/service_inventory/vm/"+live.ID, "", nil).instance(t); got.Version != live.Version {
		t.Errorf("live after the refusals is at version %d, was %d", got.Version, live.Version)
	}
	if n := countVersions(t, c, env); n != versionsBefore {
		t.Errorf("versions after the refusals: %d, were %d", n, versionsBefore)
	}
}

func countVersions(t *testing.T, c *client.Client, env string) int {
	t.Helper()
	var vs client.List[client.VersionInfo]
	if err := c.Do(context.Background(), http.MethodGet, client.EnvPath(env, "versions"), nil, &vs); err != nil {
		t.Fatal(err)
	}
	return len(vs.Items)
}

// send sends body as it is, as JSON, with the environment header, and
// returns the status and the problem (if any).
func send(t *testing.T, c *client.Client, env, method, path, body string) (int, client.Problem) {
	t.Helper()
	req, err := http.NewRequest(method, c.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Intend-Environment", env)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p client.Problem
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, p
}

func hasField(p client.Problem, field string) bool {
	for _, e := range p.Errors {
		if e.Field == field {
			return true
		}
	}
	return false
}
