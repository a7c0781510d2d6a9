package compiler

import (
	"context"
	"reflect"
	"testing"
)

// TestOrderRemovals: purged resources of one set are removed children
// first; what stays no longer waits for what goes; requirements across
// sets, on resources that stay, or outside the list are kept; the input's
// slices are not changed.
func TestOrderRemovals(t *testing.T) {
	t.Parallel()
	parentReq := []string{"shared-root"}
	rs := []Resource{
		{ID: "dir", Purged: true, ResourceSet: "s", Requires: parentReq},
		{ID: "sub", Purged: true, ResourceSet: "s", Requires: []string{"dir"}},
		{ID: "file", Purged: true, ResourceSet: "s", Requires: []string{"sub", "conf"}},
		{ID: "conf", ResourceSet: "s"},                                           // stays
		{ID: "user", ResourceSet: "s", Requires: []string{"dir", "conf"}},        // stays, required dir
		{ID: "other", Purged: true, ResourceSet: "t", Requires: []string{"dir"}}, // another set
		{ID: "untouched", Requires: []string{"elsewhere"}},
	}
	subReq, fileReq := rs[1].Requires, rs[2].Requires
	OrderRemovals(rs)
	want := map[string][]string{
		"dir":       {"shared-root", "sub"},
		"sub":       {"file"},
		"file":      {"conf"},
		"conf":      nil,
		"user":      {"conf"},
		"other":     {"dir"},
		"untouched": {"elsewhere"},
	}
	for _, r := range rs {
		if !reflect.DeepEqual(r.Requires, want[r.ID]) {
			t.Errorf("%s requires %v, want %v", r.ID, r.Requires, want[r.ID])
		}
	}
	if parentReq[0] != "shared-root" || len(parentReq) != 1 {
		t.Errorf("the input's requires were changed: %v", parentReq)
	}
	if !reflect.DeepEqual(subReq, []string{"dir"}) || !reflect.DeepEqual(fileReq, []string{"sub", "conf"}) {
		t.Errorf("requires slices were changed in place: %v, %v", subReq, fileReq)
	}

	// Nothing purged: nothing changes.
	plain := []Resource{{ID: "a", Requires: []string{"b"}}, {ID: "b"}}
	OrderRemovals(plain)
	if !reflect.DeepEqual(plain[0].Requires, []string{"b"}) {
		t.Errorf("without purged resources: %v", plain[0].Requires)
	}
}

// TestCompileOrdersRemovals: a model that purges a directory and the file
// in it exports the file first.
func TestCompileOrdersRemovals(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{"main.cue": `package main

import "intend.dev/std/fs"

resources: {
	d: fs.#Directory & {path: "/tmp/x", purged: true}
	f: fs.#File & {path: "/tmp/x/f", content: "", purged: true, requires: [d]}
}
`})
	res, err := Compile(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range res.Resources {
		got[r.ID] = r.Requires
	}
	if d := got["fs::Directory[localhost,path=/tmp/x]"]; !reflect.DeepEqual(d, []string{"fs::File[localhost,path=/tmp/x/f]"}) {
		t.Errorf("the purged directory requires %v, want the file in it", d)
	}
	if f := got["fs::File[localhost,path=/tmp/x/f]"]; len(f) != 0 {
		t.Errorf("the purged file requires %v, want nothing", f)
	}
}
