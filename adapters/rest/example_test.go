package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/compiler"
)

// TestRabbitMQDocExample compiles the RabbitMQ example of docs/adapters.md
// (pointed at the test server) with the real compiler and deploys what it
// exports, twice: the second deploy has nothing to do. Then a change of
// the policy behind intend's back is repaired, and the user's fact is
// there.
func TestRabbitMQDocExample(t *testing.T) {
	t.Parallel()
	r := rabbit(t)
	doc, err := os.ReadFile("../../docs/adapters.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "### Example: RabbitMQ")
	_, after, ok2 := strings.Cut(after, "```cue\n")
	model, _, ok3 := strings.Cut(after, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no CUE block under \"### Example: RabbitMQ\" in docs/adapters.md")
	}
	model = strings.NewReplacer(`"http://127.0.0.1:15672/api"`, fmt.Sprintf("%q", r.API()), `user: "admin"`, fmt.Sprintf("user: %q", r.User)).Replace(model)
	os.Setenv("INTEND_SECRET_RABBIT_ADMIN", r.Password)
	os.Setenv("INTEND_SECRET_RABBIT_ORDERS", "orders-Pa55")
	dir := t.TempDir()
	for file, text := range map[string]string{"intend.yaml": "name: example\n", "main.cue": model} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compiler.Compile(t.Context(), compiler.Options{Dir: dir})
	if err != nil {
		t.Fatalf("the example does not compile: %v", err)
	}
	byName := map[string]adapters.Resource{}
	for _, cr := range res.Resources {
		id, err := resource.Parse(cr.ID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(cr.Attributes)
		attrs := map[string]any{}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // as the executor decodes them
		if err := dec.Decode(&attrs); err != nil {
			t.Fatal(err)
		}
		id.Agent = testAgent
		byName[id.Value] = adapters.Resource{ID: id, Attributes: attrs}
	}
	order := []string{"vhost-orders", "user-orders", "permissions-orders", "policy-orders-limit"}
	if len(byName) != len(order) {
		t.Fatalf("the example exports %d resources, want %d", len(byName), len(order))
	}
	for _, want := range []adapters.Operation{adapters.OpCreate, adapters.OpNone} {
		for _, name := range order {
			mustApply(t, byName[name], false, want)
		}
	}
	if st, doc := rmq(t, "GET", "/whoami", nil, "orders", "orders-Pa55"); st != 200 {
		t.Fatalf("the example's user cannot log in: %d %v", st, doc)
	}
	if st, _ := rmq(t, "PUT", "/policies/orders/limit", map[string]any{"pattern": "^orders\\.", "definition": map[string]any{"max-length": 5}}); st != 204 {
		t.Fatalf("change the policy: %d", st)
	}
	_, hc := mustApply(t, byName["policy-orders-limit"], false, adapters.OpUpdate)
	checkFieldLog(t, hc, "/definition")
	_, hc = mustApply(t, byName["user-orders"], false, adapters.OpNone)
	if got := hc.Facts()["hashing"]; got != "rabbit_password_hashing_sha256" {
		t.Errorf("fact hashing %v, want rabbit_password_hashing_sha256", got)
	}
	for i := len(order) - 1; i >= 0; i-- {
		mustApply(t, purged(byName[order[i]]), false, adapters.OpDelete)
	}
}
