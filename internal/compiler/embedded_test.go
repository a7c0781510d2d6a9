package compiler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/lsm"
)

const routerModel = `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#Address: {
	ip:     string @lsm(rw)
	prefix: *24 | int & >=0 & <=32 @lsm(rw+)
}

#Interface: {
	name: =~"^[a-z0-9/.-]+$" @lsm(rw)
	// The MTU; changes while the router is up.
	mtu:      *1500 | int & >=576 @lsm(rw+)
	vlan?:    int @lsm(rw)
	mac:      "02:00:\(name)" @lsm(r)
	address?: #Address @lsm(rw+)
}

#Router: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name:       string @lsm(rw)
		interfaces: [...#Interface] @lsm(rw+, key=name)
		uplinks: [...{port: int @lsm(rw), proto: string @lsm(rw), speed?: int @lsm(rw+)}] @lsm(rw, key=port, key=proto)
		labels: {[string]: string} @lsm(rw+)
	}
	output: {
		config: fs.#File & {
			path:    "/srv/routers/\(parameter.name).json"
			content: "\(len(parameter.interfaces))"
		}
	}
}

services: router: #Router
`

func TestEmbeddedEntities(t *testing.T) {
	t.Parallel()
	res, errs := compileServices(t, map[string]string{"main.cue": routerModel}, map[string]map[string]json.RawMessage{"router": {
		"r1": json.RawMessage(`{"name":"r1","interfaces":[{"name":"eth0","address":{"ip":"10.0.0.1"}}],"uplinks":[],"labels":{}}`),
	}})
	if errs != nil {
		t.Fatal(errs)
	}
	attrs := res.Services[0].Attributes
	byName := map[string]lsm.AttributeSpec{}
	for _, a := range attrs {
		byName[a.Name] = a
	}
	if byName["name"].Embedded != nil || byName["labels"].Embedded != nil {
		t.Errorf("a plain value is embedded: name %+v, labels %+v (a struct without @lsm fields is a dict)", byName["name"].Embedded, byName["labels"].Embedded)
	}
	ifs := byName["interfaces"]
	if ifs.Modifier != lsm.ReadWriteAlways || ifs.Embedded == nil || !ifs.Embedded.List || strings.Join(ifs.Embedded.Key, ",") != "name" || ifs.Required {
		t.Fatalf("interfaces = %+v", ifs)
	}
	type want struct {
		name     string
		modifier lsm.Modifier
		required bool
		def      string
		embedded bool
	}
	check := func(what string, got []lsm.AttributeSpec, wants []want) {
		t.Helper()
		if len(got) != len(wants) {
			t.Fatalf("%s: %+v", what, got)
		}
		for i, w := range wants {
			a := got[i]
			if a.Name != w.name || a.Modifier != w.modifier || a.Required != w.required || string(a.Default) != w.def || (a.Embedded != nil) != w.embedded {
				t.Errorf("%s: attribute %d = %+v, want %+v", what, i, a, w)
			}
		}
	}
	check("interfaces", ifs.Embedded.Attributes, []want{
		{"name", lsm.ReadWrite, true, "", false},
		{"mtu", lsm.ReadWriteAlways, false, "1500", false},
		{"vlan", lsm.ReadWrite, false, "", false},
		{"mac", lsm.ReadOnly, true, "", false},
		{"address", lsm.ReadWriteAlways, false, "", true},
	})
	if d := ifs.Embedded.Attributes[1].Description; d != "The MTU; changes while the router is up." {
		t.Errorf("mtu's description %q", d)
	}
	addr := ifs.Embedded.Attributes[4].Embedded
	if addr.List || len(addr.Key) != 0 {
		t.Errorf("address = %+v", addr)
	}
	check("address", addr.Attributes, []want{{"ip", lsm.ReadWrite, true, "", false}, {"prefix", lsm.ReadWriteAlways, false, "24", false}})
	up := byName["uplinks"]
	if up.Modifier != lsm.ReadWrite || up.Embedded == nil || strings.Join(up.Embedded.Key, ",") != "port,proto" {
		t.Fatalf("uplinks = %+v", up)
	}
	check("uplinks", up.Embedded.Attributes, []want{{"port", lsm.ReadWrite, true, "", false}, {"proto", lsm.ReadWrite, true, "", false}, {"speed", lsm.ReadWriteAlways, false, "", false}})

	// The catalog as JSON: the embedded entity is there, and an attribute
	// without one has no "embedded" member (catalogs without embedded
	// entities are unchanged byte for byte).
	b, err := json.Marshal(byName["name"])
	if err != nil || strings.Contains(string(b), "embedded") {
		t.Errorf("name as JSON: %s, %v", b, err)
	}
	b, _ = json.Marshal(ifs)
	if !strings.Contains(string(b), `"embedded":{"attributes":[{"name":"name"`) || !strings.Contains(string(b), `"list":true,"key":["name"]`) {
		t.Errorf("interfaces as JSON: %s", b)
	}

	// The rules read the catalog's embedded entities.
	var ae *lsm.AttributeError
	err = lsm.CheckCreate(attrs, map[string]any{"name": "r2", "interfaces": []any{map[string]any{"name": "eth0", "mac": "x"}}})
	if !asAttributeError(err, &ae) || len(ae.Problems) != 1 || ae.Problems[0].Attribute != "interfaces[name=eth0].mac" {
		t.Errorf("a create setting an element's r field: %v", err)
	}
}

func asAttributeError(err error, ae **lsm.AttributeError) bool {
	e, ok := err.(*lsm.AttributeError)
	*ae = e
	return ok
}

func TestEmbeddedEntityErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why, from, to, msg string
	}{
		{"a list without a key", "@lsm(rw+, key=name)", "@lsm(rw+)", "needs its key"},
		{"a key naming nothing", "key=name)", "key=nom)", "key=nom names no attribute"},
		{"an rw+ key", `name: =~"^[a-z0-9/.-]+$" @lsm(rw)`, `name: =~"^[a-z0-9/.-]+$" @lsm(rw+)`, "key=name: a key identifies its element"},
		{"an optional key", `name: =~"^[a-z0-9/.-]+$" @lsm(rw)`, `name?: =~"^[a-z0-9/.-]+$" @lsm(rw)`, "key=name: a key identifies its element"},
		{"a key twice", "key=name)", "key=name, key=name)", "key=name is given twice"},
		{"a key on one embedded entity", "address?: #Address @lsm(rw+)", "address?: #Address @lsm(rw+, key=ip)", "this is one embedded entity"},
		{"a key on a plain value", "labels: {[string]: string} @lsm(rw+)", "labels: {[string]: string} @lsm(rw+, key=x)", "only a list of embedded entities has a key"},
		{"a bad modifier inside", "ip:     string @lsm(rw)", "ip:     string @lsm(rwx)", "@lsm(rwx)"},
		{"a reference inside", "vlan?:    int @lsm(rw)", "site?: string @lsm(rw, ref=router)", "a reference is a top-level attribute"},
		{"an allocated attribute inside", "vlan?:    int @lsm(rw)", "vlan?:    int @lsm(r, allocate=vlans)", "an allocated attribute is a top-level attribute"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			model := strings.Replace(routerModel, c.from, c.to, 1)
			if model == routerModel {
				t.Fatalf("%q is not in the model", c.from)
			}
			_, errs := compileServices(t, map[string]string{"main.cue": model}, nil)
			if errs == nil {
				t.Fatal("compiled")
			}
			if !strings.Contains(errs.Error(), c.msg) {
				t.Errorf("no error saying %q: %v", c.msg, errs)
			}
		})
	}
}
