package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const relationsModel = `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

services: site: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: string @lsm(rw)
		port: int @lsm(rw+)
	}
	output: {}
}

services: alias: lsm.#Entity & {
	lifecycle: lsm.simple
	parameter: {
		name: string @lsm(rw)
		site: string @lsm(rw, ref=site)
		peers: [...string] @lsm( rw+ , ref = site )
	}
	related: site: _
	output: f: fs.#File & {path: "/tmp/\(parameter.name)", content: "\(related.site.port) \(len(related.peers))\n"}
}
`

// TestReferenceAttributes: ref=<entity> is extracted into the catalog;
// the compiler refuses references to no entity, of a type that names no
// instance, read-only ones and other options.
func TestReferenceAttributes(t *testing.T) {
	t.Parallel()
	res, errs := compileServices(t, map[string]string{"main.cue": relationsModel}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	refs := map[string]string{}
	for _, s := range res.Services {
		for _, a := range s.Attributes {
			refs[s.Name+"."+a.Name] = a.References + " " + string(a.Modifier)
		}
	}
	if refs["alias.site"] != "site rw" || refs["alias.peers"] != "site rw+" || refs["alias.name"] != " rw" {
		t.Errorf("references: %v", refs)
	}
	for _, c := range []struct{ why, attr, want string }{
		{"an entity the model lacks", `site: string @lsm(rw, ref=nosuch)`, "ref=nosuch names no service entity"},
		{"an int", `site: int @lsm(rw, ref=site)`, "is a string (an instance's id or identity) or a list of strings"},
		{"a list of ints", `site: [...int] @lsm(rw, ref=site)`, "or a list of strings"},
		{"read-only", `site: string @lsm(r, ref=site)`, "not r"},
		{"another option", `site: string @lsm(rw, owner=site)`, "only ref=<entity> may follow"},
		{"two refs", `site: string @lsm(rw, ref=site, ref=site)`, "only ref=<entity> may follow"},
	} {
		model := strings.Replace(relationsModel, `site: string @lsm(rw, ref=site)`, c.attr, 1)
		_, errs := compileServices(t, map[string]string{"main.cue": model}, nil)
		if !strings.Contains(errs.Error(), c.want) || !strings.Contains(errs.Error(), "services.alias.parameter.site") {
			t.Errorf("%s: %v, want %q", c.why, errs, c.want)
		}
	}
}

// TestRelated: Options.Related fills an instance's related field; a
// changed related value evaluates the instance again despite the cache.
func TestRelated(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{"main.cue": relationsModel})
	cache := NewCache(1000)
	inst := map[string]map[string]json.RawMessage{"alias": {"a1": json.RawMessage(`{"name": "www", "site": "blog", "peers": ["blog"]}`)}}
	compile := func(port int) string {
		t.Helper()
		rel := json.RawMessage(`{"site": {"name": "blog", "port": ` + itoa(port) + `}, "peers": [{"name": "blog"}]}`)
		res, err := Compile(context.Background(), Options{Dir: dir, Instances: inst, Cache: cache, SourceKey: "k",
			Related: map[string]map[string]json.RawMessage{"alias": {"a1": rel}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(res.Resources[0].Attributes["content"])
	}
	if got := compile(8081); got != `"8081 1\n"` {
		t.Errorf("content = %s", got)
	}
	if got := compile(8082); got != `"8082 1\n"` {
		t.Errorf("content after the related change = %s (a stale cache entry?)", got)
	}
	// Without related, the output is incomplete: an error of the instance.
	_, err := Compile(context.Background(), Options{Dir: dir, Instances: inst})
	var errs Errors
	if !errors.As(err, &errs) || !strings.Contains(errs.Error(), "services.alias.instances.a1") {
		t.Errorf("without related: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
