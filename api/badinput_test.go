package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
)

// TestNewInputsRefuseBadForms: the inputs this wave added (audit filters,
// the allow_push setting, token revocation, the whoami and token lists)
// answer a bad form with a 4xx problem naming it, and store nothing.
func TestNewInputsRefuseBadForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("bad")
	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"GET", "/api/v1/environments/bad/audit?since=yesterday", "", 422, "?since"},
		{"GET", "/api/v1/environments/bad/audit?until=2026-13-01", "", 422, "?until"},
		{"GET", "/api/v1/environments/bad/audit?limit=0", "", 422, "?limit"},
		{"GET", "/api/v1/environments/bad/audit?before=-3", "", 422, "?before"},
		{"GET", "/api/v1/audit?scope=everything", "", 422, "?scope"},
		{"PATCH", "/api/v1/environments/bad", `{"settings":{"allow_push":"yes"}}`, 422, "/settings/allow_push"},
		{"POST", "/api/v1/tokens", `{"name":"x","role":"read","expires_in":"soon"}`, 422, "/expires_in"},
		{"POST", "/api/v1/tokens", `{"name":"x","role":"read","environments":[]}`, 422, "/environments"},
		{"POST", "/api/v1/tokens", `{"name":"a\u0001b","role":"read"}`, 422, "/name"},
		{"DELETE", "/api/v1/tokens/no-such-token", "", 404, ""},
	} {
		code, out := f.call(tc.method, tc.path, tc.body)
		if code != tc.status || tc.field != "" && !strings.Contains(fmt.Sprint(out["errors"]), tc.field) {
			t.Errorf("%s %s %s = %d %v, want %d naming %q", tc.method, tc.path, tc.body, code, out, tc.status, tc.field)
		}
	}
	// Nothing was stored: the setting kept its default, no token named x.
	env := f.mustCall("GET", "/api/v1/environments/bad", "", 200)
	if env["settings"].(map[string]any)["allow_push"] != false {
		t.Errorf("allow_push after the refusal = %v", env["settings"])
	}
	tokens := f.mustCall("GET", "/api/v1/tokens", "", 200)
	for _, tk := range tokens["items"].([]any) {
		if name := tk.(map[string]any)["name"]; name != "admin" {
			t.Errorf("a refused request stored token %v", name)
		}
	}
}
