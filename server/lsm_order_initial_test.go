package server_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
)

// TestOrderInitialState: an order's create item names the state its
// instance begins in (initial_state, as a single create does): the
// instance is created there and carries on through its lifecycle, and
// the item shows it in its request. An item naming a state its
// lifecycle does not allow refuses the order whole with the single
// create's details (at the item's pointer), as does an update naming
// one; nothing of the refused order is created.
func TestOrderInitialState(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "orderinit", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmPutModel(root)); err != nil { // simple, with initial_states: ["acknowledged"]
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	create := func(id, name, state string) map[string]any {
		it := map[string]any{"id": id, "operation": "create", "service_entity": "vm", "attributes": map[string]any{"name": name}}
		if state != "" {
			it["initial_state"] = state
		}
		return it
	}
	id := postOrder(t, c, env, lsm.OrderAllOrNothing, create("a", "web", "acknowledged"), create("b", "db", ""))
	o := waitOrder(t, c, env, id)
	its := orderItems(o)
	if o.Status != lsm.OrderSucceeded {
		t.Fatalf("order = %+v", o)
	}
	if a := its["a"]; a.State != "up" || !strings.Contains(string(a.Request), `"initial_state":"acknowledged"`) {
		t.Errorf("item a = %+v, request %s", a, a.Request)
	}
	if b := its["b"]; strings.Contains(string(b.Request), "initial_state") {
		t.Errorf("item b's request names an initial state: %s", b.Request)
	}
	firstState := func(name string) string {
		t.Helper()
		var log client.List[client.InstanceLogEntry]
		if err := lsmGet(t, c, env, inventory+"/"+name+"/log", &log); err != nil || len(log.Items) == 0 {
			t.Fatalf("log of %s: %+v, %v", name, log, err)
		}
		return log.Items[len(log.Items)-1].State
	}
	if got := firstState("web"); got != "acknowledged" {
		t.Errorf("web began in %q, want acknowledged", got)
	}
	if got := firstState("db"); got != "start" {
		t.Errorf("db began in %q, want start", got)
	}

	// A state the lifecycle does not allow: the single create's 422 ...
	single := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{
		"attributes": map[string]any{"name": "bad"}, "initial_state": "up"})
	sp := single.problem(t)
	if single.status != 422 || len(sp.Errors) != 3 {
		t.Fatalf("single create in up: %d %s", single.status, single.body)
	}
	// ... and the order's, item by item, with nothing created.
	r := lsmDo(t, c, env, http.MethodPost, ordersPath, "", map[string]any{"policy": lsm.OrderBestEffort, "items": []any{
		create("c", "fine", ""), create("d", "bad", "up"),
		map[string]any{"id": "e", "operation": "update", "service_entity": "vm", "instance": "web",
			"attributes": map[string]any{"memory": 3}, "initial_state": "start"}}})
	p := r.problem(t)
	if r.status != 422 {
		t.Fatalf("order with a disallowed initial state: %d %s", r.status, r.body)
	}
	var atD []string
	for _, e := range p.Errors {
		if e.Field == "/items/1/initial_state" {
			atD = append(atD, e.Detail)
		}
	}
	var want []string
	for _, e := range sp.Errors {
		want = append(want, e.Detail)
	}
	if !reflect.DeepEqual(atD, want) || !hasFieldError(p, "/items/1/initial_state", `allowed: "acknowledged"`) {
		t.Errorf("item d's problems %q, want the single create's %q", atD, want)
	}
	if !hasFieldError(p, "/items/2/initial_state", "only a create begins in an initial state") {
		t.Errorf("an update naming an initial state: %s", r.body)
	}
	for _, name := range []string{"fine", "bad"} {
		var inst client.ServiceInstance
		if err := lsmGet(t, c, env, inventory+"/"+name, &inst); err == nil {
			t.Errorf("the refused order created %s: %+v", name, inst)
		}
	}
	var orders client.List[client.Order]
	if err := lsmGet(t, c, env, ordersPath, &orders); err != nil || len(orders.Items) != 1 {
		t.Errorf("orders after the refusal: %+v, %v", orders, err)
	}
}
