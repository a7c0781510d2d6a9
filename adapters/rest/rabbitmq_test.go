package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/rest"
)

var rabbitSeq atomic.Int64

// uniq returns a name no other test uses.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), rabbitSeq.Add(1))
}

// rabbitAttrs returns the attributes every object on the test server has,
// merged with attrs: the endpoint and the administrator's credentials (the
// password a secret reference).
func rabbitAttrs(t testing.TB, attrs map[string]any) map[string]any {
	r := rabbit(t)
	out := map[string]any{
		"endpoint": r.API(),
		"auth":     map[string]any{"basic": map[string]any{"user": r.User, "password": map[string]any{"secret": "env:" + rabbitPasswordEnv}}},
	}
	for k, v := range attrs {
		out[k] = v
	}
	return out
}

// rmq calls the management API directly, as someone changing things
// behind intend's back, as user (the administrator when empty).
func rmq(t testing.TB, method, path string, body any, user ...string) (int, map[string]any) {
	t.Helper()
	r := rabbit(t)
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.API()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(user) == 2 {
		req.SetBasicAuth(user[0], user[1])
	} else {
		req.SetBasicAuth(r.User, r.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	json.Unmarshal(b, &doc)
	return resp.StatusCode, doc
}

// userObject is a RabbitMQ user whose password, a write-only field, comes
// from the environment variable passwordEnv.
func userObject(t testing.TB, name, passwordEnv string, tags ...any) adapters.Resource {
	return object("user-"+name, rabbitAttrs(t, map[string]any{
		"path":       "/users/" + url.PathEscape(name),
		"body":       map[string]any{"tags": tags},
		"write_only": map[string]any{"/password": map[string]any{"secret": "env:" + passwordEnv}},
	}))
}

// TestRabbitMQUser manages a user through its whole life: create, no-op
// (the server's password_hash, hashing_algorithm and limits are not
// managed, so they never drift), drift repaired, a dry-run that changes
// nothing, update, delete. The password is write-only: set, never
// compared, and the user can log in with it.
func TestRabbitMQUser(t *testing.T) {
	t.Parallel()
	name := uniq("bob")
	const pwEnv = "INTEND_SECRET_TEST_BOB_PASSWORD"
	password := "bob-Pa55-" + name
	os.Setenv(pwEnv, password) // t.Setenv refuses parallel tests; the name is this test's
	user := userObject(t, name, pwEnv, "monitoring")

	mustApply(t, user, true, adapters.OpCreate)
	if st, _ := rmq(t, "GET", "/users/"+name, nil); st != 404 {
		t.Fatalf("after a dry-run of the create, GET the user: %d, want 404", st)
	}
	mustApply(t, user, false, adapters.OpCreate)
	if st, doc := rmq(t, "GET", "/whoami", nil, name, password); st != 200 || doc["name"] != name {
		t.Fatalf("the user cannot log in with its password: %d %v", st, doc)
	}
	mustApply(t, user, false, adapters.OpNone)

	// Drift: someone changes the tags (keeping the password hash).
	_, doc := rmq(t, "GET", "/users/"+name, nil)
	if st, _ := rmq(t, "PUT", "/users/"+name, map[string]any{"password_hash": doc["password_hash"], "tags": "management"}); st != 204 {
		t.Fatalf("change the user behind intend's back: %d", st)
	}
	out, hc := mustApply(t, user, true, adapters.OpUpdate)
	checkBodyDiff(t, out, map[string]any{"tags": []any{"management"}}, map[string]any{"tags": []any{"monitoring"}})
	checkFieldLog(t, hc, "/tags")
	if _, doc := rmq(t, "GET", "/users/"+name, nil); fmt.Sprint(doc["tags"]) != "[management]" {
		t.Fatalf("a dry-run changed the user: tags %v", doc["tags"])
	}
	mustApply(t, user, false, adapters.OpUpdate)
	if _, doc := rmq(t, "GET", "/users/"+name, nil); fmt.Sprint(doc["tags"]) != "[monitoring]" {
		t.Fatalf("drift not repaired: tags %v", doc["tags"])
	}
	mustApply(t, user, false, adapters.OpNone)

	// Update.
	updated := userObject(t, name, pwEnv, "monitoring", "policymaker")
	mustApply(t, updated, false, adapters.OpUpdate)
	if _, doc := rmq(t, "GET", "/users/"+name, nil); fmt.Sprint(doc["tags"]) != "[monitoring policymaker]" {
		t.Fatalf("not updated: tags %v", doc["tags"])
	}
	if st, _ := rmq(t, "GET", "/whoami", nil, name, password); st != 200 {
		t.Fatalf("the password did not survive the update: %d", st)
	}
	mustApply(t, updated, false, adapters.OpNone)

	// Delete.
	mustApply(t, purged(updated), true, adapters.OpDelete)
	if st, _ := rmq(t, "GET", "/users/"+name, nil); st != 200 {
		t.Fatalf("a dry-run of the purge deleted the user: %d", st)
	}
	mustApply(t, purged(updated), false, adapters.OpDelete)
	if st, _ := rmq(t, "GET", "/users/"+name, nil); st != 404 {
		t.Fatalf("after the purge, GET the user: %d, want 404", st)
	}
	mustApply(t, purged(updated), false, adapters.OpNone)
}

// checkBodyDiff checks the diff of an update: the body attribute alone,
// with from and to holding the managed fields only.
func checkBodyDiff(t testing.TB, out adapters.Outcome, from, to map[string]any) {
	t.Helper()
	if names := out.Diff.Names(); len(names) != 1 || names[0] != "body" {
		t.Fatalf("diff of %v, want body only", names)
	}
	c := out.Diff["body"]
	got, _ := json.Marshal(map[string]any{"from": c.From, "to": c.To})
	want, _ := json.Marshal(map[string]any{"from": from, "to": to})
	if string(got) != string(want) {
		t.Errorf("diff of body %s, want %s", got, want)
	}
}

// checkFieldLog checks that the attempt logged the managed field that
// differs, one line for it.
func checkFieldLog(t testing.TB, hc *adapters.Context, field string) {
	t.Helper()
	for _, l := range hc.Logs() {
		if l.Message == "field differs" && l.Attrs["field"] == field {
			return
		}
	}
	t.Errorf("no \"field differs\" line for %s in %v", field, hc.Logs())
}

// TestRabbitMQVhostAndPolicy manages a vhost and a policy in it, with
// managed fields named (the policy's definition is managed as a whole
// object, its apply-to and priority left to the server), updated with a
// JSON body that the server completes with fields of its own.
func TestRabbitMQVhostAndPolicy(t *testing.T) {
	t.Parallel()
	vhost := uniq("vh")
	vh := object("vhost-"+vhost, rabbitAttrs(t, map[string]any{
		"path": "/vhosts/" + vhost,
		"body": map[string]any{"description": "test vhost", "tags": []any{"a", "b"}},
	}))
	mustApply(t, vh, false, adapters.OpCreate)
	mustApply(t, vh, false, adapters.OpNone)

	policy := func(maxLength int) adapters.Resource {
		return object("policy-"+vhost, rabbitAttrs(t, map[string]any{
			"path":    "/policies/" + vhost + "/limit",
			"body":    map[string]any{"pattern": "^q\\.", "definition": map[string]any{"max-length": maxLength}, "apply-to": "queues", "priority": 1},
			"managed": []any{"/pattern", "/definition"},
		}))
	}
	mustApply(t, policy(10), false, adapters.OpCreate)
	mustApply(t, policy(10), false, adapters.OpNone)
	// priority is not managed: a change of it on the server is no drift.
	if st, _ := rmq(t, "PUT", "/policies/"+vhost+"/limit", map[string]any{"pattern": "^q\\.", "definition": map[string]any{"max-length": 10}, "priority": 7}); st != 204 {
		t.Fatalf("change the policy's priority: %d", st)
	}
	mustApply(t, policy(10), false, adapters.OpNone)
	out, _ := mustApply(t, policy(20), false, adapters.OpUpdate)
	checkBodyDiff(t, out,
		map[string]any{"apply-to": "queues", "definition": map[string]any{"max-length": 10}, "pattern": "^q\\.", "priority": 1},
		map[string]any{"apply-to": "queues", "definition": map[string]any{"max-length": 20}, "pattern": "^q\\.", "priority": 1})
	if _, doc := rmq(t, "GET", "/policies/"+vhost+"/limit", nil); fmt.Sprint(doc["definition"]) != "map[max-length:20]" {
		t.Fatalf("policy not updated: %v", doc)
	}
	mustApply(t, purged(policy(20)), false, adapters.OpDelete)
	mustApply(t, purged(vh), false, adapters.OpDelete)
	if st, _ := rmq(t, "GET", "/vhosts/"+vhost, nil); st != 404 {
		t.Fatalf("after the purge, GET the vhost: %d, want 404", st)
	}
}

// TestRabbitMQRefusalIsPermanentWithItsReason changes a queue's durable
// flag, which RabbitMQ refuses with a 400 and a reason: the error is
// permanent and quotes the reason.
func TestRabbitMQRefusalIsPermanentWithItsReason(t *testing.T) {
	t.Parallel()
	q := uniq("q")
	queue := func(durable bool) adapters.Resource {
		return object("queue-"+q, rabbitAttrs(t, map[string]any{
			"path": "/queues/%2F/" + q,
			"body": map[string]any{"durable": durable, "arguments": map[string]any{"x-max-length": 5}},
		}))
	}
	mustApply(t, queue(true), false, adapters.OpCreate)
	mustApply(t, queue(true), false, adapters.OpNone)
	out, _, err := apply(t, queue(false), false)
	if err == nil {
		t.Fatalf("changing durable succeeded: %+v", out)
	}
	if adapters.ClassOf(err) != adapters.ClassPermanent {
		t.Errorf("class %s, want permanent: %v", adapters.ClassOf(err), err)
	}
	for _, want := range []string{"400 Bad Request", "bad_request", "inequivalent arg 'durable'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not hold %q", err, want)
		}
	}
	mustApply(t, purged(queue(true)), false, adapters.OpDelete)
}

// TestRabbitMQUnreachable points an object at a closed port: no answer is
// not a refusal of the intent, so the error is not permanent.
func TestRabbitMQUnreachable(t *testing.T) {
	t.Parallel()
	attrs := rabbitAttrs(t, map[string]any{"path": "/vhosts/x", "body": map[string]any{}})
	attrs["endpoint"] = "http://" + closedAddr(t) + "/api"
	_, _, err := apply(t, object("unreachable", attrs), false)
	if err == nil {
		t.Fatal("an unreachable server succeeded")
	}
	if c := adapters.ClassOf(err); c == adapters.ClassPermanent {
		t.Errorf("class %s, want one that is retried: %v", c, err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not say the connection was refused", err)
	}
}

// TestRabbitMQSecretsNeverShown makes a create fail (RabbitMQ answers 500
// to numeric tags) and checks that neither the administrator's password
// (auth) nor the user's (write_only) is in the error, the diff or the
// log lines, of a dry-run nor of the failed create.
func TestRabbitMQSecretsNeverShown(t *testing.T) {
	t.Parallel()
	r := rabbit(t)
	name := uniq("eve")
	const pwEnv = "INTEND_SECRET_TEST_EVE_PASSWORD"
	password := "eve-Secret-" + name
	os.Setenv(pwEnv, password)
	bad := userObject(t, name, pwEnv)
	bad.Attributes["body"] = map[string]any{"tags": 5}
	for _, dry := range []bool{true, false} {
		out, hc, err := apply(t, bad, dry)
		if !dry && err == nil {
			t.Fatal("the create of a user with numeric tags succeeded")
		}
		text, _ := json.Marshal(map[string]any{"diff": out.Diff, "logs": hc.Logs(), "facts": hc.Facts()})
		all := string(text)
		if err != nil {
			all += err.Error()
		}
		for _, secret := range []string{password, r.Password} {
			if strings.Contains(all, secret) {
				t.Errorf("dry-run %v: a secret shows: %s", dry, all)
			}
		}
		if !dry && (adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "500")) {
			t.Errorf("want RabbitMQ's 500, transient: %s: %v", adapters.ClassOf(err), err)
		}
	}
	// What the executor records of the create's diff: auth and write_only
	// are sensitive (size and hash only).
	want := map[string]bool{"auth": true, "tls": true, "write_only": true}
	for _, a := range (rest.Object{}).SensitiveAttributes() {
		delete(want, a)
	}
	if len(want) > 0 {
		t.Errorf("not declared sensitive: %v", want)
	}
}

// TestRabbitMQConformance runs the conformance suite on a vhost.
func TestRabbitMQConformance(t *testing.T) {
	t.Parallel()
	vhost := uniq("conf")
	vh := func(description string, extra map[string]any) adapters.Resource {
		attrs := rabbitAttrs(t, map[string]any{
			"path": "/vhosts/" + vhost,
			"body": map[string]any{"description": description, "tags": []any{"conformance"}},
		})
		for k, v := range extra {
			attrs[k] = v
		}
		return object("vhost-"+vhost, attrs)
	}
	conformance.Run(t, conformance.Case{
		Handler: rest.Object{},
		Desired: vh("first", nil),
		Updated: vh("second", nil),
		Invalid: map[string]adapters.Resource{
			"endpoint": vh("x", map[string]any{"endpoint": "ftp://127.0.0.1/api"}),
			"managed":  vh("x", map[string]any{"managed": []any{"/nothere"}}),
			"update":   vh("x", map[string]any{"update": map[string]any{"format": "json-patch", "method": "PUT"}}),
			"body":     vh("x", map[string]any{"body": []any{"not", "an", "object"}}),
		},
		Exists: func(t testing.TB) bool {
			st, _ := rmq(t, "GET", "/vhosts/"+vhost, nil)
			if st != 200 && st != 404 {
				t.Fatalf("GET the vhost: %d", st)
			}
			return st == 200
		},
	})
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
