package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// versionsModel is an entity at version 2 (memory renamed ram) keeping
// version 1, each refining into a file that says which version made it;
// extra is added to the model.
func versionsModel(services string) map[string]string {
	return map[string]string{"intend.yaml": "name: test\n", "main.cue": `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/lsm"
)

#V1: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {name: string @lsm(rw), memory: int @lsm(rw+)}
	output: f: fs.#File & {path: "/v/\(parameter.name)", content: "v1 memory=\(parameter.memory)"}
}

#V2: lsm.#Entity & {
	version:   2
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {name: string @lsm(rw), ram: int & <=32 @lsm(rw+), label: "\(name)" @lsm(r)}
	migrate: {from: _, to: {name: from.name, ram: from.memory * 2, label: "dropped"}}
	output: f: fs.#File & {path: "/v/\(parameter.name)", content: "v2 ram=\(parameter.ram)"}
}

#V3: lsm.#Entity & {
	version:   3
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {name: string @lsm(rw), ram: int @lsm(rw+), label: "\(name)" @lsm(r)}
	output: f: fs.#File & {path: "/v/\(parameter.name)", content: "v3 ram=\(parameter.ram)"}
}

` + services + "\n"}
}

// TestServiceVersions: the catalog gets the newest version and the
// previous ones; each instance is evaluated with the version it names
// (the newest when it names none); an unknown version is an error of the
// instance.
func TestServiceVersions(t *testing.T) {
	files := versionsModel("services: vm: #V2 & {previous: [#V1]}")
	res, err := Compile(context.Background(), Options{Dir: writeProject(t, files),
		Instances: map[string]map[string]json.RawMessage{"vm": {
			"a": json.RawMessage(`{"name": "a", "memory": 3}`),
			"b": json.RawMessage(`{"name": "b", "ram": 4}`),
		}},
		InstanceVersions: map[string]map[string]int{"vm": {"a": 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Services) != 1 || res.Services[0].Version != 2 || len(res.PreviousServices) != 1 ||
		res.PreviousServices[0].Version != 1 || res.PreviousServices[0].Attributes[1].Name != "memory" {
		t.Fatalf("services %+v, previous %+v", res.Services, res.PreviousServices)
	}
	got := map[string]string{}
	for _, r := range res.Resources {
		if r.ResourceSet != "" {
			got[r.ResourceSet] = string(r.Attributes["content"])
		}
	}
	if got["vm/a"] != `"v1 memory=3"` || got["vm/b"] != `"v2 ram=4"` {
		t.Errorf("contents: %v", got)
	}

	_, err = Compile(context.Background(), Options{Dir: writeProject(t, files),
		Instances:        map[string]map[string]json.RawMessage{"vm": {"a": json.RawMessage(`{"name": "a", "memory": 3}`)}},
		InstanceVersions: map[string]map[string]int{"vm": {"a": 7}},
	})
	if errs, ok := errors.AsType[Errors](err); !ok || !strings.Contains(errs.Error(), "no version 7") {
		t.Errorf("unknown version: %v", err)
	}
}

// TestServiceVersionErrors: what the compiler refuses of versions.
func TestServiceVersionErrors(t *testing.T) {
	for _, tc := range []struct {
		reason, services, want string
	}{
		{"a previous version as new as the entity", "services: vm: #V2 & {previous: [#V2 & {version: 2}]}", "is not older"},
		{"a version twice", "services: vm: #V3 & {previous: [#V1, #V1]}", "given twice"},
		{"another lifecycle", "services: vm: #V2 & {previous: [lsm.#Entity & {identity: \"name\", parameter: {name: string}, output: {}, lifecycle: {name: \"mini\", start: \"s\", states: {s: {model_state: \"candidate\"}, t: {model_state: \"inactive\", terminal: true}}, transfers: [{source: \"s\", target: \"t\", trigger: \"on_delete\"}]}}]}", "another lifecycle"},
		{"another identity", "services: vm: #V2 & {previous: [lsm.#Entity & {lifecycle: lsm.simple, parameter: {name: string}, output: {}}]}", "another identity"},
		{"a version that is no number", "services: vm: #V1 & {version: \"two\"}", "version"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			_, errs := compileServices(t, versionsModel(tc.services), nil)
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors %v, want %q", errs, tc.want)
			}
		})
	}
}

// TestMigrate maps attributes version by version: version 2's migrate
// (r attributes it gives dropped), then version 3's absent one (the same
// attributes); a mapping that is not concrete, and a version the model
// lacks, are errors.
func TestMigrate(t *testing.T) {
	dir := writeProject(t, versionsModel("services: vm: #V3 & {previous: [#V1, #V2]}"))
	got, err := Migrate(context.Background(), MigrateOptions{Dir: dir, Entity: "vm", From: 1, To: 3,
		Attributes: map[string]any{"name": "a", "memory": 3}})
	if err != nil || len(got) != 2 || got["name"] != "a" || got["ram"] != 6.0 {
		t.Fatalf("1 → 3: %v, %v", got, err)
	}
	_, err = Migrate(context.Background(), MigrateOptions{Dir: dir, Entity: "vm", From: 1, To: 2,
		Attributes: map[string]any{"name": "a"}})
	if errs, ok := errors.AsType[Errors](err); !ok || !strings.Contains(errs.Error(), "version 2") {
		t.Errorf("a mapping without memory: %v", err)
	}
	_, err = Migrate(context.Background(), MigrateOptions{Dir: dir, Entity: "vm", From: 3, To: 4, Attributes: map[string]any{}})
	if errs, ok := errors.AsType[Errors](err); !ok || !strings.Contains(errs.Error(), "no version 4") {
		t.Errorf("to a version the model lacks: %v", err)
	}
}
