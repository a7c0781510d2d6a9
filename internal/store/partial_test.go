package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// setRes returns a resource object of fs::File path in set (shared: "")
// with the given content and requires (paths).
func setRes(path, set, content string, requires ...string) string {
	req := make([]string, len(requires))
	for i, q := range requires {
		req[i] = fmt.Sprintf("%q", "fs::File[h,path="+q+"]")
	}
	obj := fmt.Sprintf(`{"id":"fs::File[h,path=%s]","attributes":{"path":%q,"content":%q},"requires":[%s]`,
		path, path, content, strings.Join(req, ","))
	if set != "" {
		obj += fmt.Sprintf(`,"resource_set":%q`, set)
	}
	return obj + "}"
}

// partial decodes a partial export of the resource objects, removing sets.
func partial(t *testing.T, removed []string, objs ...string) (intent.Version, []string) {
	t.Helper()
	body := `{"resources":[` + strings.Join(objs, ",") + `]`
	if removed != nil {
		body += fmt.Sprintf(`,"removed_resource_sets":["%s"]`, strings.Join(removed, `","`))
	}
	v, rm, err := intent.DecodePartial([]byte(body + "}"))
	if err != nil {
		t.Fatalf("DecodePartial(%s): %v", body, err)
	}
	return v, rm
}

// partialBase exports the base version of the partial export tests: sets
// a, b and c, and shared resources.
func partialBase(t *testing.T, st *store.Store, envID string) store.VersionInfo {
	t.Helper()
	v, err := intent.DecodeBytes([]byte(`{"resources":[` + strings.Join([]string{
		setRes("/a1", "a", "x"), setRes("/a2", "a", "x", "/a1"), setRes("/a3", "a", "x", "/s1"),
		setRes("/b1", "b", "x"), setRes("/b2", "b", "x", "/s1"),
		setRes("/c1", "c", "x", "/s1"),
		setRes("/s1", "", "x"), setRes("/s2", "", "x"),
	}, ",") + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportVersion(context.Background(), envID, v)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// versionSets returns "path set content" for every resource of a version.
func versionSets(t *testing.T, st *store.Store, envID string, version int64) map[string]string {
	t.Helper()
	rs, err := st.VersionResources(context.Background(), envID, version, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rs {
		out[strings.TrimSuffix(strings.TrimPrefix(r.ID, "fs::File[h,path="), "]")] =
			fmt.Sprintf("%s %s %s", r.ResourceSet, contentAttr(t, r.Attributes), strings.Join(r.Requires, ","))
	}
	return out
}

// contentAttr returns the content attribute of stored attributes.
func contentAttr(t *testing.T, raw []byte) string {
	t.Helper()
	var attrs struct{ Content string }
	if err := json.Unmarshal(raw, &attrs); err != nil {
		t.Fatalf("attributes %s: %v", raw, err)
	}
	return attrs.Content
}

func TestExportPartial(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	v1 := partialBase(t, st, e.ID)
	before := versionSets(t, st, e.ID, v1.Version)

	// Set a: a1 changed, a2 gone, a3 unchanged, a4 new; set b removed (and
	// a set that never existed); s3 added, s1 repeated unchanged.
	p, removed := partial(t, []string{"b", "never"},
		setRes("/a4", "a", "x", "/a1", "/s3"), setRes("/a1", "a", "changed"), setRes("/a3", "a", "x", "/s1"),
		setRes("/s3", "", "x"), setRes("/s1", "", "x"))
	v2, err := st.ExportPartial(ctx, e.ID, p, removed)
	if err != nil {
		t.Fatalf("ExportPartial() = %v", err)
	}
	// a1 changed; a2, b1 and b2 removed; a4 and s3 added.
	if v2.Version != 2 || v2.ResourceCount != 7 || v2.ChangedCount != 6 {
		t.Errorf("v2 = %+v; want version 2 with 7 resources, 6 changed", v2)
	}
	want := map[string]string{
		"/a1": "a changed ",
		"/a3": "a x fs::File[h,path=/s1]",
		"/a4": "a x fs::File[h,path=/a1],fs::File[h,path=/s3]",
		"/c1": "c x fs::File[h,path=/s1]",
		"/s1": " x ",
		"/s2": " x ",
		"/s3": " x ",
	}
	if got := versionSets(t, st, e.ID, v2.Version); !maps.Equal(got, want) {
		t.Errorf("v2 resources (set content requires) =\n%q\nwant\n%q", got, want)
	}
	if got := versionSets(t, st, e.ID, v1.Version); !maps.Equal(got, before) {
		t.Errorf("v1 changed under the partial export:\n%q\nwant\n%q", got, before)
	}
	// Unchanged resources keep their rows: 8 of v1, and a1, a4, s3 opened.
	if n := count(t, conn, `select count(*) from version_resources where environment_id = $1::uuid`, e.ID); n != 11 {
		t.Errorf("version_resources has %d rows; want 11 (8 + 3 opened)", n)
	}
	if n := count(t, conn, `select count(*) from version_resources where environment_id = $1::uuid
		and last_version is null and resource_set = 'a'`, e.ID); n != 3 {
		t.Errorf("%d open rows of set a; want 3 (the set is denormalised into memberships)", n)
	}
	if n := count(t, conn, `select count(*) from version_resources where environment_id = $1::uuid
		and last_version is null and resource_set is null`, e.ID); n != 3 {
		t.Errorf("%d open rows of the shared set; want 3 (null)", n)
	}

	// A full export afterwards diffs against the merged version: the same
	// resources in one export change nothing.
	v3, err := st.ExportVersion(ctx, e.ID, func() intent.Version {
		v, err := intent.DecodeBytes([]byte(`{"resources":[` + strings.Join([]string{
			setRes("/a1", "a", "changed"), setRes("/a3", "a", "x", "/s1"), setRes("/a4", "a", "x", "/a1", "/s3"),
			setRes("/c1", "c", "x", "/s1"), setRes("/s1", "", "x"), setRes("/s2", "", "x"), setRes("/s3", "", "x"),
		}, ",") + "]}"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}())
	if err != nil || v3.ChangedCount != 0 || v3.ResourceCount != 7 {
		t.Errorf("full export of the merged version = %+v, %v; want 7 resources, none changed", v3, err)
	}
}

func TestExportPartialIntoNothing(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	p, removed := partial(t, []string{"b"}, setRes("/a1", "a", "x", "/s1"), setRes("/s1", "", "x"))
	v, err := st.ExportPartial(ctx, e.ID, p, removed)
	if err != nil || v.Version != 1 || v.ResourceCount != 2 || v.ChangedCount != 2 {
		t.Fatalf("ExportPartial() into an environment without versions = %+v, %v; want version 1 of 2 resources", v, err)
	}
	want := map[string]string{"/a1": "a x fs::File[h,path=/s1]", "/s1": " x "}
	if got := versionSets(t, st, e.ID, v.Version); !maps.Equal(got, want) {
		t.Errorf("v1 = %q; want %q", got, want)
	}

	if _, err := st.ExportPartial(ctx, "00000000-0000-0000-0000-000000000000", p, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ExportPartial(unknown environment) = %v; want ErrNotFound", err)
	}
}

func TestExportPartialRefusals(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	partialBase(t, st, e.ID)
	rows := count(t, conn, `select count(*) from version_resources`)
	contents := count(t, conn, `select count(*) from resource_contents`)

	tests := []struct {
		name    string
		removed []string
		objs    []string
		field   string // the path of the problem
		detail  string // text the problem's detail holds
		reason  string
	}{
		{
			name:   "shared resource differs",
			objs:   []string{setRes("/a1", "a", "x"), setRes("/s1", "", "changed")},
			field:  "/resources/1",
			detail: `shared resource "fs::File[h,path=/s1]" differs from the stored one; shared resources change only in a full export`,
			reason: "other sets require shared resources",
		},
		{
			name:   "resource changes set",
			objs:   []string{setRes("/a1", "a", "x"), setRes("/b1", "a", "x")},
			field:  "/resources/1/resource_set",
			detail: `resource "fs::File[h,path=/b1]" is in resource set "b" in the stored version and in resource set "a" here`,
			reason: "set b would lose it without being exported",
		},
		{
			name:   "set resource becomes shared",
			objs:   []string{setRes("/c1", "", "x")},
			field:  "/resources/0/resource_set",
			detail: `is in resource set "c" in the stored version and in the shared set here`,
			reason: "shared and set are different sets too",
		},
		{
			name:    "set both updated and removed",
			removed: []string{"c", "a"},
			objs:    []string{setRes("/a1", "a", "x")},
			field:   "/removed_resource_sets/1",
			detail:  `resource set "a" is both updated (/resources/0 is one of its resources) and removed`,
			reason:  "contradictory",
		},
		{
			name:   "require across sets",
			objs:   []string{setRes("/a1", "a", "x", "/s1", "/c1")},
			field:  "/resources/0/requires/1",
			detail: `"fs::File[h,path=/a1]" of resource set "a" must not require "fs::File[h,path=/c1]" of resource set "c"`,
			reason: "set c could be replaced without a1",
		},
		{
			name:    "require into a removed set",
			removed: []string{"b"},
			objs:    []string{setRes("/s9", "", "x", "/b1")},
			field:   "/resources/0/requires/0",
			detail:  `"fs::File[h,path=/b1]" is not in this version`,
			reason:  "the merged version is validated as a whole",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The removed sets go to the store directly: DecodePartial
			// would refuse a set both updated and removed itself.
			p, _ := partial(t, nil, tt.objs...)
			_, err := st.ExportPartial(ctx, e.ID, p, tt.removed)
			var ve *intent.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("ExportPartial() = %v; want a *intent.ValidationError (%s)", err, tt.reason)
			}
			found := slices.ContainsFunc(ve.Problems, func(p intent.FieldProblem) bool {
				return p.Path == tt.field && strings.Contains(p.Detail, tt.detail)
			})
			if !found {
				t.Errorf("problems %q; want one at %s saying %q (%s)", ve.Problems, tt.field, tt.detail, tt.reason)
			}
			got, err := st.GetEnvironment(ctx, e.ID)
			if err != nil || got.LastVersion != 1 {
				t.Errorf("last_version = %d, %v after a refused export; want 1", got.LastVersion, err)
			}
			if n := count(t, conn, `select count(*) from version_resources`); n != rows {
				t.Errorf("version_resources has %d rows after a refused export; want %d", n, rows)
			}
			if n := count(t, conn, `select count(*) from resource_contents`); n != contents {
				t.Errorf("resource_contents has %d rows after a refused export; want %d", n, contents)
			}
		})
	}
}

// BenchmarkExportPartial measures a partial export that replaces a set of
// 1,000 resources (all changed) in a version of 100,000: the cost is
// reading and checking the open rows, not writing.
func BenchmarkExportPartial(b *testing.B) { benchmarkExportPartial(b, 100_000, 1000) }

// BenchmarkExportPartialInstance is one service instance's update among
// 10,000 live ones (P7's bar): a set of 3 resources, all changed, in a
// version of 30,000.
func BenchmarkExportPartialInstance(b *testing.B) { benchmarkExportPartial(b, 30_000, 3) }

func benchmarkExportPartial(b *testing.B, size, changed int) {
	ctx := context.Background()
	st, _ := openStore(b)
	e := newEnv(b, st)
	if _, err := st.ExportVersion(ctx, e.ID, bigVersion(b, size, 0, 0, "x", "")); err != nil {
		b.Fatal(err)
	}
	set := func(gen int) (intent.Version, []string) {
		objs := make([]string, changed)
		for i := range objs {
			objs[i] = setRes(fmt.Sprintf("/set%d", i), "a", fmt.Sprint(gen), fmt.Sprintf("/f%d", i))
		}
		v, removed, err := intent.DecodePartial([]byte(`{"resources":[` + strings.Join(objs, ",") + `]}`))
		if err != nil {
			b.Fatal(err)
		}
		return v, removed
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		v, removed := set(i)
		b.StartTimer()
		info, err := st.ExportPartial(ctx, e.ID, v, removed)
		if err != nil {
			b.Fatal(err)
		}
		if want := changed; i > 0 && info.ChangedCount != want {
			b.Fatalf("changed %d; want %d", info.ChangedCount, want)
		}
	}
}
