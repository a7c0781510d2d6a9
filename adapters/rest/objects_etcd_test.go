package rest_test

// The rest:: adapter against a real etcd 3.4 (internal/etcdtest), through
// its v3 JSON gateway: a key is found by a POST search with a body (an
// absent key is a range answer without "kvs"), keys and values travel in
// base64, errors are {"error","code","message"}, and the TLS variant needs
// a client certificate from a private CA.
//
// This file also holds the helpers of the tests against the other real
// servers (*_alertmanager_test.go, *_nginx_test.go); they are prefixed
// srv so as not to meet the names of the adapter's own tests.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/adapters/rest"
	"github.com/intendhq/intend/internal/childproc"
	"github.com/intendhq/intend/internal/etcdtest"
	"github.com/intendhq/intend/internal/tlsfiles/certtest"
)

// srvAgent is the agent of every object of these tests.
const srvAgent = "apis"

// srvObject returns the desired state of the rest::Object name.
func srvObject(name string, attrs map[string]any, purged bool) adapters.Resource {
	a := map[string]any{"name": name}
	maps.Copy(a, attrs)
	return adapters.Resource{
		ID:         resource.ID{Type: rest.ObjectType, Agent: srvAgent, Attribute: "name", Value: name},
		Attributes: a, Purged: purged,
	}
}

// srvSecrets resolves env: secret references from vars, not the process
// environment.
func srvSecrets(vars map[string]string) adapters.ContextOption {
	return adapters.WithSecrets(&adapters.Secrets{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
}

// srvRun is one attempt of the engine on r.
func srvRun(r adapters.Resource, dryRun bool, opts ...adapters.ContextOption) (adapters.Outcome, *adapters.Context, error) {
	hc := adapters.NewContext(opts...)
	defer hc.Close()
	out, err := adapters.Run(context.Background(), rest.Object{}, hc, r, dryRun)
	return out, hc, err
}

// srvApply runs an attempt that must succeed with the operation want, and
// returns its outcome and context.
func srvApply(t *testing.T, r adapters.Resource, dryRun bool, want adapters.Operation, opts ...adapters.ContextOption) (adapters.Outcome, *adapters.Context) {
	t.Helper()
	out, hc, err := srvRun(r, dryRun, opts...)
	if err != nil {
		t.Fatalf("%s (dry-run %v): %v\nlog: %s", r.ID, dryRun, err, srvJSON(hc.Logs()))
	}
	if out.Action != want {
		t.Fatalf("%s (dry-run %v): the engine decided %q, want %q; diff %s\nlog: %s",
			r.ID, dryRun, out.Action, want, srvJSON(out.Diff), srvJSON(hc.Logs()))
	}
	return out, hc
}

// srvFail runs an attempt that must fail with an error of class want, and
// returns the attempt's log as text and the error.
func srvFail(t *testing.T, r adapters.Resource, dryRun bool, want adapters.Class, opts ...adapters.ContextOption) (string, error) {
	t.Helper()
	out, hc, err := srvRun(r, dryRun, opts...)
	if err == nil {
		t.Fatalf("%s (dry-run %v): succeeded (%q), want a %s error", r.ID, dryRun, out.Action, want)
	}
	if got := adapters.ClassOf(err); got != want {
		t.Fatalf("%s (dry-run %v): %v is %s, want %s", r.ID, dryRun, err, got, want)
	}
	return srvJSON(out.Diff) + srvJSON(hc.Logs()), err
}

// srvFieldLogged reports whether the attempt logged that field differs.
func srvFieldLogged(hc *adapters.Context, field string) bool {
	for _, l := range hc.Logs() {
		if l.Message == "field differs" && l.Attrs["field"] == field {
			return true
		}
	}
	return false
}

func srvJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// srvClosedURL is an http:// URL where nothing listens.
func srvClosedURL(t *testing.T) string {
	t.Helper()
	port, err := childproc.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// etcdKey returns the attributes of an etcd key as a rest::Object: found
// by a range search (POST with a body), created and updated by a put,
// deleted by a deleterange; absent when the range has no kvs.
func etcdKey(endpoint, key, value string) map[string]any {
	k := etcdtest.B64(key)
	return map[string]any{
		"endpoint": endpoint,
		"search": map[string]any{
			"path": "/v3/kv/range", "method": "POST", "body": map[string]any{"key": k},
			"items": "/kvs", "match": map[string]any{"/key": k},
		},
		"collection": "/v3/kv/put",
		"update":     map[string]any{"method": "POST", "path": "/v3/kv/put"},
		"delete":     map[string]any{"method": "POST", "path": "/v3/kv/deleterange", "body": map[string]any{"key": k}},
		"body":       map[string]any{"key": k, "value": etcdtest.B64(value)},
		"facts":      map[string]any{"mod_revision": "/mod_revision"},
	}
}

// TestEtcdKeyLifecycle: create, no-op, drift repair, update and delete of
// an etcd key, each after its dry-run, checked on the server; the fields
// etcd adds (revisions, version) never drift, and the live object's
// mod_revision is published as a fact.
func TestEtcdKeyLifecycle(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	const key = "/intend/app/config"
	desired := srvObject("app-config", etcdKey(s.URL, key, `{"replicas":3}`), false)

	srvApply(t, desired, true, adapters.OpCreate)
	if _, ok := s.Get(t, key); ok {
		t.Fatalf("the dry-run created %s", key)
	}
	_, hc := srvApply(t, desired, false, adapters.OpCreate)
	if v, ok := s.Get(t, key); !ok || v != `{"replicas":3}` {
		t.Fatalf("after create, etcd holds %q %v (the value is base64 in the body, plain in etcd)", v, ok)
	}
	rev1, _ := hc.Facts()["mod_revision"].(string)
	if rev1 == "" {
		t.Fatalf("no mod_revision fact after the create: %v", hc.Facts())
	}
	srvApply(t, desired, false, adapters.OpNone)

	// Someone changes the value: dry-run shows the field, apply repairs it.
	s.Put(t, key, `{"replicas":1}`)
	out, hc := srvApply(t, desired, true, adapters.OpUpdate)
	if !srvFieldLogged(hc, "/value") || srvFieldLogged(hc, "/key") {
		t.Errorf("the dry-run of the drift logs %s, want /value (and not /key) as differing", srvJSON(hc.Logs()))
	}
	if len(out.Diff) == 0 {
		t.Errorf("the dry-run of the drift reports no diff")
	}
	srvApply(t, desired, false, adapters.OpUpdate)
	if v, _ := s.Get(t, key); v != `{"replicas":3}` {
		t.Fatalf("after the repair, etcd holds %q", v)
	}

	updated := srvObject("app-config", etcdKey(s.URL, key, "bytes \x00\xff\n that are not text"), false)
	srvApply(t, updated, false, adapters.OpUpdate)
	if v, _ := s.Get(t, key); v != "bytes \x00\xff\n that are not text" {
		t.Fatalf("after the update, etcd holds %q", v)
	}
	_, hc = srvApply(t, updated, false, adapters.OpNone)
	if rev2, _ := hc.Facts()["mod_revision"].(string); rev2 == "" || rev2 == rev1 {
		t.Errorf("mod_revision fact %q after the update, want a new one (was %q)", rev2, rev1)
	}

	gone := srvObject("app-config", etcdKey(s.URL, key, ""), true)
	srvApply(t, gone, true, adapters.OpDelete)
	srvApply(t, gone, false, adapters.OpDelete)
	if _, ok := s.Get(t, key); ok {
		t.Fatalf("%s is still in etcd after the delete", key)
	}
	srvApply(t, gone, false, adapters.OpNone)
}

// TestEtcdConformance runs the adapter conformance suite on an etcd key.
func TestEtcdConformance(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	const key = "/intend/conformance"
	noMatch := etcdKey(s.URL, key, "v1")
	noMatch["search"] = map[string]any{"path": "/v3/kv/range", "method": "POST", "body": map[string]any{"key": etcdtest.B64(key)}, "items": "/kvs"}
	conformance.Run(t, conformance.Case{
		Handler: rest.Object{},
		Desired: srvObject("conformance", etcdKey(s.URL, key, "v1"), false),
		Updated: srvObject("conformance", etcdKey(s.URL, key, "v2"), false),
		Invalid: map[string]adapters.Resource{
			// A search must say which item is the object.
			"search": srvObject("conformance", noMatch, false),
		},
		Exists: func(t testing.TB) bool { _, ok := s.Get(t, key); return ok },
	})
}

// TestEtcdError: etcd's own JSON error ({"error","code","message"}; here a
// put naming a lease that does not exist, answered 404) is a permanent
// error quoting its message, and nothing is created.
func TestEtcdError(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	a := etcdKey(s.URL, "/leased", "v")
	a["body"].(map[string]any)["lease"] = "12345"
	a["managed"] = []any{"/value"}
	_, err := srvFail(t, srvObject("leased", a, false), false, adapters.ClassPermanent)
	if !strings.Contains(err.Error(), "etcdserver: requested lease not found") || !strings.Contains(err.Error(), "404") {
		t.Errorf("error %q does not quote etcd's status and message", err)
	}
	if _, ok := s.Get(t, "/leased"); ok {
		t.Errorf("the failed put created the key")
	}
}

// TestEtcdMutualTLS: over HTTPS with a private CA, the object is managed
// with the client certificate (its key a secret reference); a certificate
// from another CA, or none, is refused by etcd, and a server certificate
// from an unknown CA by the adapter: permanent errors (a retry cannot fix
// a certificate), that never quote the key.
func TestEtcdMutualTLS(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t, etcdtest.WithTLS())
	other := certtest.NewCA(t)
	strangerCert, strangerKey := other.Leaf(t, "stranger")
	secrets := srvSecrets(map[string]string{
		"INTEND_SECRET_ETCD_KEY":     s.ClientKey,
		"INTEND_SECRET_STRANGER_KEY": string(strangerKey),
	})
	withTLS := func(tls map[string]any) map[string]any {
		a := etcdKey(s.URL, "/tls/key", "over mTLS")
		a["tls"] = tls
		return a
	}
	good := srvObject("tls", withTLS(map[string]any{
		"ca": s.CAPEM, "cert": s.ClientCert, "key": map[string]any{"secret": "env:INTEND_SECRET_ETCD_KEY"},
	}), false)
	srvApply(t, good, false, adapters.OpCreate, secrets)
	if v, ok := s.Get(t, "/tls/key"); !ok || v != "over mTLS" {
		t.Fatalf("etcd holds %q %v", v, ok)
	}
	srvApply(t, good, false, adapters.OpNone, secrets)

	for _, c := range []struct {
		reason string
		tls    map[string]any
	}{
		{"a client certificate from another CA", map[string]any{
			"ca": s.CAPEM, "cert": string(strangerCert), "key": map[string]any{"secret": "env:INTEND_SECRET_STRANGER_KEY"}}},
		{"a client certificate from another CA, its key given in the clear", map[string]any{
			"ca": s.CAPEM, "cert": string(strangerCert), "key": string(strangerKey)}},
		{"no client certificate", map[string]any{"ca": s.CAPEM}},
		{"the server's CA not trusted", map[string]any{
			"cert": s.ClientCert, "key": map[string]any{"secret": "env:INTEND_SECRET_ETCD_KEY"}}},
	} {
		t.Run(c.reason, func(t *testing.T) {
			record, err := srvFail(t, srvObject("tls", withTLS(c.tls), false), false, adapters.ClassPermanent, secrets)
			for _, key := range []string{s.ClientKey, string(strangerKey)} {
				body := strings.Split(strings.TrimSpace(key), "\n")[1] // a line of the key's base64
				if strings.Contains(err.Error(), body) || strings.Contains(record, body) {
					t.Errorf("a private key shows in the error or the record: %v", err)
				}
			}
			if !strings.Contains(err.Error(), "certificate") {
				t.Errorf("error %q does not say the certificate is the problem", err)
			}
		})
	}
}

// TestEtcdUnreachable: a server that refuses connections is unavailable
// (not failed), in dry-run too, naming the refused connection.
func TestEtcdUnreachable(t *testing.T) {
	t.Parallel()
	r := srvObject("nowhere", etcdKey(srvClosedURL(t), "/k", "v"), false)
	for _, dryRun := range []bool{true, false} {
		_, err := srvFail(t, r, dryRun, adapters.ClassUnavailable)
		var ae *adapters.Error
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("dry-run %v: %v, want a classified error saying the connection was refused", dryRun, err)
		}
	}
}

// TestEtcdWriteOnlySecret: a value etcd must hold but intend never
// compares (write_only), given as a secret reference or in the clear, is
// written on create and shows in no log line or fact, nor in a diff but
// under the attributes the executor records by size and hash only
// (Sensitive); changed on the server it is not drift.
func TestEtcdWriteOnlySecret(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	const password = "pa55-Write-Only-93d1"
	secret := etcdtest.B64(password) // etcd's values travel in base64
	secrets := srvSecrets(map[string]string{"INTEND_SECRET_VALUE": secret})
	sensitive := rest.Object{}.SensitiveAttributes()
	if !slices.Contains(sensitive, "write_only") {
		t.Fatalf("write_only is not among the sensitive attributes %v", sensitive)
	}
	for _, c := range []struct {
		reason string
		value  any
	}{
		{"a secret reference", map[string]any{"secret": "env:INTEND_SECRET_VALUE"}},
		{"in the clear", secret},
	} {
		t.Run(c.reason, func(t *testing.T) {
			key := "/write-only/" + strings.ReplaceAll(c.reason, " ", "-")
			a := etcdKey(s.URL, key, "")
			delete(a["body"].(map[string]any), "value")
			a["write_only"] = map[string]any{"/value": c.value}
			r := srvObject("wo-"+strings.ReplaceAll(c.reason, " ", "-"), a, false)
			for _, dryRun := range []bool{true, false} {
				out, hc := srvApply(t, r, dryRun, adapters.OpCreate, secrets)
				diff := maps.Clone(out.Diff)
				for _, k := range sensitive {
					delete(diff, k)
				}
				text := srvJSON(diff) + srvJSON(hc.Logs()) + srvJSON(hc.Facts())
				if strings.Contains(text, secret) || strings.Contains(text, password) {
					t.Errorf("dry-run %v shows the write-only value: %s", dryRun, text)
				}
			}
			if v, ok := s.Get(t, key); !ok || v != password {
				t.Fatalf("after the create etcd holds %q %v", v, ok)
			}
			s.Put(t, key, "changed by someone")
			srvApply(t, r, false, adapters.OpNone, secrets)
		})
	}
}
