package rest_test

// The rest:: adapter through a real nginx 1.22 (internal/nginxtest): a
// reverse proxy in front of etcd or Alertmanager that limits the request
// rate (429 or 503 with Retry-After), checks an API-key header or a bearer
// token (401), answers 502 when the server behind it is gone, and serves a
// WebDAV share, whose 409 Conflict is the real one these tests use.

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/rest"
	"github.com/intendhq/intend/internal/alertmanagertest"
	"github.com/intendhq/intend/internal/etcdtest"
	"github.com/intendhq/intend/internal/nginxtest"
)

// TestNginxThrottled: over nginx's rate limit, an attempt fails as
// throttled with the delay of the Retry-After header, for 429 and for 503;
// retried after that delay, as the executor does, the create succeeds.
func TestNginxThrottled(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	for _, c := range []struct {
		reason string
		status int
	}{
		{"429 Too Many Requests", http.StatusTooManyRequests},
		{"503 Service Unavailable", http.StatusServiceUnavailable},
	} {
		t.Run(c.reason, func(t *testing.T) {
			t.Parallel()
			ngx := nginxtest.Start(t, nginxtest.Options{Upstream: etcd.URL, Rate: "2r/s", Burst: 3, RetryAfter: 2, LimitStatus: c.status})
			key := "/throttled/" + c.reason[:3]
			r := srvObject("throttled-"+c.reason[:3], etcdKey(ngx.URL, key, "v"), false)
			ngx.Exhaust(t, "/health", nil)
			_, err := srvFail(t, r, false, adapters.ClassThrottled)
			if d := adapters.RetryAfterOf(err); d != 2*time.Second {
				t.Errorf("throttled for %s, want Retry-After's 2s: %v", d, err)
			}
			if !strings.Contains(err.Error(), http.StatusText(c.status)) {
				t.Errorf("error %q does not say %s", err, c.reason)
			}
			for attempt := 1; ; attempt++ {
				time.Sleep(adapters.RetryAfterOf(err))
				var out adapters.Outcome
				out, _, err = srvRun(r, false)
				if err == nil {
					if out.Action != adapters.OpCreate && out.Action != adapters.OpNone {
						t.Fatalf("retry %d: %q, want the create", attempt, out.Action)
					}
					break
				}
				if adapters.ClassOf(err) != adapters.ClassThrottled || attempt == 5 {
					t.Fatalf("retry %d: %v", attempt, err)
				}
			}
			if v, ok := etcd.Get(t, key); !ok || v != "v" {
				t.Fatalf("after the retries etcd holds %q %v", v, ok)
			}
		})
	}
}

// TestNginxAdapterRate: nginx allows 4 requests a second, none in a
// burst; objects whose limits.rate is 3 keep under it, one after the
// other, where without the limit the second request of an attempt is
// refused.
func TestNginxAdapterRate(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	ngx := nginxtest.Start(t, nginxtest.Options{Upstream: etcd.URL, Rate: "4r/s", RetryAfter: 1})
	unlimited := srvObject("unlimited", etcdKey(ngx.URL, "/unlimited", "v"), false)
	srvFail(t, unlimited, false, adapters.ClassThrottled)
	time.Sleep(time.Second)
	for _, name := range []string{"a", "b", "c"} {
		a := etcdKey(ngx.URL, "/rated/"+name, "v")
		a["limits"] = map[string]any{"rate": 3}
		srvApply(t, srvObject("rated-"+name, a, false), false, adapters.OpCreate)
	}
}

// TestNginxAuth: through nginx's API-key and bearer checks, the object is
// managed with the secret given as a reference; a wrong secret, as a
// reference or in the clear, is a permanent error quoting nginx's 401
// detail, and no secret, right or wrong, shows in an error, a diff or a
// log line, dry-run included.
func TestNginxAuth(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	upstream := strings.TrimSuffix(am.URL, "/api/v2")
	const good, wrong = "s3cret-Good-4e1f9a", "s3cret-Wrong-77b02c"
	secrets := srvSecrets(map[string]string{"INTEND_SECRET_GOOD": good, "INTEND_SECRET_WRONG": wrong})
	ref := func(name string) any { return map[string]any{"secret": "env:INTEND_SECRET_" + name} }
	for _, c := range []struct {
		reason string
		opts   nginxtest.Options
		auth   func(v any) map[string]any
		detail string
	}{
		{"API key header", nginxtest.Options{Upstream: upstream, APIKeyHeader: "X-API-Key", APIKey: good},
			func(v any) map[string]any {
				return map[string]any{"header": map[string]any{"name": "X-API-Key", "value": v}}
			},
			"missing or wrong API key"},
		{"bearer token", nginxtest.Options{Upstream: upstream, Bearer: good},
			func(v any) map[string]any { return map[string]any{"bearer": v} },
			"missing or wrong bearer token"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			t.Parallel()
			ngx := nginxtest.Start(t, c.opts)
			name := strings.ReplaceAll(c.reason, " ", "-")
			object := func(alert string, secret any) adapters.Resource {
				a := silence(ngx.URL+"/api/v2", name, alert, "intend")
				a["auth"] = c.auth(secret)
				return srvObject(name, a, false)
			}
			noSecret := func(what, text string) {
				t.Helper()
				if strings.Contains(text, good) || strings.Contains(text, wrong) {
					t.Errorf("%s shows a secret: %s", what, text)
				}
			}
			out, hc := srvApply(t, object("Auth", ref("GOOD")), true, adapters.OpCreate, secrets)
			noSecret("the dry-run of the create", srvJSON(out)+srvJSON(hc.Logs()))
			out, hc = srvApply(t, object("Auth", ref("GOOD")), false, adapters.OpCreate, secrets)
			noSecret("the create", srvJSON(out)+srvJSON(hc.Logs())+srvJSON(hc.Facts()))
			liveSilence(t, am, name)
			out, hc = srvApply(t, object("AuthChanged", ref("GOOD")), true, adapters.OpUpdate, secrets)
			noSecret("the dry-run of an update", srvJSON(out)+srvJSON(hc.Logs()))
			if _, ok := out.Diff["auth"]; ok {
				t.Errorf("the diff holds auth: %s", srvJSON(out.Diff))
			}
			for _, secret := range []any{ref("WRONG"), wrong} {
				for _, dryRun := range []bool{true, false} {
					record, err := srvFail(t, object("AuthChanged", secret), dryRun, adapters.ClassPermanent, secrets)
					noSecret("the failed attempt", err.Error()+record)
					if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), c.detail) {
						t.Errorf("error %q does not quote nginx's 401 and %q", err, c.detail)
					}
				}
			}
			if got := liveSilence(t, am, name); got.Matchers[0].Value != "Auth" {
				t.Errorf("a refused attempt changed the silence: %+v", got)
			}
		})
	}
}

// TestNginxUpstreamGone: nginx answers 502 when the server behind it does
// not answer: a transient error, in dry-run too.
func TestNginxUpstreamGone(t *testing.T) {
	t.Parallel()
	ngx := nginxtest.Start(t, nginxtest.Options{Upstream: srvClosedURL(t)})
	r := srvObject("behind", etcdKey(ngx.URL, "/k", "v"), false)
	for _, dryRun := range []bool{true, false} {
		_, err := srvFail(t, r, dryRun, adapters.ClassTransient)
		if !strings.Contains(err.Error(), "502") {
			t.Errorf("dry-run %v: %v, want nginx's 502", dryRun, err)
		}
	}
}

// davDocument is a JSON document on nginx's WebDAV share as a
// rest::Object: its URL is known from its name, so it is created and
// updated by PUT, observed by GET and deleted by DELETE.
func davDocument(endpoint, name string, body map[string]any) map[string]any {
	return map[string]any{"endpoint": endpoint, "path": "/dav/" + name + ".json", "body": body}
}

// TestNginxWebDAVDocument: the WebDAV share as an API of the plainest
// kind: create, no-op, drift repair (the file changed on disk), delete.
func TestNginxWebDAVDocument(t *testing.T) {
	t.Parallel()
	ngx := nginxtest.Start(t, nginxtest.Options{})
	file := filepath.Join(ngx.DAVDir, "report.json")
	desired := srvObject("report", davDocument(ngx.URL, "report", map[string]any{"title": "weekly", "pages": 3}), false)
	srvApply(t, desired, true, adapters.OpCreate)
	srvApply(t, desired, false, adapters.OpCreate)
	srvApply(t, desired, false, adapters.OpNone)
	if err := os.WriteFile(file, []byte(`{"title":"weekly","pages":4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, hc := srvApply(t, desired, true, adapters.OpUpdate)
	if !srvFieldLogged(hc, "/pages") || srvFieldLogged(hc, "/title") {
		t.Errorf("the dry-run of the drift logs %s, want /pages alone as differing", srvJSON(hc.Logs()))
	}
	srvApply(t, desired, false, adapters.OpUpdate)
	srvApply(t, desired, false, adapters.OpNone)
	gone := srvObject("report", davDocument(ngx.URL, "report", nil), true)
	delete(gone.Attributes, "body")
	srvApply(t, gone, false, adapters.OpDelete)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("%s after the delete: %v", file, err)
	}
	srvApply(t, gone, false, adapters.OpNone)
}

// TestNginxConflict: a real 409. Between the attempt's Observe, which
// finds the document absent, and its Create, someone else makes a
// collection at the document's URL; nginx answers the PUT 409 Conflict,
// a permanent error quoting it.
func TestNginxConflict(t *testing.T) {
	t.Parallel()
	ngx := nginxtest.Start(t, nginxtest.Options{})
	desired := srvObject("taken", davDocument(ngx.URL, "taken", map[string]any{"a": 1}), false)
	ctx, hc := context.Background(), adapters.NewContext()
	defer hc.Close()
	obs, err := rest.Object{}.Observe(ctx, hc, desired)
	if err != nil || obs.Exists {
		t.Fatalf("observe = %+v %v, want absent", obs, err)
	}
	req, _ := http.NewRequest("MKCOL", ngx.URL+"/dav/taken.json/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("MKCOL by someone else: %v %v", resp, err)
	}
	resp.Body.Close()
	err = rest.Object{}.Create(ctx, hc, desired)
	if err == nil || adapters.ClassOf(err) != adapters.ClassPermanent || !strings.Contains(err.Error(), "409 Conflict") {
		t.Fatalf("create onto the collection = %v, want a permanent error quoting 409 Conflict", err)
	}
	if fi, err := os.Stat(filepath.Join(ngx.DAVDir, "taken.json")); err != nil || !fi.IsDir() {
		t.Fatalf("the collection changed: %v %v", fi, err)
	}
}

// TestNginxWebDAVConformance runs the adapter conformance suite on a
// WebDAV document (an object whose URL its identity gives: PUT, GET,
// DELETE, absent on 404).
func TestNginxWebDAVConformance(t *testing.T) {
	t.Parallel()
	ngx := nginxtest.Start(t, nginxtest.Options{})
	file := filepath.Join(ngx.DAVDir, "conf.json")
	relative := davDocument(ngx.URL, "conf", map[string]any{"v": 1})
	relative["path"] = "dav/conf.json"
	conformance.Run(t, conformance.Case{
		Handler: rest.Object{},
		Desired: srvObject("conf", davDocument(ngx.URL, "conf", map[string]any{"v": 1, "tags": []any{"a"}}), false),
		Updated: srvObject("conf", davDocument(ngx.URL, "conf", map[string]any{"v": 2, "tags": []any{"a", "b"}}), false),
		Invalid: map[string]adapters.Resource{
			// A path is relative to the endpoint and starts with /.
			"path": srvObject("conf", relative, false),
		},
		Exists: conformance.PathExists(file),
	})
}
