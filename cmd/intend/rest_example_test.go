package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/rabbittest"
)

// TestRESTExampleDeploy runs `intend deploy` on examples/rest-rabbitmq
// against a real RabbitMQ: every object is on the server as the model
// says (the user logs in with the password of its secret; the global
// parameter holds the binding's id, a fact); a second deploy changes
// nothing; a managed field changed behind intend's back is the one entry
// of a dry-run (an unmanaged one is none) and a deploy --repair repairs
// it; a purged object is deleted.
func TestRESTExampleDeploy(t *testing.T) {
	r, err := rabbittest.Start(t.Context(), rabbittest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	const appPassword = "orders-Pa55-from-the-secret"
	t.Setenv("INTEND_SECRET_RABBITMQ_ADMIN", r.Password)
	t.Setenv("INTEND_SECRET_RABBITMQ_ORDERS", appPassword)

	const endpoint = "http://127.0.0.1:15672/api"
	dir, placeholder := copyExample(t, "rest-rabbitmq", endpoint)
	model := filepath.Join(dir, "main.cue")
	b, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	pointed := strings.NewReplacer(strconv.Quote(placeholder), strconv.Quote(r.API()),
		`admin:    "admin"`, `admin:    `+strconv.Quote(r.User)).Replace(string(b))
	if !strings.Contains(pointed, strconv.Quote(r.API())) || !strings.Contains(pointed, strconv.Quote(r.User)) {
		t.Fatalf("the example no longer has the endpoint %q and the admin user \"admin\" to point at the test server", endpoint)
	}
	if err := os.WriteFile(model, []byte(pointed), 0o644); err != nil {
		t.Fatal(err)
	}

	api := func(method, path string, body any, user, password string) (int, any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, r.API()+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(user, password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc any
		json.NewDecoder(resp.Body).Decode(&doc)
		return resp.StatusCode, doc
	}
	// get GETs path as the administrator and wants 200.
	get := func(path string) map[string]any {
		t.Helper()
		st, doc := api("GET", path, nil, r.User, r.Password)
		m, _ := doc.(map[string]any)
		if st != 200 || m == nil {
			t.Fatalf("GET %s: %d %v", path, st, doc)
		}
		return m
	}
	// want checks the fields of the object at path.
	want := func(path string, fields map[string]any) {
		t.Helper()
		got := get(path)
		for k, v := range fields {
			if !reflect.DeepEqual(got[k], v) {
				t.Errorf("GET %s: %s = %#v, want %#v", path, k, got[k], v)
			}
		}
	}
	const bindings = "/bindings/orders/e/orders.events/q/orders.audit"
	// binding returns the one binding of the audit queue to the events
	// exchange: its properties_key.
	binding := func() string {
		t.Helper()
		st, doc := api("GET", bindings, nil, r.User, r.Password)
		list, _ := doc.([]any)
		if st != 200 || len(list) != 1 {
			t.Fatalf("GET %s: %d, want one binding: %v", bindings, st, doc)
		}
		b := list[0].(map[string]any)
		if b["routing_key"] != "order.*" || !reflect.DeepEqual(b["arguments"], map[string]any{"x-origin": "intend"}) {
			t.Errorf("binding %v", b)
		}
		key, _ := b["properties_key"].(string)
		return key
	}
	deploy := func(what string, args ...string) string {
		t.Helper()
		out, err := runCmd(t, append([]string{"deploy", dir}, args...)...)
		if err != nil {
			t.Fatalf("%s: intend deploy %v: %v\n%s", what, args, err, out)
		}
		for _, secret := range []string{r.Password, appPassword} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the output shows a secret:\n%s", what, out)
			}
		}
		return out
	}
	contains := func(what, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", what, w, out)
			}
		}
	}
	// The first deploy: seven objects, then the parameter that waits for
	// the binding's fact.
	out := deploy("first deploy")
	contains("first deploy", out, "compiled rest-rabbitmq: 8 resources", "1 undefined",
		"7 deployed, 0 failed, 1 skipped", "facts arrived: 1 undefined resources are now defined",
		"1 deployed, 0 failed, 0 skipped")
	want("/vhosts/orders", map[string]any{"description": "orders service", "tags": []any{"orders"}})
	want("/users/orders-app", map[string]any{"tags": []any{"management"}})
	// A PUT of the user hashes its password again with a new salt: the
	// hash shows whether a deploy sent the user again.
	hash := get("/users/orders-app")["password_hash"]
	sameUser := func(what string) {
		t.Helper()
		if got := get("/users/orders-app")["password_hash"]; got != hash {
			t.Errorf("%s sent the user again (its password hash changed)", what)
		}
	}
	if st, doc := api("GET", "/whoami", nil, "orders-app", appPassword); st != 200 || doc.(map[string]any)["name"] != "orders-app" {
		t.Errorf("orders-app cannot log in with the password of its secret: %d %v", st, doc)
	}
	if st, _ := api("GET", "/whoami", nil, "orders-app", appPassword+"x"); st != 401 {
		t.Errorf("orders-app logs in with another password: %d", st)
	}
	want("/permissions/orders/orders-app", map[string]any{"configure": `^orders\.`, "write": `^orders\.`, "read": `^orders\.`})
	want("/policies/orders/audit-retention", map[string]any{"pattern": `^orders\.audit$`, "apply-to": "queues", "priority": 1.0,
		"definition": map[string]any{"max-length": 100000.0, "message-ttl": 604800000.0}})
	want("/exchanges/orders/orders.events", map[string]any{"type": "topic", "durable": true, "auto_delete": false})
	want("/queues/orders/orders.audit", map[string]any{"durable": true, "auto_delete": false,
		"arguments": map[string]any{"x-queue-type": "classic"}})
	key := binding()
	if !strings.HasPrefix(key, "order.%2A~") {
		t.Errorf("the binding's properties_key %q: RabbitMQ no longer derives it from the routing key and arguments", key)
	}
	want("/global-parameters/orders-topology", map[string]any{"value": map[string]any{
		"vhost": "orders", "exchange": "orders.events", "queue": "orders.audit", "audit_binding": key}})
	get(bindings + "/" + url.PathEscape(key)) // the fact is the binding's id

	out = deploy("second deploy")
	contains("second deploy", out, "8 resources, 0 changed", "0 deployed, 0 failed, 0 skipped")
	if strings.Contains(out, "facts arrived") {
		t.Errorf("second deploy: the parameter waited for its fact again:\n%s", out)
	}
	if again := binding(); again != key {
		t.Errorf("the second deploy made another binding: %q, was %q", again, key)
	}
	sameUser("the second deploy")

	// Behind intend's back: a managed field (max-length) and one left to
	// the server (priority).
	if st, doc := api("PUT", "/policies/orders/audit-retention", map[string]any{"pattern": `^orders\.audit$`, "apply-to": "queues",
		"priority": 7, "definition": map[string]any{"max-length": 5, "message-ttl": 604800000}}, r.User, r.Password); st != 204 {
		t.Fatalf("change the policy: %d %v", st, doc)
	}
	out = deploy("dry-run of the drift", "--dry-run")
	contains("dry-run of the drift", out, "modified    rest::Object[rabbitmq,name=policy-orders-audit]",
		"body/definition/max-length: 5 → 100000", "1 modified, 7 unmodified")
	if n := strings.Count(out, "body/"); n != 1 {
		t.Errorf("dry-run of the drift: %d changed fields, want 1:\n%s", n, out)
	}
	want("/policies/orders/audit-retention", map[string]any{"definition": map[string]any{"max-length": 5.0, "message-ttl": 604800000.0}})
	// A deploy deploys what changed in the model (nothing); --repair
	// re-verifies every object.
	out = deploy("deploy of the drift")
	contains("deploy of the drift", out, "0 deployed, 0 failed, 0 skipped")
	want("/policies/orders/audit-retention", map[string]any{"definition": map[string]any{"max-length": 5.0, "message-ttl": 604800000.0}})
	out = deploy("repair of the drift", "--repair")
	contains("repair of the drift", out, "repair request", "8 deployed, 0 failed, 0 skipped")
	sameUser("the repair")
	if again := binding(); again != key {
		t.Errorf("the repair made another binding: %q, was %q", again, key)
	}
	want("/policies/orders/audit-retention", map[string]any{"definition": map[string]any{"max-length": 100000.0, "message-ttl": 604800000.0}})

	// Purged: the policy is deleted; the rest stays.
	purged := strings.Replace(pointed, "\tpolicy: rest.#Object & _api & {\n", "\tpolicy: rest.#Object & _api & {\n\t\tpurged: true\n", 1)
	if purged == pointed {
		t.Fatal("the example no longer has the policy to purge")
	}
	if err := os.WriteFile(model, []byte(purged), 0o644); err != nil {
		t.Fatal(err)
	}
	out = deploy("deploy of the purge")
	contains("deploy of the purge", out, "8 resources, 1 changed", "1 deployed, 0 failed, 0 skipped")
	if st, doc := api("GET", "/policies/orders/audit-retention", nil, r.User, r.Password); st != 404 {
		t.Errorf("the purged policy is still there: %d %v", st, doc)
	}
	want("/vhosts/orders", map[string]any{"description": "orders service"})
	if again := binding(); again != key {
		t.Errorf("after the purge, binding %q, was %q", again, key)
	}
	out = deploy("deploy after the purge")
	contains("deploy after the purge", out, "0 deployed, 0 failed, 0 skipped")
}
