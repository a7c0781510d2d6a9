package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/intendhq/intend/internal/lsm"
)

const vmModel = `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#VM: lsm.#Entity & {
	lifecycle:   lsm.simple
	identity:    "name"
	description: "A virtual machine."
	parameter: {
		// The VM's name.
		name: =~"^[a-z][a-z0-9-]*$" @lsm(rw)
		// Memory in GiB; can change while the VM is up.
		memory: *2 | int & >=1 & <=64 @lsm(rw+)
		// The address the server allocates.
		address?: string @lsm(r)
		size: "s" | "m" | "l"
		tags: [...string] @lsm(rw+)
	}
	output: {
		dir: fs.#Directory & {path: "/srv/vms/\(parameter.name)"}
		config: fs.#File & {
			path:     "\(dir.path)/vm.conf"
			content:  "memory=\(parameter.memory) size=\(parameter.size)\n"
			requires: [dir]
		}
	}
}

services: vm: #VM
`

// compileServices compiles the files with instances from the inventory.
func compileServices(t *testing.T, files map[string]string, instances map[string]map[string]json.RawMessage) (*Result, Errors) {
	t.Helper()
	res, err := Compile(context.Background(), Options{Dir: writeProject(t, files), Instances: instances})
	if err == nil {
		return res, nil
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("compile failed without compile errors: %v", err)
	}
	return nil, errs
}

func sameJSONText(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("the test's %s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

func TestServiceEntity(t *testing.T) {
	t.Parallel()
	res, errs := compileServices(t, map[string]string{"main.cue": vmModel}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if len(res.Services) != 1 {
		t.Fatalf("services = %+v", res.Services)
	}
	svc := res.Services[0]
	if svc.Name != "vm" || svc.Identity != "name" || svc.Description != "A virtual machine." {
		t.Errorf("service = %q, identity %q, description %q", svc.Name, svc.Identity, svc.Description)
	}
	if len(res.Resources) != 0 || res.Instances != 0 {
		t.Errorf("an entity without instances produced %d resources, %d instances", len(res.Resources), res.Instances)
	}
	want := []struct {
		name     string
		modifier lsm.Modifier
		desc     string
		def      string // JSON, "" for none
		required bool
		schema   string
	}{
		{"name", lsm.ReadWrite, "The VM's name.", "", true,
			`{"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "description": "The VM's name."}`},
		{"memory", lsm.ReadWriteAlways, "Memory in GiB; can change while the VM is up.", "2", false,
			`{"type": "integer", "minimum": 1, "maximum": 64, "default": 2, "description": "Memory in GiB; can change while the VM is up."}`},
		{"address", lsm.ReadOnly, "The address the server allocates.", "", false,
			`{"type": "string", "description": "The address the server allocates."}`},
		{"size", lsm.ReadWrite, "", "", true,
			`{"type": "string", "enum": ["s", "m", "l"]}`},
		{"tags", lsm.ReadWriteAlways, "", "[]", false,
			`{"type": "array", "items": {"type": "string"}, "default": []}`},
	}
	if len(svc.Attributes) != len(want) {
		t.Fatalf("attributes = %+v", svc.Attributes)
	}
	for i, w := range want {
		a := svc.Attributes[i]
		if a.Name != w.name || a.Modifier != w.modifier || a.Description != w.desc || a.Required != w.required || string(a.Default) != w.def {
			t.Errorf("attribute %d = {%s %s %q default %s required %v}, want %+v", i, a.Name, a.Modifier, a.Description, a.Default, a.Required, w)
		}
		if !sameJSONText(t, a.Schema, w.schema) {
			t.Errorf("%s: schema %s, want %s", w.name, a.Schema, w.schema)
		}
	}
	if err := lsm.CheckCreate(svc.Attributes, map[string]any{"name": "web", "size": "s"}); err != nil {
		t.Errorf("the catalog's attributes refuse a good create: %v", err)
	}
	if err := lsm.CheckCreate(svc.Attributes, map[string]any{"name": "web"}); err == nil {
		t.Error("the catalog's attributes take a create without size")
	}
}

// TestServiceConfigName: an auto transfer's config_name reaches the
// catalog's lifecycle.
func TestServiceConfigName(t *testing.T) {
	t.Parallel()
	model := strings.Replace(vmModel, "lifecycle:   lsm.simple", `lifecycle: lsm.simple & {
		transfers: [{}, {}, {}, {config_name: "auto_creating"}, ...]
	}`, 1)
	if model == vmModel {
		t.Fatal("vmModel has no lifecycle: lsm.simple")
	}
	res, errs := compileServices(t, map[string]string{"main.cue": model}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	var names []string
	for _, tr := range res.Services[0].Lifecycle.Transfers {
		if tr.ConfigName != "" {
			names = append(names, tr.Source+":"+tr.ConfigName)
		}
	}
	if len(names) != 1 || names[0] != "acknowledged:auto_creating" {
		t.Errorf("config names = %v", names)
	}
}

// TestStdSimpleIsGoSimple holds intend.dev/std/lsm's simple equal to
// lsm.Simple, decoded as the catalog would.
func TestStdSimpleIsGoSimple(t *testing.T) {
	t.Parallel()
	res, errs := compileServices(t, map[string]string{"main.cue": vmModel}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	got, want := res.Services[0].Lifecycle, lsm.Simple()
	if reflect.DeepEqual(got, want) {
		return
	}
	for _, k := range slicesSorted(want.States, got.States) {
		if got.States[k] != want.States[k] {
			t.Errorf("state %s: CUE %+v, Go %+v", k, got.States[k], want.States[k])
		}
	}
	for i := range max(len(got.Transfers), len(want.Transfers)) {
		var g, w lsm.Transfer
		if i < len(got.Transfers) {
			g = got.Transfers[i]
		}
		if i < len(want.Transfers) {
			w = want.Transfers[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("transfer %d: CUE %+v, Go %+v", i, g, w)
		}
	}
	if got.Name != want.Name || got.Start != want.Start {
		t.Errorf("CUE %s from %s, Go %s from %s", got.Name, got.Start, want.Name, want.Start)
	}
}

func slicesSorted(ms ...map[string]lsm.State) []string {
	set := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

func TestServiceInstances(t *testing.T) {
	t.Parallel()
	insts := map[string]map[string]json.RawMessage{"vm": {
		"0b6c": json.RawMessage(`{"name": "web", "size": "s"}`),
		"9f2e": json.RawMessage(`{"name": "db", "size": "l", "memory": 16, "address": "10.0.0.7"}`),
	}}
	res, errs := compileServices(t, map[string]string{"main.cue": vmModel}, insts)
	if errs != nil {
		t.Fatal(errs)
	}
	if res.Instances != 2 || len(res.Resources) != 4 {
		t.Fatalf("%d instances, %d resources", res.Instances, len(res.Resources))
	}
	rs := byID(res)
	for id, want := range map[string]struct{ set, content string }{
		"fs::File[localhost,path=/srv/vms/web/vm.conf]": {"vm/0b6c", `"memory=2 size=s\n"`},
		"fs::File[localhost,path=/srv/vms/db/vm.conf]":  {"vm/9f2e", `"memory=16 size=l\n"`},
		"fs::Directory[localhost,path=/srv/vms/web]":    {"vm/0b6c", ""},
		"fs::Directory[localhost,path=/srv/vms/db]":     {"vm/9f2e", ""},
	} {
		r, ok := rs[id]
		if !ok {
			t.Errorf("no %s among %v", id, rs)
			continue
		}
		if r.ResourceSet != want.set {
			t.Errorf("%s: set %q, want %q", id, r.ResourceSet, want.set)
		}
		if want.content != "" && string(r.Attributes["content"]) != want.content {
			t.Errorf("%s: content %s, want %s", id, r.Attributes["content"], want.content)
		}
	}
	if got := rs["fs::File[localhost,path=/srv/vms/db/vm.conf]"].Origin; !strings.HasPrefix(got, "services.vm.instances.9f2e: ") {
		t.Errorf("origin %q does not name the instance", got)
	}
}

func TestServiceErrors(t *testing.T) {
	t.Parallel()
	entity := func(parameter, rest string) string {
		return `package main

import "intend.dev/std/lsm"

services: vm: lsm.#Entity & {
	parameter: {
` + parameter + `
	}
	output: {}
` + rest + `
}
`
	}
	simple := "\tlifecycle: lsm.simple"
	broken := `	lifecycle: {
		name:  "mine"
		start: "new"
		states: {
			new: {model_state: "candidate"}
			up: {model_state: "active", export: true}
			orphan: {model_state: "inactive"}
		}
		transfers: [
			{source: "new", target: "up", trigger: "auto"},
			{source: "up", target: "nowhere", trigger: "on_delete"},
		]
	}`
	type want struct {
		instance, path, msg string
		line                int // of main.cue; 0: no position wanted
	}
	cases := []struct {
		why       string
		model     string
		instances map[string]json.RawMessage
		want      []want
	}{
		{"a modifier that does not exist", entity("\t\tname: string @lsm(rwx)", simple), nil,
			[]want{{"", "services.vm.parameter.name", "@lsm(rwx)", 7}}},
		{"two modifiers", entity("\t\tname: string @lsm(rw) @lsm(r)", simple), nil,
			[]want{{"", "services.vm.parameter.name", "two modifiers", 7}}},
		{"a broken lifecycle", entity("\t\tname: string", broken), nil,
			[]want{
				{"", "services.vm.lifecycle.transfers[1]", `target state "nowhere" does not exist`, 20},
				{"", "services.vm.lifecycle.states.orphan", "no transfer leaves this state", 16},
				{"", "services.vm.lifecycle.states.orphan", "cannot be reached", 16},
			}},
		{"a lifecycle CUE refuses", entity("\t\tname: string", strings.Replace(broken, `"on_delete"`, `"on_destroy"`, 1)), nil,
			[]want{{"", "services.vm.lifecycle.transfers.1.trigger", "conflicting values", 20}}},
		{"an initial state that is terminal", entity("\t\tname: string", "\tlifecycle: lsm.simple & {initial_states: [\"terminated\"]}"), nil,
			[]want{{"", "services.vm.lifecycle.initial_states", "cannot be an initial state", 0}}},
		{"a config name on an api transfer", entity("\t\tname: string", strings.Replace(broken,
			`{source: "up", target: "nowhere", trigger: "on_delete"},`,
			`{source: "up", target: "new", trigger: "api", config_name: "again"},`, 1)), nil,
			[]want{{"", "services.vm.lifecycle.transfers[1]", `config_name "again"`, 20}}},
		{"a config name CUE refuses", entity("\t\tname: string", strings.Replace(broken,
			`trigger: "auto"}`, `trigger: "auto", config_name: "no spaces"}`, 1)), nil,
			[]want{{"", "services.vm.lifecycle.transfers.0.config_name", "invalid value", 19}}},
		{"an identity naming nothing", entity("\t\tname: string", simple+"\n\tidentity: \"id\""), nil,
			[]want{{"", "services.vm.identity", `names "id"`, 11}}},
		{"an instance breaking the parameter's constraints", entity("\t\tname: =~\"^[a-z]+$\"", simple),
			map[string]json.RawMessage{"i1": json.RawMessage(`{"name": "Web!"}`)},
			[]want{{"services.vm.instances.i1", "services.vm.parameter.name", "invalid value", 7}}},
		{"an instance with an attribute the entity lacks", entity("\t\tname: string", simple),
			map[string]json.RawMessage{"i1": json.RawMessage(`{"name": "web", "colour": "red"}`)},
			[]want{{"services.vm.instances.i1", "parameter.colour", `no attribute "colour"`, 0}}},
		{"an instance that is not JSON", entity("\t\tname: string", simple),
			map[string]json.RawMessage{"i1": json.RawMessage(`{"name": `)},
			[]want{{"services.vm.instances.i1", "", "", 0}}},
		{"no lifecycle", entity("\t\tname: string", ""), nil,
			[]want{{"", "services.vm.lifecycle", "needs a lifecycle", 5}}},
		{"no parameter", "package main\n\nservices: vm: {output: {}}\n", nil,
			[]want{{"", "services.vm", "needs a parameter and an output", 3}}},
		{"a name that is no path segment", strings.Replace(entity("\t\tname: string", simple), "services: vm:", `services: "v/m":`, 1), nil,
			[]want{{"", `services."v/m"`, "a letter and then", 5}}},
		{"a refinement of the same name", entity("\t\tname: string", simple) + "refinements: vm: {using: {parameter: {}, output: {}}}\n", nil,
			[]want{{"", "services.vm", "refinements.vm has this name too", 5}}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			var insts map[string]map[string]json.RawMessage
			if c.instances != nil {
				insts = map[string]map[string]json.RawMessage{"vm": c.instances}
			}
			_, errs := compileServices(t, map[string]string{"main.cue": c.model}, insts)
			if errs == nil {
				t.Fatal("compiled")
			}
			for _, w := range c.want {
				found := false
				for _, e := range errs {
					if e.Instance != w.instance || (w.path != "" && e.Path != w.path) || !strings.Contains(e.Message, w.msg) {
						continue
					}
					found = true
					if w.line == 0 {
						break
					}
					at := false
					for _, p := range e.Positions {
						at = at || (p.File == "main.cue" && p.Line == w.line)
					}
					if !at {
						t.Errorf("%s: %q is not at main.cue:%d: %v", w.path, e.Message, w.line, e.Positions)
					}
					break
				}
				if !found {
					t.Errorf("no error %+v among:\n%v", w, errs)
				}
			}
		})
	}
}

// TestServiceInstancesForNothing: instances for an entity the model does
// not define are an error, as for refinements.
func TestServiceInstancesForNothing(t *testing.T) {
	t.Parallel()
	_, errs := compileServices(t, map[string]string{"main.cue": vmModel},
		map[string]map[string]json.RawMessage{"vpn": {"x": json.RawMessage(`{}`)}})
	errorAt(t, errs, "refinements.vpn", `instances were given for refinement "vpn"`)
}

// TestJSONSchema covers what the schema generator reads from CUE values.
func TestJSONSchema(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why, cue, want string
	}{
		{"a string", `string`, `{"type": "string"}`},
		{"a constant", `"vm"`, `{"type": "string", "const": "vm"}`},
		{"any value", `_`, `{}`},
		{"bytes", `bytes`, `{"type": "string", "contentEncoding": "base64"}`},
		{"a float bound", `float & >0.5 & <=2`, `{"type": "number", "exclusiveMinimum": 0.5, "maximum": 2}`},
		{"a number", `number`, `{"type": "number"}`},
		{"two kinds", `int | string`, `{"type": ["string", "integer"]}`},
		{"an enum with a default", `*"m" | "s" | "l"`, `{"type": "string", "enum": ["m", "s", "l"], "default": "m"}`},
		{"an enum of numbers", `1 | 2 | 3`, `{"type": "integer", "enum": [1, 2, 3]}`},
		{"alternatives with constraints", `"auto" | int & >0`,
			`{"type": ["string", "integer"], "anyOf": [{"type": "string", "const": "auto"}, {"type": "integer", "exclusiveMinimum": 0}]}`},
		{"patterns", `=~"^a" & =~"b$" & !~"c"`,
			`{"type": "string", "pattern": "^a", "allOf": [{"pattern": "b$"}, {"not": {"pattern": "c"}}]}`},
		{"a non-empty string", `string & !=""`, `{"type": "string", "minLength": 1}`},
		{"a number but one", `int & !=22`, `{"type": "integer", "allOf": [{"not": {"const": 22}}]}`},
		{"string lengths", `strings.MinRunes(2) & strings.MaxRunes(5)`, `{"type": "string", "minLength": 2, "maxLength": 5}`},
		{"list lengths", `[...int] & list.MaxItems(3)`, `{"type": "array", "items": {"type": "integer"}, "maxItems": 3, "default": []}`},
		{"a definition", `#Port`, `{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 65536}`},
		{"a fixed list", `[int, string]`, `{"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}`},
		{"a map", `{[string]: int}`, `{"type": "object", "additionalProperties": {"type": "integer"}}`},
		{"a closed struct", `#Disk`, `{"type": "object", "additionalProperties": false,
			"properties": {"size": {"type": "integer", "description": "Size in GiB."}, "kind": {"type": "string", "enum": ["ssd", "hdd"], "default": "ssd"}},
			"required": ["size"]}`},
		{"an open struct", `{a?: bool, ...}`, `{"type": "object", "properties": {"a": {"type": "boolean"}}}`},
		{"a recursive definition ends", `#Tree`, ""},
	}
	ctx := cuecontext.New()
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			v := ctx.CompileString(`import ("strings", "list")
#Port: int & >0 & <65536
#Disk: {
	// Size in GiB.
	size: int
	kind?: *"ssd" | "hdd"
}
#Tree: {name: string, children: [...#Tree]}
_imports: [strings.MinRunes(0), list.MaxItems(0)]
x: ` + c.cue)
			if err := v.Err(); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(jsonSchema(v.LookupPath(cue.ParsePath("x"))))
			if err != nil {
				t.Fatal(err)
			}
			if c.want != "" && !sameJSONText(t, b, c.want) {
				t.Errorf("schema of %s = %s, want %s", c.cue, b, c.want)
			}
		})
	}
}

// TestServiceParameters: a compile returns each given instance's
// evaluated parameter, with the defaults and the fields the model computes
// (an r attribute), from an evaluation or from the cache alike.
func TestServiceParameters(t *testing.T) {
	t.Parallel()
	model := strings.Replace(vmModel, `		address?: string @lsm(r)`, `		fqdn: "\(name).vms.example" @lsm(r)`, 1)
	dir := writeProject(t, map[string]string{"main.cue": model})
	insts := map[string]map[string]json.RawMessage{"vm": {"0b6c": json.RawMessage(`{"name": "web", "size": "s"}`)}}
	cache := NewCache(1000)
	for i := range 2 {
		res, err := Compile(context.Background(), Options{Dir: dir, Instances: insts, Cache: cache, SourceKey: "m"})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Parameters["vm"]["0b6c"]
		if !sameJSONText(t, got, `{"name": "web", "size": "s", "memory": 2, "tags": [], "fqdn": "web.vms.example"}`) {
			t.Errorf("compile %d (hits %d): parameter %s", i, cache.Hits(), got)
		}
	}
	if cache.Hits() != 1 {
		t.Errorf("hits %d, want the second compile from the cache", cache.Hits())
	}
}

// TestFocusedCompile: a compile focused on one instance returns only its
// resources and parameters, and still refuses what another instance
// breaks: every instance is evaluated and checked as without focus.
func TestFocusedCompile(t *testing.T) {
	t.Parallel()
	dir := writeProject(t, map[string]string{"main.cue": vmModel})
	insts := map[string]map[string]json.RawMessage{"vm": {
		"0b6c": json.RawMessage(`{"name": "web", "size": "s"}`),
		"9f2e": json.RawMessage(`{"name": "db", "size": "l", "memory": 16, "address": "10.0.0.7"}`),
	}}
	res, err := Compile(context.Background(), Options{Dir: dir, Instances: insts, Focus: &Focus{Entity: "vm", Instance: "9f2e"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Instances != 2 || len(res.Resources) != 2 {
		t.Fatalf("%d instances evaluated, %d resources returned; want 2 and the focus's 2", res.Instances, len(res.Resources))
	}
	for _, r := range res.Resources {
		if r.ResourceSet != "vm/9f2e" {
			t.Errorf("%s of set %q returned", r.ID, r.ResourceSet)
		}
	}
	if len(res.Parameters) != 1 || len(res.Parameters["vm"]) != 1 || res.Parameters["vm"]["9f2e"] == nil {
		t.Errorf("parameters %v, want the focus's alone", res.Parameters)
	}
	// Another instance with the same name makes the same resource ids.
	insts["vm"]["77aa"] = json.RawMessage(`{"name": "web", "size": "s"}`)
	if _, err := Compile(context.Background(), Options{Dir: dir, Instances: insts, Focus: &Focus{Entity: "vm", Instance: "9f2e"}}); err == nil {
		t.Fatal("a focused compile took two instances making the same resources")
	}
}

// TestServiceInitialStates: a lifecycle's initial_states reach the
// catalog's entity.
func TestServiceInitialStates(t *testing.T) {
	t.Parallel()
	model := strings.Replace(vmModel, "lifecycle:   lsm.simple", `lifecycle:   lsm.simple & {initial_states: ["acknowledged"]}`, 1)
	res, errs := compileServices(t, map[string]string{"main.cue": model}, nil)
	if errs != nil {
		t.Fatal(errs)
	}
	if got := res.Services[0].Lifecycle.InitialStates; !reflect.DeepEqual(got, []string{"acknowledged"}) {
		t.Errorf("initial_states = %v", got)
	}
}
