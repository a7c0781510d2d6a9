package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// project writes a project with the given CUE files (and intend.yaml) into
// a temporary directory.
func writeProject(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"intend.yaml": "name: test\n"}
	for k, v := range files {
		all[k] = v
	}
	for name, text := range all {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func compile(t *testing.T, files map[string]string) (*Result, Errors) {
	t.Helper()
	res, err := Compile(context.Background(), Options{Dir: writeProject(t, files)})
	if err == nil {
		return res, nil
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("compile failed without compile errors: %v", err)
	}
	return nil, errs
}

func byID(res *Result) map[string]Resource {
	m := map[string]Resource{}
	for _, r := range res.Resources {
		m[r.ID] = r
	}
	return m
}

const siteModel = `package main

import "intend.dev/std/fs"

resources: {
	root: fs.#Directory & {path: "/srv/www", mode: "0755"}
	motd: fs.#File & {path: "/etc/motd", content: "hello\n"}
}

#Site: {
	parameter: {
		name:  string & =~"^[a-z]+$"
		title: string
		port:  int & >0 & <65536 | *8080
	}
	output: {
		dir: fs.#Directory & {
			path:     "\(resources.root.path)/\(parameter.name)"
			requires: [resources.root]
		}
		index: fs.#File & {
			path:     "\(dir.path)/index.html"
			content:  "<h1>\(parameter.title)</h1> on port \(parameter.port)\n"
			requires: [dir]
		}
		current: fs.#Symlink & {
			path:     "\(dir.path)/current"
			target:   "index.html"
			requires: [dir.id]
		}
	}
}

refinements: site: {
	using: #Site
	instances: [N=string]: name: N
	instances: blog: title: "Blog"
	instances: shop: {title: "Shop", port: 9090}
}
`

func TestCompileModel(t *testing.T) {
	res, errs := compile(t, map[string]string{"main.cue": siteModel})
	if errs != nil {
		t.Fatal(errs)
	}
	if got, want := len(res.Resources), 2+2*3; got != want {
		t.Fatalf("%d resources, want %d", got, want)
	}
	if res.Instances != 2 {
		t.Errorf("instances = %d, want 2", res.Instances)
	}
	rs := byID(res)
	index, ok := rs["fs::File[localhost,path=/srv/www/shop/index.html]"]
	if !ok {
		t.Fatalf("no shop index among %v", rs)
	}
	if got := string(index.Attributes["content"]); got != `"<h1>Shop</h1> on port 9090\n"` {
		t.Errorf("content = %s", got)
	}
	if _, has := index.Attributes["agent"]; has {
		t.Error("agent is exported as an attribute")
	}
	if got := index.Requires; len(got) != 1 || got[0] != "fs::Directory[localhost,path=/srv/www/shop]" {
		t.Errorf("requires = %v", got)
	}
	if index.ResourceSet != "site/shop" {
		t.Errorf("resource_set = %q, want site/shop", index.ResourceSet)
	}
	dir := rs["fs::Directory[localhost,path=/srv/www/blog]"]
	if got := dir.Requires; len(got) != 1 || got[0] != "fs::Directory[localhost,path=/srv/www]" {
		t.Errorf("blog dir requires = %v", got)
	}
	link := rs["fs::Symlink[localhost,path=/srv/www/blog/current]"]
	if got := link.Requires; len(got) != 1 || got[0] != dir.ID {
		t.Errorf("symlink requires (by id string) = %v", got)
	}
	if root := rs["fs::Directory[localhost,path=/srv/www]"]; root.ResourceSet != "" || string(root.Attributes["mode"]) != `"0755"` {
		t.Errorf("root = %+v", root)
	}

	var doc struct {
		Resources []map[string]any `json:"resources"`
	}
	if err := json.Unmarshal(res.Export(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Resources) != 8 {
		t.Fatalf("export has %d resources", len(doc.Resources))
	}
	for _, r := range doc.Resources {
		if _, bad := r["undefined"]; bad {
			t.Errorf("%v exported with undefined", r["id"])
		}
	}
}

// errorAt asserts that one error has the path and message fragment, and a
// position in each of the files named.
func errorAt(t *testing.T, errs Errors, path, msg string, files ...string) {
	t.Helper()
	for _, e := range errs {
		if e.Path != path || !strings.Contains(e.Message, msg) {
			continue
		}
		for _, f := range files {
			found := false
			for _, p := range e.Positions {
				if p.File == f && p.Line > 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("error %q has no position in %s: %v", e.Message, f, e.Positions)
			}
		}
		return
	}
	t.Errorf("no error at %s containing %q among:\n%v", path, msg, errs)
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model string
		path  string
		msg   string
		files []string
	}{
		{"wrong type", `resources: f: fs.#File & {path: 3, content: ""}`,
			"resources.f.path", "conflicting values", []string{"intend.dev/std/resource/resource.cue", "main.cue"}},
		{"constraint", `resources: f: fs.#File & {path: "/a", content: "", mode: "644"}`,
			"resources.f.mode", "invalid value", []string{"intend.dev/std/fs/fs.cue", "main.cue"}},
		{"missing identifying attribute", `resources: f: fs.#File & {content: ""}`,
			"resources.f.path", "incomplete", []string{"intend.dev/std/fs/fs.cue"}},
		{"unknown attribute", `resources: f: fs.#File & {path: "/a", content: "", colour: "red"}`,
			"resources.f.colour", "not allowed", []string{"main.cue"}},
		{"undefined reference", `resources: f: fs.#File & {path: nowhere.path, content: ""}`,
			"resources.f.path", "reference \"nowhere\" not found", []string{"main.cue"}},
		{"not a resource", `resources: f: 3`,
			"resources.f", "not a resource", []string{"main.cue"}},
		{"duplicate id", `resources: {
	a: fs.#File & {path: "/a", content: "1"}
	b: fs.#File & {path: "/a", content: "2"}
}`, "resources.b", "duplicate id fs::File[localhost,path=/a]: resources.a (main.cue:", []string{"main.cue"}},
		{"dangling requires", `resources: a: fs.#File & {path: "/a", content: "", requires: ["fs::File[localhost,path=/b]"]}`,
			"resources.a", "requires fs::File[localhost,path=/b], which the model does not produce", nil},
		{"bad id in requires", `resources: a: fs.#File & {path: "/a", content: "", requires: ["nonsense"]}`,
			"resources.a.requires[0]", "", []string{"main.cue"}},
		{"requires itself", `resources: a: fs.#File & {path: "/a", content: "", requires: [resources.a.id]}`,
			"resources.a.requires[0]", "cannot require itself", nil},
		{"bad refinement parameter", `#R: {parameter: n: int, output: f: fs.#File & {path: "/r/\(parameter.n)", content: ""}}
refinements: r: {using: #R, instances: x: n: "seven"}`,
			"refinements.r.using.parameter.n", "conflicting values", []string{"main.cue"}},
		{"refinement without output", `refinements: r: {using: {parameter: {}}, instances: x: {}}`,
			"refinements.r.using", "no output", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package main\n\n"
			if strings.Contains(tc.model, "fs.#") {
				src += "import \"intend.dev/std/fs\"\n\n"
			}
			_, errs := compile(t, map[string]string{"main.cue": src + tc.model + "\n"})
			if errs == nil {
				t.Fatal("compiled")
			}
			errorAt(t, errs, tc.path, tc.msg, tc.files...)
		})
	}
}

// TestNetconfTypesAreCompileErrors: data of the YANG modules the
// standard library types (ietf-interfaces, ietf-system) is checked at
// compile time, a wrong value reported at its position in the model and
// in the schema.
func TestNetconfTypesAreCompileErrors(t *testing.T) {
	iface := `resources.r.config."ietf-interfaces:interfaces".interface.0.`
	system := `resources.r.config."ietf-system:system".`
	ipv4 := func(address string) string {
		return `"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "iana-if-type:ethernetCsmacd", "ietf-ip:ipv4": address: [{` + address + `}]}]`
	}
	ipv4At := iface + `"ietf-ip:ipv4".address.0.`
	for _, tc := range []struct {
		name, path, entry, at, msg string
		schema                     bool
	}{
		{"description a number", "ietf-interfaces:interfaces/interface[name=eth1]",
			`"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "iana-if-type:ethernetCsmacd", description: 5}]`,
			iface + "description", "conflicting values", true},
		{"enabled a string", "ietf-interfaces:interfaces/interface[name=eth1]",
			`"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "iana-if-type:ethernetCsmacd", enabled: "yes"}]`,
			iface + "enabled", "conflicting values", true},
		{"type no identity", "ietf-interfaces:interfaces/interface[name=eth1]",
			`"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "ethernet"}]`,
			iface + "type", "invalid value", true},
		{"hostname with a space", "ietf-system:system",
			`"ietf-system:system": hostname: "r 1"`, system + "hostname", "invalid value", true},
		{"prefix-length over 32", "ietf-interfaces:interfaces/interface[name=eth1]",
			ipv4(`ip: "192.0.2.1", "prefix-length": 33`), ipv4At + `"prefix-length"`, "invalid value", true},
		{"prefix-length a string", "ietf-interfaces:interfaces/interface[name=eth1]",
			ipv4(`ip: "192.0.2.1", "prefix-length": "24"`), ipv4At + `"prefix-length"`, "conflicting values", true},
		{"ip with an octet over 255", "ietf-interfaces:interfaces/interface[name=eth1]",
			ipv4(`ip: "192.0.2.256", "prefix-length": 24`), ipv4At + "ip", "invalid value", true},
		{"ip an IPv6 address", "ietf-interfaces:interfaces/interface[name=eth1]",
			ipv4(`ip: "2001:db8::1", "prefix-length": 24`), ipv4At + "ip", "invalid value", true},
		{"prefix-length and netmask", "ietf-interfaces:interfaces/interface[name=eth1]",
			ipv4(`ip: "192.0.2.1", "prefix-length": 24, netmask: "255.255.255.0"`), ipv4At + "netmask", "not both", true},
		{"unknown leaf of ipv4", "ietf-interfaces:interfaces/interface[name=eth1]",
			`"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "iana-if-type:ethernetCsmacd", "ietf-ip:ipv4": colour: "red"}]`,
			iface + `"ietf-ip:ipv4".colour`, "not allowed", false},
		{"IPv6 prefix-length over 128", "ietf-interfaces:interfaces/interface[name=eth1]",
			`"ietf-interfaces:interfaces": interface: [{name: "eth1", type: "iana-if-type:ethernetCsmacd", "ietf-ip:ipv6": address: [{ip: "2001:db8::1", "prefix-length": 129}]}]`,
			iface + `"ietf-ip:ipv6".address.0."prefix-length"`, "invalid value", true},
		{"unknown leaf", "ietf-system:system",
			`"ietf-system:system": colour: "red"`, system + "colour", "not allowed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := compile(t, map[string]string{"main.cue": `package main

import "intend.dev/std/netconf"

resources: r: netconf.#Config & {
	address:  "r1.lab"
	user:     "admin"
	password: {secret: "env:INTEND_SECRET_R1"}
	host_key: "SHA256:x"
	path:     "` + tc.path + `"
	config: ` + tc.entry + `
}
`})
			if errs == nil {
				t.Fatal("compiled")
			}
			files := []string{"main.cue"}
			if tc.schema {
				files = append(files, "intend.dev/std/netconf/ietf.cue")
			}
			errorAt(t, errs, tc.at, tc.msg, files...)
		})
	}
}

func TestCompileReportsEveryError(t *testing.T) {
	_, errs := compile(t, map[string]string{"main.cue": `package main

import "intend.dev/std/fs"

resources: {
	a: fs.#File & {path: "/a", content: 1}
	b: fs.#File & {path: "relative", content: ""}
	c: fs.#Directory & {path: "/c", mode: "777"}
	d: fs.#File & {path: "/d", content: "", mode: "644", colour: "red"}
}
`})
	for _, p := range []string{"resources.a.content", "resources.b.path", "resources.c.mode", "resources.d.mode", "resources.d.colour"} {
		errorAt(t, errs, p, "")
	}
}

func TestCompileSyntaxError(t *testing.T) {
	_, errs := compile(t, map[string]string{"main.cue": "package main\n\nresources: {\n"})
	if len(errs) == 0 || len(errs[0].Positions) == 0 || errs[0].Positions[0].File != "main.cue" {
		t.Fatalf("errors = %v", errs)
	}
}

func TestCompileUnknownFact(t *testing.T) {
	model := `package main

import (
	"intend.dev/std/fs"
	"intend.dev/std/resource"
)

facts: resource.#Facts

resources: {
	seed: fs.#File & {path: "/seed", content: "x"}
	copy: fs.#File & {path: "/copy", content: "hash was \(facts[seed.id].content_hash)"}
	after: fs.#File & {path: "/after", content: "", requires: [copy]}
}
`
	dir := writeProject(t, map[string]string{"main.cue": model})
	res, err := Compile(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rs := byID(res)
	cp := rs["fs::File[localhost,path=/copy]"]
	if !cp.Undefined || res.Undefined != 1 {
		t.Fatalf("copy = %+v, undefined count %d", cp, res.Undefined)
	}
	if _, has := cp.Attributes["content"]; has {
		t.Error("the unknown content is exported")
	}
	if string(cp.Attributes["path"]) != `"/copy"` {
		t.Errorf("the id attribute is missing: %v", cp.Attributes)
	}
	if rs["fs::File[localhost,path=/after]"].Undefined {
		t.Error("a dependent is exported undefined itself (the engine skips it)")
	}

	res, err = Compile(context.Background(), Options{Dir: dir, Facts: map[string]map[string]json.RawMessage{
		"fs::File[localhost,path=/seed]": {"content_hash": json.RawMessage(`"sha256:ab"`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cp = byID(res)["fs::File[localhost,path=/copy]"]
	if cp.Undefined || string(cp.Attributes["content"]) != `"hash was sha256:ab"` {
		t.Errorf("with the fact: %+v", cp)
	}

	// A fact of a resource that has other facts but not this one is
	// unknown too; a missing attribute is still an error.
	res, err = Compile(context.Background(), Options{Dir: dir, Facts: map[string]map[string]json.RawMessage{
		"fs::File[localhost,path=/seed]": {"size": json.RawMessage(`3`)},
	}})
	if err != nil || !byID(res)["fs::File[localhost,path=/copy]"].Undefined {
		t.Errorf("with another fact: %v", err)
	}
	_, errs := compile(t, map[string]string{"main.cue": strings.Replace(model, `path: "/after", `, "", 1)})
	errorAt(t, errs, "resources.after.path", "incomplete")
}

// TestCompileEmptyModel: a model without resources is an empty version,
// which the server accepts ("resources": [], never null).
func TestCompileEmptyModel(t *testing.T) {
	res, errs := compile(t, map[string]string{"main.cue": "package main\n"})
	if errs != nil {
		t.Fatal(errs)
	}
	if got := string(res.Export()); got != `{"resources":[]}` {
		t.Errorf("export = %s", got)
	}
}

// TestModuleStaysInTheProject: a module that names dependencies (fetched
// from a registry, or replaced with a directory of the host) or has a
// local-module.cue is refused, naming the file; none of it is read.
func TestModuleStaysInTheProject(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.cue"), []byte("package x\nsecret: \"s3cret\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		why   string
		files map[string]string
		want  string
	}{
		{"a dependency replaced with a host directory", map[string]string{
			"cue.mod/module.cue": "module: \"test.example/m\"\nlanguage: version: \"v0.17.0\"\n" +
				"deps: \"host.example/x@v0\": {v: \"v0.0.1\", replaceWith: \"" + outside + "\"}\n",
			"main.cue": "package main\n\nimport \"host.example/x\"\n\nleak: x.secret\n"}, "deps host.example/x@v0"},
		{"a dependency from a registry", map[string]string{
			"cue.mod/module.cue": "module: \"test.example/m\"\nlanguage: version: \"v0.12.0\"\n" +
				"deps: \"registry.example/y@v0\": v: \"v0.1.0\"\n",
			"main.cue": "package main\n"}, "no registry"},
		{"a local-module.cue", map[string]string{
			"cue.mod/module.cue":       "module: \"test.example/m\"\nlanguage: version: \"v0.12.0\"\n",
			"cue.mod/local-module.cue": "deps: {}\n",
			"main.cue":                 "package main\n"}, "local-module.cue"},
	} {
		_, errs := compile(t, tc.files)
		if len(errs) == 0 || !strings.Contains(errs.Error(), tc.want) || strings.Contains(errs.Error(), "s3cret") {
			t.Errorf("%s: %v, want an error naming %q", tc.why, errs, tc.want)
		}
	}
}
