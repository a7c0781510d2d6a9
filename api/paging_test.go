package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
)

// TestListsArePaged: the lists that used to answer everything at once
// (projects, environments, a version diff, facts, an instance's log)
// answer at most a bounded page with the cursor of the next, and refuse a
// page size beyond their maximum.
func TestListsArePaged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	for _, name := range []string{"pg-a", "pg-b", "pg-c"} {
		f.env(name)
	}
	// follow reads every page of path with limit n and returns the ids
	// (key) in order and the number of pages.
	follow := func(path, key string, n int) ([]string, int) {
		t.Helper()
		var got []string
		pages := 0
		for after := ""; pages < 20; pages++ {
			q := url.Values{"limit": {fmt.Sprint(n)}}
			if after != "" {
				q.Set("after", after)
			}
			out := f.mustCall("GET", path+"?"+q.Encode(), "", 200)
			items, _ := out["items"].([]any)
			if items == nil {
				items, _ = out[key].([]any)
			}
			for _, it := range items {
				switch v := it.(type) {
				case map[string]any:
					got = append(got, fmt.Sprint(v["name"]))
				default:
					got = append(got, fmt.Sprint(v))
				}
			}
			next, _ := out["next"].(string)
			if next == "" {
				return got, pages + 1
			}
			after = next
		}
		t.Fatalf("%s: more than 20 pages", path)
		return nil, 0
	}
	if envs, pages := follow("/api/v1/environments", "", 2); strings.Join(envs, ",") != "pg-a,pg-b,pg-c" || pages != 2 {
		t.Errorf("environments by 2: %v in %d pages", envs, pages)
	}
	if ps, pages := follow("/api/v1/projects", "", 1); strings.Join(ps, ",") != "p-pg-a,p-pg-b,p-pg-c" || pages < 3 {
		t.Errorf("projects by 1: %v in %d pages", ps, pages)
	}

	f.mustCall("PUT", "/api/v1/environments/pg-a/versions", version(fileRes("/a")), 201)
	f.mustCall("PUT", "/api/v1/environments/pg-a/versions", version(fileRes("/a"), fileRes("/b"), fileRes("/c"), fileRes("/d")), 201)
	if added, pages := follow("/api/v1/environments/pg-a/versions/1/diff/2", "added", 2); strings.Join(added, ",") !=
		"fs::File[h,path=/b],fs::File[h,path=/c],fs::File[h,path=/d]" || pages != 2 {
		t.Errorf("diff by 2: %v in %d pages", added, pages)
	}

	for _, tc := range []struct{ path, field string }{
		{"/api/v1/environments?limit=1001", "?limit"},
		{"/api/v1/projects?limit=0", "?limit"},
		{"/api/v1/environments/pg-a/versions/1/diff/2?limit=10001", "?limit"},
		{"/api/v1/environments/pg-a/facts?limit=10001", "?limit"},
		{"/api/v1/environments/pg-a/facts?after=not-a-cursor", "?after"},
	} {
		code, out := f.call("GET", tc.path, "")
		if code != 422 || !strings.Contains(fmt.Sprint(out["errors"]), tc.field) {
			t.Errorf("GET %s = %d %v, want 422 naming %s", tc.path, code, out, tc.field)
		}
	}
}
