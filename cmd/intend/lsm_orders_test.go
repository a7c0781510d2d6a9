package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
)

// TestLSMOrderCommands: intend lsm order sends an order and, with
// --wait, prints every item's outcome (exit 1 unless it succeeded);
// intend lsm order show and intend lsm orders read them back; bad
// command lines and refused orders fail with their exit codes.
func TestLSMOrderCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, dir, target := vmServer(t, "lsmo", "<=64")
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := write("good.json", `{"policy": "all_or_nothing", "items": [
		{"id": "a", "operation": "create", "service_entity": "vm", "attributes": {"name": "alpha"}},
		{"id": "b", "operation": "create", "service_entity": "vm", "attributes": {"name": "beta", "memory": 4},
		 "depends_on": ["a"]}]}`)
	out := ok(t, vars, "lsm", "order", good, "--wait")
	id := field(t, out, "order")
	if field(t, out, "status") != lsm.OrderSucceeded {
		t.Fatalf("order --wait:\n%s", out)
	}
	if row := rowOf(t, out, "b"); len(row) < 7 || row[4] != lsm.ItemSucceeded || row[5] != "up" {
		t.Errorf("item b: %v\n%s", row, out)
	}
	if b, err := os.ReadFile(filepath.Join(target, "beta.conf")); err != nil || string(b) != "memory=4\n" {
		t.Errorf("beta.conf = %q, %v", b, err)
	}

	// best_effort with an item the model refuses: exit 1, the outcome
	// printed first.
	mixed := write("mixed.json", `{"policy": "best_effort", "items": [
		{"id": "up", "operation": "update", "service_entity": "vm", "instance": "alpha", "attributes": {"memory": 8}},
		{"id": "big", "operation": "create", "service_entity": "vm", "attributes": {"name": "gamma", "memory": 100}}]}`)
	r := fails(t, vars, exitFailed, []string{"partially_failed", "1 of 2 items succeeded"}, "lsm", "order", mixed, "--wait")
	if row := rowOf(t, r.out, "big"); len(row) < 6 || row[4] != lsm.ItemFailed || row[5] != "rejected" {
		t.Errorf("item big: %v\n%s", row, r.out)
	}

	// Read back: the list, newest first, and one order.
	var orders []client.Order
	jsonOf(t, ok(t, vars, "lsm", "orders", "--json"), &orders)
	if len(orders) != 2 || orders[1].ID != id || orders[0].Status != lsm.OrderPartiallyFailed {
		t.Errorf("orders = %+v", orders)
	}
	// -o wide adds the failed items, who asked and when it started.
	out = ok(t, vars, "lsm", "orders", "-o", "wide")
	// (A time is two fields.)
	if row := rowOf(t, out, orders[0].ID); len(row) != 13 || row[9] != "1" || row[10] != orText(orders[0].RequestedBy, "-") {
		t.Errorf("orders -o wide row %v\n%s", row, out)
	}
	out = ok(t, vars, "lsm", "orders", "--status", "succeeded")
	if !strings.Contains(out, id) || strings.Contains(out, orders[0].ID) {
		t.Errorf("orders --status succeeded:\n%s", out)
	}
	out = ok(t, vars, "lsm", "order", "show", id)
	if field(t, out, "status") != lsm.OrderSucceeded || len(rowOf(t, out, "a")) < 6 {
		t.Errorf("order show:\n%s", out)
	}

	// Without --wait: the id, at once; the same key again: the same order.
	one := write("one.json", `{"policy": "best_effort", "items": [
		{"id": "d", "operation": "create", "service_entity": "vm", "attributes": {"name": "delta"}}]}`)
	first := field(t, ok(t, vars, "lsm", "order", one, "--idempotency-key", "delta-1"), "order")
	if again := field(t, ok(t, vars, "lsm", "order", one, "--idempotency-key", "delta-1"), "order"); again != first {
		t.Errorf("the repeat made order %s, not %s", again, first)
	}

	// Refusals.
	fails(t, vars, exitUsage, []string{"read the order"}, "lsm", "order", filepath.Join(dir, "missing.json"))
	fails(t, vars, exitUsage, nil, "lsm", "order")
	fails(t, vars, exitUsage, nil, "lsm", "order", one, "--wait=maybe")
	fails(t, vars, exitUsage, nil, "lsm", "order", one, "--timeout", "soon")
	fails(t, vars, exitFailed, []string{"400"}, "lsm", "order", write("bad.json", `{"policy": `))
	fails(t, vars, exitFailed, []string{"422", "/items/0/depends_on/0"}, "lsm", "order", write("cycle.json",
		`{"policy": "best_effort", "items": [{"id": "x", "operation": "delete", "service_entity": "vm", "instance": "alpha", "depends_on": ["x"]}]}`))
	fails(t, vars, exitFailed, []string{"404"}, "lsm", "order", "show", "not-an-order")
	fails(t, vars, exitFailed, []string{"422", "status"}, "lsm", "orders", "--status", "done")
	fails(t, vars, exitUsage, nil, "lsm", "orders", "extra")
}
