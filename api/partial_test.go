package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
)

// inResourceSet puts the resource object of fileRes into a resource set.
func inResourceSet(set, obj string) string {
	return strings.TrimSuffix(obj, "}") + `,"resource_set":"` + set + `"}`
}

// partialExport is the body of a partial export.
func partialExport(removed string, rs ...string) string {
	return `{"resources":[` + strings.Join(rs, ",") + `],"removed_resource_sets":[` + removed + `]}`
}

func TestExportPartial(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("part")
	const path = "/api/v1/environments/part/versions/partial"
	f.mustCall("PUT", "/api/v1/environments/part/versions", version(
		inResourceSet("a", fileRes("/a1", "fs::File[h,path=/s]")), inResourceSet("a", fileRes("/a2")),
		inResourceSet("b", fileRes("/b1")), fileRes("/s")), 201)

	// Replace set a by a1 and a3, remove set b, add a shared resource.
	v2 := f.mustCall("PUT", path, partialExport(`"b"`,
		inResourceSet("a", fileRes("/a3", "fs::File[h,path=/s2]")), inResourceSet("a", fileRes("/a1", "fs::File[h,path=/s]")),
		fileRes("/s2")), 201)
	if v2["version"] != float64(2) || v2["resource_count"] != float64(4) || v2["changed_count"] != float64(4) {
		t.Errorf("v2 = %v; want version 2 of 4 resources, 4 changed (a2, b1 gone; a3, s2 new)", v2)
	}
	got := f.mustCall("GET", "/api/v1/environments/part/versions/2", "", 200)
	var ids []string
	for _, it := range got["resources"].([]any) {
		m := it.(map[string]any)
		set, _ := m["resource_set"].(string)
		ids = append(ids, set+" "+m["id"].(string))
	}
	want := []string{"a fs::File[h,path=/a1]", "a fs::File[h,path=/a3]", " fs::File[h,path=/s2]", " fs::File[h,path=/s]"}
	if !slices.Equal(ids, want) {
		t.Errorf("version 2 resources = %q; want %q (the shared set has no resource_set)", ids, want)
	}

	cases := []struct {
		why    string
		body   string
		status int
		typ    string
		field  string // the field the problem must name
		detail string // text a field entry must hold
	}{
		{"unknown top-level field", `{"resources":[],"removed_sets":["b"]}`, 422, "validation", "/removed_sets", "unknown field"},
		{"malformed JSON", `{"resources":[`, 422, "validation", "/resources/0", "invalid JSON at byte 14"},
		{"empty set name", partialExport(`""`), 422, "validation", "/removed_resource_sets/0", "must not be empty"},
		{"updated and removed", partialExport(`"a"`, inResourceSet("a", fileRes("/a1"))), 422, "validation",
			"/removed_resource_sets/0", `resource set "a" is both updated`},
		{"shared resource differs", partialExport("", strings.Replace(fileRes("/s"), `"x"`, `"y"`, 1)), 422, "validation",
			"/resources/0", "differs from the stored one"},
		{"set changes", partialExport("", fileRes("/z"), inResourceSet("c", fileRes("/a1"))), 422, "validation",
			"/resources/1/resource_set", `is in resource set "a" in the stored version and in resource set "c" here`},
		{"require across sets", partialExport("", inResourceSet("c", fileRes("/c1", "fs::File[h,path=/a1]"))), 422, "validation",
			"/resources/0/requires/0", `of resource set "c" must not require "fs::File[h,path=/a1]" of resource set "a"`},
		{"unknown environment", partialExport(""), 404, "not-found", "", ""},
	}
	for _, c := range cases {
		p := path
		if c.status == 404 {
			p = strings.Replace(path, "/part/", "/nope/", 1)
		}
		code, pr := f.call("PUT", p, c.body)
		if code != c.status || pr["type"] != "urn:intend:problem:"+c.typ {
			t.Errorf("%s: got %d %v; want %d %s", c.why, code, pr, c.status, c.typ)
			continue
		}
		if c.field == "" {
			continue
		}
		found := false
		errs, _ := pr["errors"].([]any)
		for _, e := range errs {
			m := e.(map[string]any)
			if m["field"] == c.field && strings.Contains(m["detail"].(string), c.detail) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problem does not name %s with %q: %v", c.why, c.field, c.detail, pr)
		}
	}
	// Nothing of the refused exports was stored.
	if l := f.mustCall("GET", "/api/v1/environments/part/versions", "", 200); len(l["items"].([]any)) != 2 {
		t.Errorf("versions after refused partial exports = %v; want 2", l)
	}
}
