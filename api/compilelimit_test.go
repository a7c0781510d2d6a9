package api_test

import (
	"testing"

	"github.com/intendhq/intend/api"
)

// TestCompileCPULimitIsAGlobalAdmins: compile_cpu_limit bounds what an
// environment takes from the compile workers all environments share, so
// an admin of the environment alone cannot change it (403 naming it,
// nothing stored), though a patch may carry it unchanged; a global admin
// can, on create and on patch; bad values are a 422 naming the setting.
func TestCompileCPULimitIsAGlobalAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("cpu")
	limit := func() any {
		return f.mustCall("GET", "/api/v1/environments/cpu", "", 200)["settings"].(map[string]any)["compile_cpu_limit"]
	}
	if got := limit(); got != float64(30) {
		t.Fatalf("a new environment's compile_cpu_limit = %v, want the default 30", got)
	}
	id := f.mustCall("GET", "/api/v1/environments/cpu", "", 200)["id"].(string)
	envAdmin := f.newToken("env-admin", "admin", []string{id})
	for _, body := range []string{`{"settings":{"compile_cpu_limit":3600}}`, `{"settings":{"compile_cpu_limit":5}}`,
		`{"settings":{"keep_versions":7,"compile_cpu_limit":600}}`} {
		code, p := f.callAs("PATCH", "/api/v1/environments/cpu", body, envAdmin, nil)
		if code != 403 || p["type"] != api.TypeForbidden || p["detail"] != "only a global admin may change compile_cpu_limit: "+
			"it bounds what the environment takes from what all environments share" {
			t.Errorf("PATCH %s by the environment's admin = %d %v, want 403 naming compile_cpu_limit", body, code, p)
		}
	}
	if got, kept := limit(), f.mustCall("GET", "/api/v1/environments/cpu", "", 200)["settings"].(map[string]any)["keep_versions"]; got != float64(30) || kept != float64(100) {
		t.Errorf("after the refusals: compile_cpu_limit %v, keep_versions %v; want 30 and 100 (nothing stored)", got, kept)
	}
	// Unchanged, it may come with the others (a form that sends them all).
	if code, p := f.callAs("PATCH", "/api/v1/environments/cpu", `{"settings":{"compile_cpu_limit":30,"keep_versions":7}}`,
		envAdmin, nil); code != 200 {
		t.Errorf("PATCH with compile_cpu_limit unchanged by the environment's admin = %d %v, want 200", code, p)
	}

	// A global admin changes it, on patch and on create.
	f.mustCall("PATCH", "/api/v1/environments/cpu", `{"settings":{"compile_cpu_limit":600}}`, 200)
	if got := limit(); got != float64(600) {
		t.Errorf("after the global admin's PATCH: %v, want 600", got)
	}
	created := f.mustCall("POST", "/api/v1/environments", `{"project":"p-cpu","name":"cpu2","settings":{"compile_cpu_limit":2}}`, 201)
	if got := created["settings"].(map[string]any)["compile_cpu_limit"]; got != float64(2) {
		t.Errorf("created with compile_cpu_limit 2: %v", got)
	}
	for _, bad := range []string{`0`, `-1`, `3601`, `1.5`, `"10s"`, `null`} {
		code, p := f.call("PATCH", "/api/v1/environments/cpu", `{"settings":{"compile_cpu_limit":`+bad+`}}`)
		if code != 422 || !problemNames(p, "/settings/compile_cpu_limit", "from 1 to 3600") {
			t.Errorf("compile_cpu_limit %s = %d %v, want 422 naming /settings/compile_cpu_limit", bad, code, p)
		}
	}
}
