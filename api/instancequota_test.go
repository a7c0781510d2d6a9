package api_test

import (
	"testing"

	"github.com/intendhq/intend/api"
)

// TestInstanceQuotaIsAGlobalAdmins: service_instance_quota bounds the
// live service instances an environment holds (workflows in the shared
// Temporal cluster, rows in the shared database), so only a global admin
// changes it: an environment's admin gets a 403 naming it, nothing
// stored; it reads the default (100,000) until set; bad values are a 422.
func TestInstanceQuotaIsAGlobalAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("quota")
	quota := func() any {
		return f.mustCall("GET", "/api/v1/environments/quota", "", 200)["settings"].(map[string]any)["service_instance_quota"]
	}
	if got := quota(); got != float64(100000) {
		t.Fatalf("a new environment's service_instance_quota = %v, want the default 100000", got)
	}
	id := f.mustCall("GET", "/api/v1/environments/quota", "", 200)["id"].(string)
	envAdmin := f.newToken("env-admin-quota", "admin", []string{id})
	code, p := f.callAs("PATCH", "/api/v1/environments/quota", `{"settings":{"service_instance_quota":5000000}}`, envAdmin, nil)
	if code != 403 || p["detail"] != "only a global admin may change service_instance_quota: "+
		"it bounds what the environment takes from what all environments share" {
		t.Errorf("PATCH by the environment's admin = %d %v, want 403 naming service_instance_quota", code, p)
	}
	if code, p := f.callAs("PATCH", "/api/v1/environments/quota", `{"settings":{"service_instance_quota":100000,"keep_versions":7}}`,
		envAdmin, nil); code != 200 {
		t.Errorf("PATCH with the quota unchanged by the environment's admin = %d %v, want 200", code, p)
	}
	f.mustCall("PATCH", "/api/v1/environments/quota", `{"settings":{"service_instance_quota":3}}`, 200)
	if got := quota(); got != float64(3) {
		t.Errorf("after the global admin's PATCH: %v, want 3", got)
	}
	for _, bad := range []string{`0`, `-1`, `10000001`, `1.5`, `"many"`, `null`} {
		code, p := f.call("PATCH", "/api/v1/environments/quota", `{"settings":{"service_instance_quota":`+bad+`}}`)
		if code != 422 || !problemNames(p, "/settings/service_instance_quota", "from 1 to 10000000") {
			t.Errorf("service_instance_quota %s = %d %v, want 422 naming it", bad, code, p)
		}
	}
}
