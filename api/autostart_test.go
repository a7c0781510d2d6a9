package api_test

import (
	"testing"

	"github.com/intendhq/intend/api"
)

// TestAutostartAgentsIsAGlobalAdmins: autostart_agents decides which
// agents run in the server's embedded executors, so once a global admin
// has taken an environment's agents out of them, the environment's own
// admin cannot put them back (403 naming the setting, nothing stored).
func TestAutostartAgentsIsAGlobalAdmins(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("auto")
	autostart := func() any {
		return f.mustCall("GET", "/api/v1/environments/auto", "", 200)["settings"].(map[string]any)["autostart_agents"]
	}
	f.mustCall("PATCH", "/api/v1/environments/auto", `{"settings":{"autostart_agents":[]}}`, 200)
	id := f.mustCall("GET", "/api/v1/environments/auto", "", 200)["id"].(string)
	envAdmin := f.newToken("auto-admin", "admin", []string{id})
	for _, body := range []string{`{"settings":{"autostart_agents":["*"]}}`, `{"settings":{"autostart_agents":["web1"]}}`,
		`{"settings":{"keep_versions":7,"autostart_agents":["*"]}}`} {
		code, p := f.callAs("PATCH", "/api/v1/environments/auto", body, envAdmin, nil)
		if code != 403 || p["type"] != api.TypeForbidden || p["detail"] != "only a global admin may change autostart_agents: "+
			"it bounds what the environment takes from what all environments share" {
			t.Errorf("PATCH %s by the environment's admin = %d %v, want 403 naming autostart_agents", body, code, p)
		}
	}
	if got, ok := autostart().([]any); !ok || len(got) != 0 {
		t.Errorf("after the refusals autostart_agents = %v, want [] (nothing stored)", autostart())
	}
	if code, p := f.callAs("PATCH", "/api/v1/environments/auto", `{"settings":{"autostart_agents":[],"keep_versions":7}}`,
		envAdmin, nil); code != 200 {
		t.Errorf("PATCH with autostart_agents unchanged by the environment's admin = %d %v, want 200", code, p)
	}
	f.mustCall("PATCH", "/api/v1/environments/auto", `{"settings":{"autostart_agents":["web1"]}}`, 200)
	if got, ok := autostart().([]any); !ok || len(got) != 1 || got[0] != "web1" {
		t.Errorf("after the global admin's PATCH autostart_agents = %v, want [web1]", autostart())
	}
}
