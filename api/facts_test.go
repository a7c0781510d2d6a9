package api_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
)

// TestUserFacts: an author sets a fact of a resource (a parameter) by its
// id, slashes and all, and removes it; the fact lists with source user;
// an operator may not; every set and removal is in the audit trail; bad
// input and the bounds (value size, user facts per environment) are 422
// problems.
func TestUserFacts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{MaxUserFacts: 2})
	f.env("prod")
	envID := f.envID("prod")
	rid := "fs::File[h,path=/etc/app/config.yaml]"
	raw := "/api/v1/environments/prod/facts/" + rid + "/size"
	escaped := "/api/v1/environments/prod/facts/" + url.PathEscape(rid) + "/size"

	author := f.newToken("a", "author", []string{envID})
	operator := f.newToken("o", "operator", []string{envID})
	if code, _ := f.callAs("PUT", raw, `{"value": 42}`, operator, nil); code != 403 {
		t.Errorf("an operator set a fact: %d, want 403", code)
	}
	for _, path := range []string{raw, escaped} {
		code, out := f.callAs("PUT", path, `{"value": {"bytes": 42}}`, author, nil)
		if code != 200 || out["resource_id"] != rid || out["name"] != "size" || out["source"] != "user" {
			t.Fatalf("PUT %s = %d %v, want 200 with the user's fact", path, code, out)
		}
	}
	list := f.mustCall("GET", "/api/v1/environments/prod/facts?resource="+url.QueryEscape(rid), "", 200)
	items, _ := list["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["source"] != "user" ||
		fmt.Sprint(items[0].(map[string]any)["value"]) != "map[bytes:42]" {
		t.Errorf("facts = %v, want the one user-set fact", list)
	}

	for _, tc := range []struct {
		path, body, field, why string
	}{
		{raw, `{}`, "/value", "a value is required"},
		{raw, `{"value": null}`, "/value", "null is no value"},
		{raw, `{"value": "` + strings.Repeat("x", api.DefaultMaxFactBytes) + `"}`, "/value", "beyond the size of a value"},
		{"/api/v1/environments/prod/facts/not-an-id/size", `{"value": 1}`, "resource_id", "not a resource id"},
		{"/api/v1/environments/prod/facts/" + rid + ",v=3/size", `{"value": 1}`, "resource_id", "a versioned id"},
		{"/api/v1/environments/prod/facts/" + rid + "/" + strings.Repeat("n", 256), `{"value": 1}`, "name", "a name too long"},
	} {
		code, out := f.call("PUT", tc.path, tc.body)
		if code != 422 || !strings.Contains(fmt.Sprint(out["errors"]), tc.field) {
			t.Errorf("%s: PUT = %d %v, want 422 naming %s", tc.why, code, out, tc.field)
		}
	}
	// The bound on user facts: a second is fine, a third is not;
	// replacing one is.
	f.mustCall("PUT", "/api/v1/environments/prod/facts/"+rid+"/owner", `{"value": "app"}`, 200)
	if code, out := f.call("PUT", "/api/v1/environments/prod/facts/"+rid+"/mode", `{"value": "0644"}`); code != 422 ||
		!strings.Contains(fmt.Sprint(out["detail"]), "2 user-set facts") {
		t.Errorf("a third user fact with a limit of 2: %d %v, want 422", code, out)
	}
	f.mustCall("PUT", raw, `{"value": 7}`, 200)

	if code, _ := f.callAs("DELETE", raw, "", author, nil); code != 204 {
		t.Errorf("DELETE = %d, want 204", code)
	}
	if code, _ := f.callAs("DELETE", raw, "", author, nil); code != 404 {
		t.Errorf("DELETE again = %d, want 404", code)
	}
	entries, err := f.st.ListAudit(context.Background(), store.AuditFilter{EnvironmentID: envID, Action: "fact.", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var set, deleted int
	for _, e := range entries {
		switch {
		case e.Action == "fact.set" && e.Status == 200:
			set++
		case e.Action == "fact.delete" && e.Status == 204:
			deleted++
		}
	}
	if set != 4 || deleted != 1 {
		t.Errorf("audit: %d sets and %d removals recorded, want 4 and 1", set, deleted)
	}
}
