package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// diffVersion decodes a version from its resources' JSON objects.
func diffVersion(t *testing.T, resources ...string) intent.Version {
	t.Helper()
	return decode(t, `{"resources":[`+strings.Join(resources, ",")+`]}`)
}

func TestDiffVersions(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()

	const (
		a = `"fs::File[h,path=/a]"`
		b = `"fs::File[h,path=/b]"`
		c = `"fs::File[h,path=/c]"`
		d = `"fs::File[h,path=/d]"`
		n = `"fs::File[h,path=/n]"`
		u = `"fs::File[h,path=/u]"`
	)
	versions := []intent.Version{
		// v1
		diffVersion(t,
			`{"id":`+a+`,"attributes":{"path":"/a","content":"x","mode":"0644"}}`,
			`{"id":`+b+`,"attributes":{"path":"/b","content":"x"}}`,
			`{"id":`+c+`,"attributes":{"path":"/c","content":"x"}}`,
			`{"id":`+n+`,"attributes":{"path":"/n","size":420}}`,
			`{"id":`+u+`,"attributes":{"path":"/u","meta":{"k":[1,"two"]}}}`,
		),
		// v2: a's attributes change (one changed, one removed, one
		// added), b gains a requires and a flag, c is removed, d is
		// added, n's number is spelled differently, u is unchanged.
		diffVersion(t,
			`{"id":`+a+`,"attributes":{"path":"/a","content":"y","owner":"root"}}`,
			`{"id":`+b+`,"attributes":{"path":"/b","content":"x"},"requires":[`+a+`],"send_event":true}`,
			`{"id":`+d+`,"attributes":{"path":"/d","content":"x"}}`,
			`{"id":`+n+`,"attributes":{"path":"/n","size":420.0}}`,
			`{"id":`+u+`,"attributes":{"meta":{"k":[1,"two"]},"path":"/u"}}`,
		),
		// v3: back to v1 but for d (c comes back with the same content).
		diffVersion(t,
			`{"id":`+a+`,"attributes":{"path":"/a","content":"x","mode":"0644"}}`,
			`{"id":`+b+`,"attributes":{"path":"/b","content":"x"}}`,
			`{"id":`+c+`,"attributes":{"path":"/c","content":"x"}}`,
			`{"id":`+d+`,"attributes":{"path":"/d","content":"x"}}`,
			`{"id":`+n+`,"attributes":{"path":"/n","size":420}}`,
			`{"id":`+u+`,"attributes":{"path":"/u","meta":{"k":[1,"two"]}}}`,
		),
	}
	for _, v := range versions {
		if _, err := st.ExportVersion(ctx, e.ID, v); err != nil {
			t.Fatal(err)
		}
	}

	forward := `{"from":1,"to":2,
		"added":["fs::File[h,path=/d]"],
		"removed":["fs::File[h,path=/c]"],
		"modified":[
			{"id":"fs::File[h,path=/a]","changes":{
				"content":{"from":"x","to":"y"},
				"mode":{"from":"0644","to":null},
				"owner":{"from":null,"to":"root"}}},
			{"id":"fs::File[h,path=/b]","changes":{
				"requires":{"from":[],"to":["fs::File[h,path=/a]"]},
				"send_event":{"from":false,"to":true}}},
			{"id":"fs::File[h,path=/n]","changes":{
				"size":{"from":420,"to":420.0}}}]}`
	backward := `{"from":2,"to":1,
		"added":["fs::File[h,path=/c]"],
		"removed":["fs::File[h,path=/d]"],
		"modified":[
			{"id":"fs::File[h,path=/a]","changes":{
				"content":{"from":"y","to":"x"},
				"mode":{"from":null,"to":"0644"},
				"owner":{"from":"root","to":null}}},
			{"id":"fs::File[h,path=/b]","changes":{
				"requires":{"from":["fs::File[h,path=/a]"],"to":[]},
				"send_event":{"from":true,"to":false}}},
			{"id":"fs::File[h,path=/n]","changes":{
				"size":{"from":420.0,"to":420}}}]}`

	tests := []struct {
		name   string
		a, b   int64
		want   string
		reason string
	}{
		{"forward", 1, 2, forward,
			"an add, a removal, attribute changes (absent sides null), a requires and a flag change; numbers compared by text"},
		{"backward", 2, 1, backward,
			"from a newer to an older version is the reverse diff"},
		{"same version", 2, 2, `{"from":2,"to":2,"added":[],"removed":[],"modified":[]}`,
			"a version does not differ from itself; lists are empty, not null"},
		{"removed and re-added unchanged", 1, 3, `{"from":1,"to":3,"added":["fs::File[h,path=/d]"],"removed":[],"modified":[]}`,
			"c left in v2 and came back with the same content in v3: between v1 and v3 it did not change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.DiffVersions(ctx, e.ID, tt.a, tt.b)
			if err != nil {
				t.Fatalf("DiffVersions(%d, %d): %v", tt.a, tt.b, err)
			}
			gotJSON, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := compactJSON(t, string(gotJSON)), compactJSON(t, tt.want); g != w {
				t.Errorf("DiffVersions(%d, %d) =\n%s\nwant\n%s\n(%s)", tt.a, tt.b, g, w, tt.reason)
			}
		})
	}

	notFound := []struct {
		name   string
		a, b   int64
		reason string
	}{
		{"unknown to", 1, 99, "the newer version does not exist"},
		{"unknown from", 99, 1, "the older version does not exist"},
		{"both unknown", 98, 99, "the error names the first missing one"},
	}
	for _, tt := range notFound {
		t.Run(tt.name, func(t *testing.T) {
			_, err := st.DiffVersions(ctx, e.ID, tt.a, tt.b)
			missing := tt.b
			if tt.a > 3 {
				missing = tt.a
			}
			if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "version "+strconv.FormatInt(missing, 10)) {
				t.Errorf("DiffVersions(%d, %d) error = %v, want ErrNotFound naming version %d (%s)",
					tt.a, tt.b, err, missing, tt.reason)
			}
		})
	}
}

// compactJSON is s decoded and encoded again (members sorted, numbers as
// written), so two encodings of one value compare equal.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
