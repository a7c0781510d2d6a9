package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

const ordersPath = "/lsm/v1/orders"

// createVM is an order item creating the vm name with memory.
func createVM(id, name string, memory int, deps ...string) map[string]any {
	it := map[string]any{"id": id, "operation": "create", "service_entity": "vm",
		"attributes": map[string]any{"name": name, "memory": memory}}
	if len(deps) > 0 {
		it["depends_on"] = deps
	}
	return it
}

// postOrder posts an order and returns its id, failing unless 201.
func postOrder(t *testing.T, c *client.Client, env, policy string, items ...map[string]any) string {
	t.Helper()
	r := lsmDo(t, c, env, http.MethodPost, ordersPath, "", map[string]any{"policy": policy, "items": items})
	if r.status != http.StatusCreated {
		t.Fatalf("post order: %d %s", r.status, r.body)
	}
	var o client.Order
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatal(err)
	}
	if o.Status != lsm.OrderPending && o.Status != lsm.OrderRunning || len(o.Items) != len(items) {
		t.Fatalf("posted order = %+v", o)
	}
	return o.ID
}

// waitOrder polls an order until its status is final.
func waitOrder(t *testing.T, c *client.Client, env, id string) client.Order {
	t.Helper()
	var o client.Order
	wait.For(t, "order "+id+" to finish", 3*time.Minute, func() error {
		o = client.Order{}
		err := lsmGet(t, c, env, ordersPath+"/"+id, &o)
		return wait.Unless(err == nil && lsm.OrderFinal(o.Status), "%+v, %v", o, err)
	})
	return o
}

// items returns an order's items by id.
func orderItems(o client.Order) map[string]client.OrderItem {
	m := map[string]client.OrderItem{}
	for _, it := range o.Items {
		m[it.ID] = it
	}
	return m
}

// TestOrders runs orders end to end against a real server: one whose
// items all succeed (b after a, its dependency), a best_effort one with
// an item the model refuses (it fails, its dependent is skipped, the
// others succeed), and an all_or_nothing one with a failing item (what
// succeeded is compensated: the created instance terminated, the updated
// one rolled back; its delete, held to the end, never runs).
func TestOrders(t *testing.T) {
	c, srv := startServer(t)
	env := newEnv(t, c, "orders", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}

	// 1. Three creates, b depending on a: all up, the order succeeded.
	start := time.Now()
	id := postOrder(t, c, env, lsm.OrderBestEffort, createVM("a", "alpha", 2), createVM("b", "beta", 3, "a"),
		createVM("c", "gamma", 4))
	o := waitOrder(t, c, env, id)
	t.Logf("3-item order done in %s", time.Since(start))
	its := orderItems(o)
	if o.Status != lsm.OrderSucceeded || o.Counts[lsm.ItemSucceeded] != 3 || o.FinishedAt == nil {
		t.Fatalf("order = %+v", o)
	}
	for _, name := range []string{"a", "b", "c"} {
		it := its[name]
		if it.Status != lsm.ItemSucceeded || it.State != "up" || it.InstanceID == "" || it.Version == nil {
			t.Errorf("item %s = %+v", name, it)
		}
	}
	if a, b := its["a"], its["b"]; b.StartedAt == nil || a.FinishedAt == nil || b.StartedAt.Before(*a.FinishedAt) {
		t.Errorf("b started before its dependency a finished: a %+v, b %+v", a, b)
	}
	if got, _ := readFile(t, filepath.Join(root, "beta.conf")); got != "memory=3\n" {
		t.Errorf("beta.conf = %q", got)
	}
	waitState(t, c, env, "gamma", "up")

	// 2. best_effort: y's memory passes the request's checks and fails
	// the model's validation; z depends on y and is skipped; x and w run.
	// An update by dict-path edits (v2) and a delete run beside them.
	id = postOrder(t, c, env, lsm.OrderBestEffort, createVM("x", "xray", 5), createVM("y", "yankee", 100),
		createVM("z", "zulu", 6, "y"), createVM("w", "whisky", 7),
		map[string]any{"id": "edit-g", "operation": "update", "service_entity": "vm", "instance": "gamma",
			"edit": []any{map[string]any{"edit_id": "mem", "operation": "replace", "target": "memory", "value": 11}}},
		map[string]any{"id": "del-a", "operation": "delete", "service_entity": "vm", "instance": "alpha"})
	o = waitOrder(t, c, env, id)
	its = orderItems(o)
	if o.Status != lsm.OrderPartiallyFailed {
		t.Errorf("best_effort order: %s, want partially_failed: %+v", o.Status, o)
	}
	if it := its["y"]; it.Status != lsm.ItemFailed || it.State != "rejected" || !strings.Contains(it.Error, "failed at version") {
		t.Errorf("y = %+v", it)
	}
	if it := its["z"]; it.Status != lsm.ItemSkipped || !strings.Contains(it.Error, `dependency "y" failed`) || it.StartedAt != nil {
		t.Errorf("z = %+v", it)
	}
	for _, name := range []string{"x", "w", "edit-g"} {
		if it := its[name]; it.Status != lsm.ItemSucceeded || it.State != "up" {
			t.Errorf("%s = %+v", name, it)
		}
	}
	if it := its["del-a"]; it.Status != lsm.ItemSucceeded || it.State != "terminated" {
		t.Errorf("del-a = %+v", it)
	}
	if got, _ := readFile(t, filepath.Join(root, "gamma.conf")); got != "memory=11\n" {
		t.Errorf("gamma.conf after the edit = %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "alpha.conf")); !os.IsNotExist(err) {
		t.Errorf("alpha.conf after the delete: %v", err)
	}
	var zulu client.ServiceInstance
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm/zulu", &zulu); err == nil {
		t.Errorf("the skipped item made an instance: %+v", zulu)
	}

	// 3. all_or_nothing: xray's update and hotel's create succeed, india's
	// create fails validation; the delete of whisky waits for everything
	// else and never runs. Compensation: hotel (and the rejected india)
	// terminated, xray back to memory 5; whisky still up.
	xray := waitState(t, c, env, "xray", "up")
	id = postOrder(t, c, env, lsm.OrderAllOrNothing,
		map[string]any{"id": "up-x", "operation": "update", "service_entity": "vm", "instance": "xray",
			"attributes": map[string]any{"memory": 8}},
		createVM("h", "hotel", 9),
		createVM("i", "india", 100, "h"),
		map[string]any{"id": "del-w", "operation": "delete", "service_entity": "vm", "instance": "whisky"})
	o = waitOrder(t, c, env, id)
	its = orderItems(o)
	if o.Status != lsm.OrderCompensated {
		t.Errorf("all_or_nothing order: %s, want compensated: %+v", o.Status, o)
	}
	if it := its["i"]; it.Status != lsm.ItemCompensated || !strings.Contains(it.Error, "failed at version") {
		t.Errorf("i = %+v", it)
	}
	if it := its["del-w"]; it.Status != lsm.ItemSkipped || !strings.Contains(it.Error, `item "i" failed`) {
		t.Errorf("del-w = %+v", it)
	}
	for _, name := range []string{"up-x", "h"} {
		if it := its[name]; it.Status != lsm.ItemCompensated {
			t.Errorf("%s = %+v", name, it)
		}
	}
	if it := its["up-x"]; it.VersionBefore == nil || *it.VersionBefore != xray.Version {
		t.Errorf("up-x noted version_before %v, want %d", it.VersionBefore, xray.Version)
	}
	var hotel []client.ServiceInstance
	var page struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm?deleted=true", &page); err != nil {
		t.Fatal(err)
	}
	for _, inst := range page.Items {
		if inst.Identity == "hotel" || inst.Identity == "india" {
			hotel = append(hotel, inst)
		}
	}
	if len(hotel) != 2 {
		t.Errorf("terminated hotel and india: %+v", page.Items)
	}
	x := waitState(t, c, env, "xray", "up")
	if fmt.Sprint(x.Active["memory"]) != "5" || x.Version <= xray.Version+4 {
		t.Errorf("xray not rolled back to memory 5: %+v", x)
	}
	if got, _ := readFile(t, filepath.Join(root, "xray.conf")); got != "memory=5\n" {
		t.Errorf("xray.conf = %q", got)
	}
	waitState(t, c, env, "whisky", "up")

	// Replay safety: the compensated order's history, as Temporal
	// recorded it, replays against the workflow's code without a
	// nondeterminism error.
	replayOrder(t, srv, workflows.OrderWorkflowID(env, id))

	// The list: newest first, without items; ?status filters.
	var list struct {
		Items []client.Order `json:"items"`
	}
	if err := lsmGet(t, c, env, ordersPath, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 || list.Items[0].ID != id || list.Items[0].Items != nil || list.Items[2].Status != lsm.OrderSucceeded {
		t.Errorf("list = %+v", list.Items)
	}
	if err := lsmGet(t, c, env, ordersPath+"?status=compensated", &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("?status=compensated: %+v, %v", list.Items, err)
	}
	if err := lsmGet(t, c, env, ordersPath+"?limit=1&after="+id, &list); err != nil || len(list.Items) != 1 ||
		list.Items[0].Status != lsm.OrderPartiallyFailed {
		t.Errorf("the second page: %+v, %v", list.Items, err)
	}
}

// TestOrderRefusals: a bad order is refused whole, before anything runs,
// with every bad item named by its JSON pointer; nothing is written. A
// read token cannot post an order; an operator's repeat under its
// Idempotency-Key gets the first response.
func TestOrderRefusals(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "orderbad", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	// A live instance, for the refusals of updates and taken identities.
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "", map[string]any{
		"attributes": map[string]any{"name": "live", "memory": 2}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	waitState(t, c, env, "live", "up")

	upd := func(id string, extra map[string]any) map[string]any {
		it := map[string]any{"id": id, "operation": "update", "service_entity": "vm", "instance": "live"}
		for k, v := range extra {
			it[k] = v
		}
		return it
	}
	many := make([]map[string]any, 10001)
	for i := range many {
		many[i] = map[string]any{"id": fmt.Sprint(i), "operation": "delete", "service_entity": "vm", "instance": "live"}
	}
	order := func(items ...map[string]any) map[string]any {
		return map[string]any{"policy": "best_effort", "items": items}
	}
	cases := []struct {
		why    string
		body   any // a string is sent as it is
		status int
		fields []string // each must be among the problem's fields
	}{
		{"malformed JSON", `{"policy": "best_effort", "items": [`, 400, nil},
		{"an unknown top-level field", `{"policy": "best_effort", "items": [], "force": true}`, 422, []string{"/force"}},
		{"an unknown item field", order(map[string]any{"id": "a", "operation": "create", "service_entity": "vm",
			"attributes": map[string]any{"name": "n"}, "priority": 1}), 422, []string{"/items/0/priority"}},
		{"a policy of the wrong type", `{"policy": 1, "items": []}`, 422, []string{"/policy"}},
		{"no policy", map[string]any{"items": []any{createVM("a", "n", 2)}}, 422, []string{"/policy"}},
		{"an unknown policy", map[string]any{"policy": "some", "items": []any{createVM("a", "n", 2)}}, 422, []string{"/policy"}},
		{"no items", order(), 422, []string{"/items"}},
		{"too many items", order(many...), 422, []string{"/items"}},
		{"duplicate item ids", order(createVM("a", "n", 2), createVM("a", "m", 2)), 422, []string{"/items/1/id"}},
		{"an item id too long", order(createVM(strings.Repeat("a", 101), "n", 2)), 422, []string{"/items/0/id"}},
		{"an item id with a space", order(createVM("a b", "n", 2)), 422, []string{"/items/0/id"}},
		{"an unknown operation", order(map[string]any{"id": "a", "operation": "upsert", "service_entity": "vm"}), 422,
			[]string{"/items/0/operation"}},
		{"an unknown entity", order(map[string]any{"id": "a", "operation": "create", "service_entity": "nope",
			"attributes": map[string]any{}}), 422, []string{"/items/0/service_entity"}},
		{"an unknown dependency", order(createVM("a", "n", 2, "zz")), 422, []string{"/items/0/depends_on/0"}},
		{"a dependency on itself", order(createVM("a", "n", 2, "a")), 422, []string{"/items/0/depends_on/0"}},
		{"a cycle", order(createVM("a", "n", 2, "c"), createVM("b", "m", 2, "a"), createVM("c", "o", 2, "b")), 422,
			[]string{"/items/0/depends_on/0"}},
		{"an unknown attribute and a missing required one", order(map[string]any{"id": "a", "operation": "create",
			"service_entity": "vm", "attributes": map[string]any{"colour": "red"}}), 422,
			[]string{"/items/0/attributes/colour", "/items/0/attributes/name"}},
		{"an identity a live instance has", order(createVM("a", "live", 2)), 422, []string{"/items/0/attributes/name"}},
		{"an identity another create takes", order(createVM("a", "n", 2), createVM("b", "n", 3)), 422,
			[]string{"/items/1/attributes/name"}},
		{"an update of an unknown instance", order(map[string]any{"id": "a", "operation": "update", "service_entity": "vm",
			"instance": "ghost", "attributes": map[string]any{"memory": 3}}), 422, []string{"/items/0/instance"}},
		{"an update of an rw attribute", order(upd("a", map[string]any{"attributes": map[string]any{"name": "other"}})), 422,
			[]string{"/items/0/attributes/name"}},
		{"an update with nothing to change", order(upd("a", nil)), 422, []string{"/items/0/attributes"}},
		{"an edit with a bad path", order(upd("a", map[string]any{"edit": []any{map[string]any{"operation": "replace",
			"target": "memory[", "value": 3}}})), 422, []string{"/items/0/edit/0/target"}},
		{"two items on one instance", order(upd("a", map[string]any{"attributes": map[string]any{"memory": 3}}),
			map[string]any{"id": "b", "operation": "delete", "service_entity": "vm", "instance": "live"}), 422,
			[]string{"/items/1/instance"}},
		{"every bad item is listed", order(createVM("a", "n", 2, "nope"), createVM("ok", "fine", 2),
			map[string]any{"id": "c", "operation": "create", "service_entity": "vm", "attributes": map[string]any{"url": "x"}}),
			422, []string{"/items/0/depends_on/0", "/items/2/attributes/url"}},
	}
	for _, tc := range cases {
		t.Run(tc.why, func(t *testing.T) {
			var r lsmReply
			if s, ok := tc.body.(string); ok {
				r = rawPost(t, c, env, ordersPath, s)
			} else {
				r = lsmDo(t, c, env, http.MethodPost, ordersPath, "", tc.body)
			}
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
			p := r.problem(t)
			for _, f := range tc.fields {
				if !hasFieldError(p, f, "") {
					t.Errorf("no error at %s: %+v", f, p)
				}
			}
		})
	}
	t.Run("a body over 16 MiB", func(t *testing.T) {
		r := rawPost(t, c, env, ordersPath, `{"policy": "best_effort", "items": [], "pad": "`+strings.Repeat("x", 17<<20)+`"}`)
		if r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d %.300s", r.status, r.body)
		}
	})
	t.Run("an Idempotency-Key too long", func(t *testing.T) {
		r := lsmDo(t, c, env, http.MethodPost, ordersPath, strings.Repeat("k", 256), order(createVM("a", "n", 2)))
		if r.status != http.StatusBadRequest {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("a read token", func(t *testing.T) {
		reader := as(c, mint(t, c, "reader", "read"))
		r := lsmDo(t, reader, env, http.MethodPost, ordersPath, "", order(createVM("a", "n", 2)))
		if r.status != http.StatusForbidden {
			t.Fatalf("%d %s", r.status, r.body)
		}
		var list struct {
			Items []client.Order `json:"items"`
		}
		if err := lsmGet(t, reader, env, ordersPath, &list); err != nil {
			t.Errorf("a read token cannot list orders: %v", err)
		}
	})
	for _, q := range []string{"?status=bogus", "?limit=0", "?limit=x", "?after=nope"} {
		var out any
		if err := lsmGet(t, c, env, ordersPath+q, &out); status(err) != http.StatusUnprocessableEntity {
			t.Errorf("GET %s: %v", q, err)
		}
	}
	if err := lsmGet(t, c, env, ordersPath+"/not-an-id", new(any)); status(err) != http.StatusNotFound {
		t.Errorf("GET an order by a bad id: %v", err)
	}
	if err := lsmGet(t, c, env, ordersPath+"/01890000-0000-7000-8000-000000000000", new(any)); status(err) != http.StatusNotFound {
		t.Errorf("GET an unknown order: %v", err)
	}

	// Nothing was written by any refusal.
	var list struct {
		Items []client.Order `json:"items"`
	}
	if err := lsmGet(t, c, env, ordersPath, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("orders after refusals: %+v, %v", list.Items, err)
	}
	var insts struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm", &insts); err != nil || len(insts.Items) != 1 {
		t.Fatalf("instances after refusals: %+v, %v", insts.Items, err)
	}

	// An idempotent order: the repeat gets the first response, one order.
	body := order(createVM("k", "kilo", 2))
	first := lsmDo(t, c, env, http.MethodPost, ordersPath, "order-k", body)
	again := lsmDo(t, c, env, http.MethodPost, ordersPath, "order-k", body)
	var o, o2 client.Order
	_ = json.Unmarshal(first.body, &o)
	_ = json.Unmarshal(again.body, &o2)
	if first.status != http.StatusCreated || again.status != http.StatusCreated ||
		again.header.Get("Idempotent-Replayed") != "true" || o.ID == "" || o2.ID != o.ID {
		t.Fatalf("repeat: %d %s / %d %s", first.status, first.body, again.status, again.body)
	}
	other := lsmDo(t, c, env, http.MethodPost, ordersPath, "order-k", order(createVM("k", "lima", 2)))
	if other.status != http.StatusUnprocessableEntity {
		t.Errorf("the key for another body: %d %s", other.status, other.body)
	}
	if done := waitOrder(t, c, env, o.ID); done.Status != lsm.OrderSucceeded {
		t.Errorf("keyed order = %+v", done)
	}
	if err := lsmGet(t, c, env, ordersPath, &list); err != nil || len(list.Items) != 1 {
		t.Errorf("orders after the repeat: %+v, %v", list.Items, err)
	}
}

// rawPost posts body as it is, as JSON.
func rawPost(t *testing.T, c *client.Client, env, path, body string) lsmReply {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, c.Base+path, strings.NewReader(body))
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
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return lsmReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// replayOrder replays the history of an order's workflow (its last run)
// with the current code; INTEND_RECORD_ORDER_HISTORY=FILE also writes it
// there (workflows/testdata holds one, replayed by
// TestReplayCommittedHistories).
func replayOrder(t *testing.T, srv *server.Server, wfID string) {
	t.Helper()
	replayHistory(t, srv, wfID, "INTEND_RECORD_ORDER_HISTORY", func(r worker.WorkflowReplayer) { workflows.RegisterOrders(r) })
}

// replayInstance is replayOrder for a service instance's workflow
// (INTEND_RECORD_INSTANCE_HISTORY=FILE).
func replayInstance(t *testing.T, srv *server.Server, wfID string) {
	t.Helper()
	replayHistory(t, srv, wfID, "INTEND_RECORD_INSTANCE_HISTORY", func(r worker.WorkflowReplayer) { workflows.RegisterServiceInstance(r) })
}

func replayHistory(t *testing.T, srv *server.Server, wfID, recordVar string, register func(worker.WorkflowReplayer)) {
	t.Helper()
	ctx := context.Background()
	var h historypb.History
	it := srv.Temporal().GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	register(r)
	if err := r.ReplayWorkflowHistory(nil, &h); err != nil {
		t.Errorf("replay %s (%d events): %v", wfID, len(h.Events), err)
	}
	if file := os.Getenv(recordVar); file != "" {
		b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOrderStartedByTheReconciler: an order written without its workflow
// (the server died between the two, or Temporal was unreachable) is
// started by the reconciler, and runs to its end.
func TestOrderStartedByTheReconciler(t *testing.T) {
	c, _, dbURL := startServerDB(t)
	env := newEnv(t, c, "orderrec", nil)
	if err := uploadModel(t, c, env, lsmFileModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.GetEnvironment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	const id = "01937e0c-5b1e-7c3a-9f2e-3a1d0c6b9e21"
	if _, err := st.CreateOrder(ctx, e.ID, store.NewOrder{ID: id, Policy: lsm.OrderBestEffort, Status: lsm.OrderPending,
		Items: []store.NewOrderItem{{ItemID: "r", Operation: lsm.OpCreate, Entity: "vm",
			InstanceID: "6f1c2d3e-0000-4000-8000-0000000000aa",
			Spec:       json.RawMessage(`{"id": "r", "attributes": {"name": "rec", "memory": 3}}`)}}}, nil); err != nil {
		t.Fatal(err)
	}
	o := waitOrder(t, c, env, id)
	if o.Status != lsm.OrderSucceeded || o.Items[0].State != "up" {
		t.Fatalf("order = %+v", o)
	}
	waitState(t, c, env, "rec", "up")
}

// TestServerKilledDuringAnOrder: kill -9 the server while an order's
// items run, some done, some sending, some waiting for their instances.
// A new server takes the order's workflow up (Temporal kept it; its
// activities time out and run again): the order ends succeeded, and
// every item's create took effect once (one instance each, its log
// start → acknowledged → creating → up, its file deployed).
func TestServerKilledDuringAnOrder(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	args := []string{"server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn"}
	srv1 := startProc(t, args...)
	c := procClient(addr)
	waitHealthy(t, c, srv1)
	env := newEnv(t, c, "orderkill", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const n = 40
	items := make([]map[string]any, n)
	for i := range n {
		var deps []string
		if i%4 != 0 {
			deps = []string{fmt.Sprint(i - 1)} // chains of 4
		}
		items[i] = createVM(fmt.Sprint(i), letters(i), 1+i%9, deps...)
	}
	id := postOrder(t, c, env, lsm.OrderAllOrNothing, items...)
	// Kill at a moment: polled at a steady 20 ms, not backed off.
	wait.ForEvery(t, "five items of order "+id+" to succeed", 60*time.Second, 20*time.Millisecond, func() error {
		var o client.Order
		if err := lsmGet(t, c, env, ordersPath+"/"+id, &o); err != nil {
			t.Fatal(err)
		}
		if o.Counts[lsm.ItemSucceeded] < 5 {
			return fmt.Errorf("order counts %v\n%s", o.Counts, srv1.Out.String())
		}
		t.Logf("killed with %v", o.Counts)
		return nil
	})
	srv1.Kill()
	srv2 := startProc(t, args...)
	waitHealthy(t, c, srv2)
	o := waitOrder(t, c, env, id)
	if o.Status != lsm.OrderSucceeded {
		t.Fatalf("order after the restart: %s %v\n%s", o.Status, o.Counts, srv2.Out.String())
	}
	ids := map[string]string{}
	for i, it := range o.Items {
		ids[letters(i)] = it.InstanceID
	}
	checkCreatedOnce(t, c, env, root, n, ids)
	var page struct {
		Items []client.ServiceInstance `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/vm?limit=1000", &page); err != nil || len(page.Items) != n {
		t.Errorf("%d instances in the inventory (%v), want %d", len(page.Items), err, n)
	}
}
