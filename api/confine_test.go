package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	iexec "github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// TestConfinementIsAGlobalAdmins: allowed_paths and allowed_commands
// bound what an environment's resources touch on hosts every environment
// shares, so an admin of the environment cannot set, widen or clear them
// (403 naming the setting, nothing stored) though a patch may carry them
// unchanged; a global admin can, on create and on patch; values must be
// lists of clean absolute paths (422 naming the setting).
func TestConfinementIsAGlobalAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("conf")
	settings := func() map[string]any {
		return f.mustCall("GET", "/api/v1/environments/conf", "", 200)["settings"].(map[string]any)
	}
	if s := settings(); fmt.Sprint(s["allowed_paths"], s["allowed_commands"]) != "[] []" {
		t.Fatalf("a new environment's confinement = %v %v, want [] [] (unconfined)", s["allowed_paths"], s["allowed_commands"])
	}
	id := f.mustCall("GET", "/api/v1/environments/conf", "", 200)["id"].(string)
	envAdmin := f.newToken("env-admin-conf", "admin", []string{id})
	refuse := func(body, setting string) {
		t.Helper()
		code, p := f.callAs("PATCH", "/api/v1/environments/conf", body, envAdmin, nil)
		if code != 403 || p["type"] != api.TypeForbidden || !strings.Contains(fmt.Sprint(p["detail"]), "only a global admin may change "+setting) {
			t.Errorf("PATCH %s by the environment's admin = %d %v, want 403 naming %s", body, code, p, setting)
		}
	}
	refuse(`{"settings":{"allowed_paths":["/srv/alpha"]}}`, "allowed_paths")
	refuse(`{"settings":{"allowed_commands":["/bin/sh"]}}`, "allowed_commands")

	// A global admin confines it; the environment's admin can then
	// neither widen, nor clear, nor add to it.
	f.mustCall("PATCH", "/api/v1/environments/conf", `{"settings":{"allowed_paths":["/srv/alpha"],"allowed_commands":["/usr/bin/systemctl"]}}`, 200)
	refuse(`{"settings":{"allowed_paths":["/"]}}`, "allowed_paths")
	refuse(`{"settings":{"allowed_paths":[]}}`, "allowed_paths")
	refuse(`{"settings":{"allowed_paths":["/srv/alpha","/etc"]}}`, "allowed_paths")
	refuse(`{"settings":{"keep_versions":7,"allowed_commands":["/usr/bin/systemctl","/bin/sh"]}}`, "allowed_commands")
	if s := settings(); fmt.Sprint(s["allowed_paths"], s["allowed_commands"], s["keep_versions"]) != "[/srv/alpha] [/usr/bin/systemctl] 100" {
		t.Errorf("after the refusals: %v %v %v; want nothing stored", s["allowed_paths"], s["allowed_commands"], s["keep_versions"])
	}
	// Unchanged, they may come with the others.
	if code, p := f.callAs("PATCH", "/api/v1/environments/conf",
		`{"settings":{"allowed_paths":["/srv/alpha"],"allowed_commands":["/usr/bin/systemctl"],"keep_versions":7}}`, envAdmin, nil); code != 200 {
		t.Errorf("PATCH with the confinement unchanged by the environment's admin = %d %v, want 200", code, p)
	}
	created := f.mustCall("POST", "/api/v1/environments", `{"project":"p-conf","name":"conf2","settings":{"allowed_paths":["/srv/beta"]}}`, 201)
	if got := fmt.Sprint(created["settings"].(map[string]any)["allowed_paths"]); got != "[/srv/beta]" {
		t.Errorf("created with allowed_paths [/srv/beta]: %v", got)
	}
	f.mustCall("PATCH", "/api/v1/environments/conf2", `{"settings":{"allowed_paths":[]}}`, 200)

	for _, bad := range []string{`"/srv"`, `["srv/alpha"]`, `["/srv/alpha/"]`, `["/srv/../etc"]`, `["/srv//a"]`, `[1]`, `{}`} {
		for _, k := range []string{"allowed_paths", "allowed_commands"} {
			code, p := f.call("PATCH", "/api/v1/environments/conf", `{"settings":{"`+k+`":`+bad+`}}`)
			if code != 422 || !problemNames(p, "/settings/"+k, "absolute path") {
				t.Errorf("%s %s = %d %v, want 422 naming /settings/%s", k, bad, code, p, k)
			}
		}
	}
}

// TestExportRefusesConfined: an export (whole or partial) with a
// resource outside the environment's confinement is a 422 naming the
// resource, its attribute and the setting; nothing is stored. A path
// that only shares the prefix's letters (/srv/alpha-evil) is outside.
func TestExportRefusesConfined(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("conf-exp")
	f.mustCall("PATCH", "/api/v1/environments/conf-exp",
		`{"settings":{"allowed_paths":["/srv/alpha"],"allowed_commands":["/usr/bin/systemctl"]}}`, 200)
	cmd := func(name, command string) string {
		return fmt.Sprintf(`{"id":"exec::Command[h,name=%s]","attributes":{"name":"%s","command":%s,"creates":"/srv/alpha/%s"}}`,
			name, name, command, name)
	}
	cases := []struct {
		why, body, field, detail string
	}{
		{"a file outside", version(fileRes("/srv/alpha/ok"), fileRes("/etc/shadow")), "/resources/1/attributes/path",
			"fs::File[h,path=/etc/shadow]: path /etc/shadow is outside the environment's allowed_paths [/srv/alpha]"},
		{"a sibling of the prefix", version(fileRes("/srv/alpha-evil/x")), "/resources/0/attributes/path",
			"path /srv/alpha-evil/x is outside the environment's allowed_paths [/srv/alpha]"},
		{"a program not allowed", version(cmd("c", `["/usr/bin/touch","/tmp/x"]`)), "/resources/0/attributes/command/0",
			"command program /usr/bin/touch is not in the environment's allowed_commands [/usr/bin/systemctl]"},
		{"a shell string", version(cmd("s", `"systemctl restart x"`)), "/resources/0/attributes/command",
			"is a shell string (run by /bin/sh -c)"},
		{"a symlink leading out", version(`{"id":"fs::Symlink[h,path=/srv/alpha/l]","attributes":{"path":"/srv/alpha/l","target":"/etc"}}`),
			"/resources/0/attributes/target", "target /etc (/etc) is outside the environment's allowed_paths"},
	}
	for _, c := range cases {
		for _, route := range []string{"/versions", "/versions/partial"} {
			code, p := f.call("PUT", "/api/v1/environments/conf-exp"+route, c.body)
			if code != 422 || !problemNames(p, c.field, c.detail) || !strings.Contains(fmt.Sprint(p["detail"]), "allowed_paths") {
				t.Errorf("%s (PUT %s) = %d %v, want 422 naming %s: %q", c.why, route, code, p, c.field, c.detail)
			}
		}
	}
	if v := f.mustCall("GET", "/api/v1/environments/conf-exp", "", 200)["last_version"]; v != float64(0) {
		t.Errorf("last_version = %v after refused exports, want 0", v)
	}
	f.mustCall("PUT", "/api/v1/environments/conf-exp/versions",
		version(fileRes("/srv/alpha/ok"), cmd("ok", `["/usr/bin/systemctl","restart","x"]`)), 201)
}

// TestBatchWithholdsConfined: when a batch is handed to an executor, the
// resources outside the environment's confinement as it is now (set
// after the export) come without their attributes, already recorded
// failed (permanent) with the refusal naming the setting; loading the
// batch again records nothing twice; the other batches are whole.
func TestBatchWithholdsConfined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "conf-batch", 2)
	f.mustCall("PATCH", "/api/v1/environments/conf-batch", `{"settings":{"allowed_paths":["/srv/a"]}}`, 200)
	remotes := map[string]*iexec.Remote{}
	for _, agent := range []string{"a", "b"} {
		var err error
		if remotes[agent], err = iexec.NewRemote(f.srv.URL, executorToken(t, f, e, agent), nil); err != nil {
			t.Fatal(err)
		}
	}
	load := func(agent string) ledger.Batch {
		t.Helper()
		b, err := remotes[agent].LoadBatch(ctx, e.ID, run, batches[agent].Seq, "")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := load("a")
	if len(a.Recorded) != 0 || len(a.Resources) != 2 || !strings.Contains(string(a.Resources[0].Attributes), `"path":"/srv/a/0"`) {
		t.Errorf("batch of agent a (inside) = %+v, want it whole", a)
	}
	for range 2 {
		b := load("b")
		if len(b.Resources) != 2 {
			t.Fatalf("batch of agent b = %+v", b)
		}
		for _, r := range b.Resources {
			if o := b.Recorded[r.ID]; string(r.Attributes) != "{}" || o.Result != ledger.ResultFailed || o.ErrorClass != "permanent" ||
				!strings.Contains(o.Error, "is outside the environment's allowed_paths [/srv/a]") {
				t.Errorf("%s handed out as %s, recorded %+v; want no attributes, failed permanent", r.ID, r.Attributes, b.Recorded[r.ID])
			}
		}
	}
	for i := range 2 {
		rid := fmt.Sprintf("fs::File[b,path=/srv/b/%d]", i)
		acts, err := f.st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: rid, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("path /srv/b/%d is outside the environment's allowed_paths [/srv/a]", i)
		if len(acts) != 1 || acts[0].Result != "failed" || acts[0].ErrorClass == nil || *acts[0].ErrorClass != "permanent" ||
			acts[0].Error == nil || *acts[0].Error != want {
			t.Errorf("actions of %s = %+v, want one failed, permanent: %q", rid, acts, want)
		}
	}
}

// TestEndpointsAreAGlobalAdmins: allowed_endpoints, like the other
// confinement settings, is [] on a new environment, only a global admin
// changes it (403 naming it, nothing stored), and its entries are URL
// prefixes or netconf://host[:port] without user, query or fragment (422
// naming the setting).
func TestEndpointsAreAGlobalAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("conf-ep-admin")
	const path = "/api/v1/environments/conf-ep-admin"
	settings := func() map[string]any { return f.mustCall("GET", path, "", 200)["settings"].(map[string]any) }
	if got := fmt.Sprint(settings()["allowed_endpoints"]); got != "[]" {
		t.Fatalf("a new environment's allowed_endpoints = %v, want []", got)
	}
	id := f.mustCall("GET", path, "", 200)["id"].(string)
	envAdmin := f.newToken("env-admin-conf-ep", "admin", []string{id})
	refuse := func(body string) {
		t.Helper()
		code, p := f.callAs("PATCH", path, body, envAdmin, nil)
		if code != 403 || p["type"] != api.TypeForbidden || !strings.Contains(fmt.Sprint(p["detail"]), "only a global admin may change allowed_endpoints") {
			t.Errorf("PATCH %s by the environment's admin = %d %v, want 403 naming allowed_endpoints", body, code, p)
		}
	}
	refuse(`{"settings":{"allowed_endpoints":["http://169.254.169.254"]}}`)
	f.mustCall("PATCH", path, `{"settings":{"allowed_endpoints":["https://api.example.com/v1","netconf://r1.lab:2830"]}}`, 200)
	refuse(`{"settings":{"allowed_endpoints":[]}}`)
	refuse(`{"settings":{"allowed_endpoints":["https://api.example.com/v1","netconf://r1.lab:2830","http://127.0.0.1"]}}`)
	if got := fmt.Sprint(settings()["allowed_endpoints"]); got != "[https://api.example.com/v1 netconf://r1.lab:2830]" {
		t.Errorf("after the refusals: %v, want nothing stored", got)
	}
	if code, p := f.callAs("PATCH", path,
		`{"settings":{"allowed_endpoints":["https://api.example.com/v1","netconf://r1.lab:2830"],"keep_versions":7}}`, envAdmin, nil); code != 200 {
		t.Errorf("PATCH with allowed_endpoints unchanged by the environment's admin = %d %v, want 200", code, p)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf(`"https://h%d.example.com"`, i)
	}
	for _, bad := range []string{`"https://api.example.com"`, `["api.example.com"]`, `["https://u:p@api.example.com"]`,
		`["https://api.example.com/v1?x=1"]`, `["https://api.example.com/v1#f"]`, `["ftp://h/x"]`, `["netconf://r1.lab/x"]`,
		`["https://h/v1/../admin"]`, `[1]`, `{}`, "[" + strings.Join(many, ",") + "]"} {
		code, p := f.call("PATCH", path, `{"settings":{"allowed_endpoints":`+bad+`}}`)
		if code != 422 || !problemNames(p, "/settings/allowed_endpoints", "endpoint") {
			t.Errorf("allowed_endpoints %.80s = %d %v, want 422 naming /settings/allowed_endpoints", bad, code, p)
		}
	}
}

// TestExportRefusesUnlistedEndpoints: in an environment confined by any
// setting, an export whose rest::Object endpoint or netconf::Config
// address is not within allowed_endpoints (none while it is empty) is a
// 422 naming the resource, its attribute and the setting; an
// unconfined environment takes them as before.
func TestExportRefusesUnlistedEndpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("conf-ep")
	f.env("conf-ep-free")
	rest := func(name, endpoint string) string {
		return fmt.Sprintf(`{"id":"rest::Object[h,name=%s]","attributes":{"name":"%s","endpoint":"%s","path":"/users/app","body":{}}}`,
			name, name, endpoint)
	}
	device := func(address string) string {
		return fmt.Sprintf(`{"id":"netconf::Config[h,address=%s]","attributes":{"address":"%s","user":"admin","host_key":"SHA256:x","config":{}}}`,
			address, address)
	}
	check := func(why, body, field, detail string) {
		t.Helper()
		for _, route := range []string{"/versions", "/versions/partial"} {
			code, p := f.call("PUT", "/api/v1/environments/conf-ep"+route, body)
			if code != 422 || !problemNames(p, field, detail) || !strings.Contains(fmt.Sprint(p["detail"]), "allowed_endpoints") {
				t.Errorf("%s (PUT %s) = %d %v, want 422 naming %s: %q", why, route, code, p, field, detail)
			}
		}
	}
	// Confined by allowed_paths alone: no API, no device.
	f.mustCall("PATCH", "/api/v1/environments/conf-ep", `{"settings":{"allowed_paths":["/srv/alpha"]}}`, 200)
	check("the metadata service", version(rest("md", "http://169.254.169.254/latest")), "/resources/0/attributes/endpoint",
		"rest::Object[h,name=md]: endpoint http://169.254.169.254/latest is outside the environment's allowed_endpoints []")
	check("a device on loopback's SSH", version(device("127.0.0.1:22")), "/resources/0/attributes/address",
		"address 127.0.0.1:22 is outside the environment's allowed_endpoints []")

	f.mustCall("PATCH", "/api/v1/environments/conf-ep", `{"settings":{"allowed_endpoints":["https://api.example.com/v1","netconf://r1.lab"]}}`, 200)
	for _, c := range []struct{ why, body, field, detail string }{
		{"a sibling of the prefix", version(rest("ok", "https://api.example.com/v1"), rest("v10", "https://api.example.com/v10")),
			"/resources/1/attributes/endpoint", "endpoint https://api.example.com/v10 is outside the environment's allowed_endpoints " +
				"[https://api.example.com/v1 netconf://r1.lab]"},
		{"a host starting with the allowed one", version(rest("evil", "https://api.example.com.evil.org/v1")),
			"/resources/0/attributes/endpoint", "is outside the environment's allowed_endpoints"},
		{"a path climbing out of the prefix", version(`{"id":"rest::Object[h,name=up]","attributes":{"name":"up",` +
			`"endpoint":"https://api.example.com/v1","path":"/../admin","body":{}}}`), "/resources/0/attributes/path", `".."`},
		{"a device on another port", version(device("r1.lab:22")), "/resources/0/attributes/address",
			"address r1.lab:22 is outside the environment's allowed_endpoints"},
	} {
		check(c.why, c.body, c.field, c.detail)
	}
	if v := f.mustCall("GET", "/api/v1/environments/conf-ep", "", 200)["last_version"]; v != float64(0) {
		t.Errorf("last_version = %v after refused exports, want 0", v)
	}
	f.mustCall("PUT", "/api/v1/environments/conf-ep/versions",
		version(rest("ok", "https://API.example.com:443/v1/vhosts"), device("R1.lab:830"), fileRes("/srv/alpha/x")), 201)
	// Unconfined, as before.
	f.mustCall("PUT", "/api/v1/environments/conf-ep-free/versions",
		version(rest("md", "http://169.254.169.254/latest"), device("127.0.0.1:22")), 201)
}
