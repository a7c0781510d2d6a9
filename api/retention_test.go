package api_test

import (
	"fmt"
	"testing"

	"github.com/intendhq/intend/api"
)

// TestRetentionSettingsRefuseBadForms: a retention setting that is not 0
// or a whole number of seconds from an hour to ten years is refused, on
// create and on PATCH, with a 422 naming /settings/<key> and the range,
// and stores nothing; a good one is stored and shown, and the others keep
// their defaults.
func TestRetentionSettingsRefuseBadForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("ret")
	keys := []string{"action_log_retention", "run_retention", "compile_retention", "order_retention",
		"instance_log_retention"}
	defaults := map[string]float64{"action_log_retention": 604800, "run_retention": 2592000,
		"compile_retention": 604800, "order_retention": 2592000, "instance_log_retention": 7776000}
	for i, key := range keys {
		for _, bad := range []string{`-1`, `59`, `3599`, `316224001`, `1e300`, `86400.5`, `"7d"`, `true`, `[]`} {
			body := fmt.Sprintf(`{"settings":{%q:%s}}`, key, bad)
			code, p := f.call("PATCH", "/api/v1/environments/ret", body)
			if code != 422 || !problemNames(p, "/settings/"+key, "from 3600 (an hour)") {
				t.Errorf("PATCH %s = %d %v, want 422 naming /settings/%s and the range", body, code, p, key)
			}
			create := fmt.Sprintf(`{"project":"p-ret","name":"r%d","settings":{%q:%s}}`, i, key, bad)
			if code, p := f.call("POST", "/api/v1/environments", create); code != 422 || !problemNames(p, "/settings/"+key, "from 3600") {
				t.Errorf("POST %s = %d %v, want 422 naming /settings/%s", create, code, p, key)
			}
		}
	}
	// Nothing was stored: every retention has its default, and no
	// environment was created.
	env := f.mustCall("GET", "/api/v1/environments/ret", "", 200)
	for key, want := range defaults {
		if got := env["settings"].(map[string]any)[key]; got != want {
			t.Errorf("%s after the refusals = %v, want the default %v", key, got, want)
		}
	}
	for i := range keys {
		f.mustCall("GET", fmt.Sprintf("/api/v1/environments/r%d", i), "", 404)
	}

	// Good values: 0 (keep everything), an hour, ten years.
	got := f.mustCall("PATCH", "/api/v1/environments/ret",
		`{"settings":{"action_log_retention":0,"run_retention":3600,"order_retention":316224000}}`, 200)
	set := got["settings"].(map[string]any)
	for key, want := range map[string]float64{"action_log_retention": 0, "run_retention": 3600,
		"order_retention": 316224000, "compile_retention": defaults["compile_retention"],
		"instance_log_retention": defaults["instance_log_retention"]} {
		if set[key] != want {
			t.Errorf("after the PATCH, %s = %v, want %v", key, set[key], want)
		}
	}
}
