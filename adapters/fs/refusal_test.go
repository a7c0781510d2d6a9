package fs_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// refusal is an invalid resource, why it is invalid, and what the error
// must say.
type refusal struct {
	name    string
	reason  string
	res     adapters.Resource
	wantMsg string
}

// pathRefusals returns the refusals every fs type shares: a resource of
// type typ whose path is missing, relative, unclean or not a string, and
// one whose id names another path. attrs are the type's other attributes,
// valid on their own; good is a path in dir.
func pathRefusals(typ, dir, good string, attrs map[string]any) []refusal {
	withPath := func(path any) adapters.Resource {
		a := maps.Clone(attrs)
		if path != nil {
			a["path"] = path
		}
		return pathResource(typ, a, false)
	}
	mismatch := withPath(good)
	mismatch.ID.Value = "/other"
	name := filepath.Base(good)
	return []refusal{
		{"no path", "path is the id attribute and required", withPath(nil), `"path" is required`},
		{"relative path", "a relative path would depend on the executor's working directory",
			withPath("etc/app"), "not an absolute path"},
		{"unclean path", "two spellings of one path would be two resources",
			withPath(dir + "/a/../" + name), "not clean"},
		{"dot in path", "a dot is another spelling of the same path",
			withPath(dir + "/./" + name), "not clean"},
		{"trailing slash", "a trailing slash is not clean either", withPath(good + "/"), "not clean"},
		{"path not string", "a number is not a path", withPath(42.0), `attribute "path": must be a string`},
		{"id mismatch", "the id and the path attribute must name the same resource",
			mismatch, `resource id names path "/other"`},
	}
}

// idAttribute returns a resource of type typ with attrs whose id names the
// attribute attr, with value, instead of the path.
func idAttribute(typ, attr, value string, attrs map[string]any) adapters.Resource {
	return adapters.Resource{ID: resource.ID{Type: typ, Agent: "local", Attribute: attr, Value: value}, Attributes: attrs}
}

// assertRefused runs every case through the engine, in parallel, and
// checks that each fails with a permanent error containing its wantMsg;
// once all have run, nothing may exist at path.
func assertRefused(t *testing.T, h adapters.Handler, cases []refusal, path string) {
	t.Helper()
	runRefusals(t, "refused", h, cases)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("invalid resources touched the disk: %v", err)
	}
}

// runRefusals runs every case through the engine, in parallel in a group of
// subtests named group, and checks that each fails with a permanent error
// containing its wantMsg. It returns once all cases have finished, so that
// the caller can check the disk after them.
func runRefusals(t *testing.T, group string, h adapters.Handler, cases []refusal) {
	t.Helper()
	t.Run(group, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				_, err := adapters.Run(context.Background(), h, adapters.NewContext(), c.res, false)
				if err == nil {
					t.Fatalf("%s: no error", c.reason)
				}
				if got := adapters.ClassOf(err); got != adapters.ClassPermanent {
					t.Errorf("%s: class %q, want permanent (%v)", c.reason, got, err)
				}
				if !strings.Contains(err.Error(), c.wantMsg) {
					t.Errorf("%s: error %q does not contain %q", c.reason, err, c.wantMsg)
				}
			})
		}
	})
}

// conflict is a path where something stands that the handler must not
// replace or remove, and what the error must say.
type conflict struct {
	name    string
	reason  string
	path    string
	purged  bool
	wantMsg string
}

// assertConflicts runs, for every case, the resource res makes of its path
// and purge, and checks that each is refused with a permanent error
// containing its wantMsg. It returns once all cases have finished, so that
// the caller can check that what stood in the way is untouched.
func assertConflicts(t *testing.T, h adapters.Handler, res func(path string, purged bool) adapters.Resource, cases []conflict) {
	t.Helper()
	refusals := make([]refusal, len(cases))
	for i, c := range cases {
		refusals[i] = refusal{c.name, c.reason, res(c.path, c.purged), c.wantMsg}
	}
	runRefusals(t, "conflict", h, refusals)
}
