package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/rest"
	"github.com/intendhq/intend/internal/rabbittest"
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
	checkBodyDiff(t, out, map[string]adapters.Change{"body/tags": {From: []any{"management"}, To: []any{"monitoring"}}})
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

// checkBodyDiff checks the diff of an update: one entry per managed
// field that differs ("body/tags"), nothing else.
func checkBodyDiff(t testing.TB, out adapters.Outcome, want map[string]adapters.Change) {
	t.Helper()
	got, _ := json.Marshal(out.Diff)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("diff %s, want %s", got, exp)
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
	// Only the managed fields, one entry each: not apply-to nor priority.
	checkBodyDiff(t, out, map[string]adapters.Change{
		"body/definition": {From: map[string]any{"max-length": 10}, To: map[string]any{"max-length": 20}}})
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

// TestRabbitMQUnreachable points an object at a closed port: the server
// cannot be reached, so the resource is unavailable, not failed.
func TestRabbitMQUnreachable(t *testing.T) {
	t.Parallel()
	attrs := rabbitAttrs(t, map[string]any{"path": "/vhosts/x", "body": map[string]any{}})
	attrs["endpoint"] = "http://" + closedAddr(t) + "/api"
	_, _, err := apply(t, object("unreachable", attrs), false)
	if err == nil {
		t.Fatal("an unreachable server succeeded")
	}
	if c := adapters.ClassOf(err); c != adapters.ClassUnavailable {
		t.Errorf("class %s, want unavailable: %v", c, err)
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

// TestRabbitMQMutualTLS manages a vhost over the HTTPS listener, which
// requires a client certificate signed by the private CA: with the CA,
// the certificate and its key (a secret reference) it works, also with
// the server's name checked instead of its address; without the client
// certificate, without the CA or with another name, the error is
// permanent and shows no key.
func TestRabbitMQMutualTLS(t *testing.T) {
	t.Parallel()
	r := rabbit(t)
	vhost := uniq("tls")
	vh := func(tls map[string]any) adapters.Resource {
		return object("vhost-"+vhost, rabbitAttrs(t, map[string]any{
			"endpoint": r.APIS(),
			"path":     "/vhosts/" + vhost,
			"body":     map[string]any{"description": "over mutual TLS"},
			"tls":      tls,
		}))
	}
	full := map[string]any{"ca": r.CACert, "cert": r.ClientCert, "key": map[string]any{"secret": "env:" + rabbitClientKeyEnv}}
	mustApply(t, vh(full), false, adapters.OpCreate)
	if st, _ := rmq(t, "GET", "/vhosts/"+vhost, nil); st != 200 {
		t.Fatalf("GET the vhost made over TLS: %d", st)
	}
	named := maps.Clone(full)
	named["server_name"] = rabbittest.ServerName
	mustApply(t, vh(named), false, adapters.OpNone)
	for _, c := range []struct {
		why  string
		tls  map[string]any
		want string
	}{
		{"no client certificate", map[string]any{"ca": r.CACert}, "certificate required"},
		{"no CA", map[string]any{"cert": r.ClientCert, "key": full["key"]}, "certificate signed by unknown authority"},
		{"another name", merge(named, map[string]any{"server_name": "other.intend.test"}), "other.intend.test"},
	} {
		_, hc, err := apply(t, vh(c.tls), false)
		if err == nil {
			t.Errorf("%s: succeeded", c.why)
			continue
		}
		if adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %s error %v, want a permanent one saying %q", c.why, adapters.ClassOf(err), err, c.want)
		}
		if text := fmt.Sprint(err, hc.Logs()); strings.Contains(text, strings.TrimSpace(r.ClientKey)[40:80]) {
			t.Errorf("%s: the client key shows: %s", c.why, text)
		}
	}
	mustApply(t, purged(vh(full)), false, adapters.OpDelete)
}

func merge(a, b map[string]any) map[string]any {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// TestRabbitMQBindingFoundBySearch manages a binding, whose id (its
// properties_key) RabbitMQ derives: created by a POST to the collection,
// found by a search that matches its routing key, deleted by its id, the
// id published as a fact. A create repeated after the binding exists
// (as after a crash) makes no second one.
func TestRabbitMQBindingFoundBySearch(t *testing.T) {
	t.Parallel()
	q := uniq("bq")
	queue := object("queue-"+q, rabbitAttrs(t, map[string]any{"path": "/queues/%2F/" + q, "body": map[string]any{"durable": true}}))
	mustApply(t, queue, false, adapters.OpCreate)
	coll := "/bindings/%2F/e/amq.direct/q/" + q
	binding := object("binding-"+q, rabbitAttrs(t, map[string]any{
		"collection": coll,
		"search": map[string]any{
			"path": coll, "match": map[string]any{"/routing_key": "rk-" + q, "/destination": q},
			"id": "/properties_key", "item": coll + "/{id}",
		},
		"body":  map[string]any{"routing_key": "rk-" + q, "arguments": map[string]any{"x-intend": "1"}},
		"facts": map[string]any{"properties_key": "/properties_key"},
	}))
	mustApply(t, binding, true, adapters.OpCreate)
	_, hc := mustApply(t, binding, false, adapters.OpCreate)
	key, _ := hc.Facts()["properties_key"].(string)
	if key == "" {
		t.Fatalf("no properties_key fact: %v", hc.Facts())
	}
	if st, doc := rmq(t, "GET", coll+"/"+url.PathEscape(key), nil); st != 200 || doc["routing_key"] != "rk-"+q {
		t.Fatalf("GET the binding by the fact's id: %d %v", st, doc)
	}
	mustApply(t, binding, false, adapters.OpNone)
	hc = adapters.NewContext(adapters.WithSecrets(&adapters.Secrets{}))
	defer hc.Close()
	plain, err := hc.ResolveSecrets(binding)
	if err != nil {
		t.Fatal(err)
	}
	if err := (rest.Object{}).Create(t.Context(), hc, plain); err != nil {
		t.Fatalf("Create of an existing binding: %v", err)
	}
	st, list := rmqList(t, coll)
	if st != 200 || len(list) != 1 {
		t.Fatalf("after a repeated create, %d bindings (%d), want 1: %v", len(list), st, list)
	}
	mustApply(t, purged(binding), false, adapters.OpDelete)
	if _, list := rmqList(t, coll); len(list) != 0 {
		t.Fatalf("after the purge, bindings %v", list)
	}
	mustApply(t, purged(binding), false, adapters.OpNone)
	mustApply(t, purged(queue), false, adapters.OpDelete)
}

// rmqList GETs a list of the management API.
func rmqList(t testing.TB, path string) (int, []any) {
	t.Helper()
	r := rabbit(t)
	req, _ := http.NewRequest("GET", r.API()+path, nil)
	req.SetBasicAuth(r.User, r.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []any
	json.NewDecoder(resp.Body).Decode(&list)
	return resp.StatusCode, list
}

// TestRabbitMQRateIsPerAgentAndEndpoint observes 12 objects of one agent
// at once with limits {rate: 20, in_flight: 2}: they share the limiter,
// so the 12 GETs take at least half a second; another agent's are not
// held back by it.
func TestRabbitMQRateIsPerAgentAndEndpoint(t *testing.T) {
	t.Parallel()
	run := func(agent string, limits map[string]any) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 12 {
			r := object(fmt.Sprintf("rate-%d", i), rabbitAttrs(t, map[string]any{
				"path": "/vhosts/" + uniq("absent"), "body": map[string]any{}, "limits": limits,
			}))
			r.ID.Agent = agent
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := apply(t, r, true); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	if d := run(uniq("agent-limited"), map[string]any{"rate": 20, "in_flight": 2}); d < 500*time.Millisecond {
		t.Errorf("12 requests at 20 per second took %s, want at least 500 ms", d)
	}
	if d := run(uniq("agent-free"), map[string]any{}); d > 5*time.Second {
		t.Errorf("12 requests without a limit took %s", d)
	}
}

// TestNoAnswerIsTransient points an object at a socket that accepts
// connections and never answers: after its timeout, the error is
// transient (the server may have acted), not unavailable.
func TestNoAnswerIsTransient(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel completes the handshakes
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	attrs := rabbitAttrs(t, map[string]any{"endpoint": "http://" + l.Addr().String() + "/api", "path": "/vhosts/x", "body": map[string]any{}, "timeout": 0.3})
	start := time.Now()
	_, _, err = apply(t, object("no-answer", attrs), false)
	if err == nil || adapters.ClassOf(err) != adapters.ClassTransient || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("error %v (%s), want a transient one saying there was no answer within 300ms", err, adapters.ClassOf(err))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}
