package modeltest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// model is a small project: a directory, a file that reads a fact of it,
// and a refinement whose instances the tests give.
const model = `package main

import "intend.dev/std/fs"

import "intend.dev/std/resource"

facts: resource.#Facts

resources: {
	root: fs.#Directory & {path: "/srv", mode: "0755"}
	seed: fs.#File & {path: "/srv/seed", content: "x", requires: [root]}
	pin: fs.#File & {
		path:     "/srv/pin"
		content:  "seed is \(facts[seed.id].size) bytes\n"
		requires: [seed]
	}
}

#Site: {
	parameter: {
		name: =~"^[a-z]+$"
		port: *8080 | int & >=1024
		url:  "http://127.0.0.1:\(port)/"
	}
	output: conf: fs.#File & {
		path:     "/srv/\(parameter.name).conf"
		content:  "listen \(parameter.port)\n"
		mode:     "0640"
		requires: [resources.root]
	}
}

refinements: site: using: #Site
`

// writeProject writes intend.yaml, main.cue (model) and the given files.
func writeProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"intend.yaml": "name: test\n", "main.cue": model}
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

func run(t *testing.T, dir string, opts Options) *Report {
	t.Helper()
	opts.Dir = dir
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// failures are a report's failures, one "name: at: message" line each.
func failures(rep *Report) []string {
	var out []string
	for _, r := range rep.Results {
		for _, f := range r.Failures {
			out = append(out, r.Name+": "+f.String())
		}
	}
	return out
}

const passing = `package main

tests: "a site from its parameters": {
	instances: site: shop: {name: "shop", port: 9090}
	resources: "fs::File[localhost,path=/srv/shop.conf]": {
		content:      "listen 9090\n"
		mode:         =~"^06"
		requires:     ["fs::Directory[localhost,path=/srv]"]
		resource_set: "site/shop"
	}
	parameters: site: shop: url: "http://127.0.0.1:9090/"
	absent: ["fs::File[localhost,path=/srv/blog.conf]"]
	count: 4
}

tests: "the pin waits for the seed's size": {
	resources: "fs::File[localhost,path=/srv/pin]": undefined: true
}

tests: "the pin with the seed's size": {
	facts: "fs::File[localhost,path=/srv/seed]": size: 1
	resources: "fs::File[localhost,path=/srv/pin]": {
		undefined: false
		content:   "seed is 1 bytes\n"
	}
}

tests: "a bad name is refused": {
	instances: site: x: {name: "Shop"}
	error: =~"invalid value \"Shop\""
}
`

func TestPassingSuite(t *testing.T) {
	rep := run(t, writeProject(t, map[string]string{"main_test.cue": passing}), Options{Resources: true})
	if f := failures(rep); len(f) > 0 {
		t.Fatalf("failures:\n%s", strings.Join(f, "\n"))
	}
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Name)
	}
	want := []string{"a site from its parameters", "the pin waits for the seed's size", "the pin with the seed's size", "a bad name is refused"}
	if !slices.Equal(names, want) || rep.Passed != 4 || rep.Failed != 0 || !rep.OK() {
		t.Fatalf("ran %q (passed %d, failed %d), want %q all passed", names, rep.Passed, rep.Failed, want)
	}
	if got := rep.Results[0].At; got != "main_test.cue:3:8" {
		t.Errorf("first test at %s, want main_test.cue:3:8", got)
	}
	if got := rep.Results[0].Resources; !slices.Contains(got, "fs::File[localhost,path=/srv/shop.conf]") {
		t.Errorf("the first test's resources are %q, want the site's file among them", got)
	}
}

// TestFailures: each kind of expectation not met is reported at the
// file:line:column of the expectation.
func TestFailures(t *testing.T) {
	for _, c := range []struct {
		name, test string
		want       []string
	}{
		{"attribute differs", `
tests: t: {
	instances: site: shop: {name: "shop"}
	resources: "fs::File[localhost,path=/srv/shop.conf]": {
		content: "listen 9090\n"
	}
}`, []string{`t: main_test.cue:6:3: resources["fs::File[localhost,path=/srv/shop.conf]"].content: want "listen 9090\n", got "listen 8080\n"`}},
		{"constraint not met", `
tests: t: resources: "fs::Directory[localhost,path=/srv]": mode: =~"^06"
`, []string{`t: main_test.cue:3:60: resources["fs::Directory[localhost,path=/srv]"].mode: want =~"^06", got "0755"`}},
		{"attribute missing", `
tests: t: resources: "fs::Directory[localhost,path=/srv]": owner: "root"
`, []string{`t: main_test.cue:3:60: resources["fs::Directory[localhost,path=/srv]"].owner: want "root", got nothing`}},
		{"resource missing", `
tests: t: {
	resources: "fs::File[localhost,path=/srv/blog.conf]": {}
}`, []string{`t: main_test.cue:4:13: resources["fs::File[localhost,path=/srv/blog.conf]"]: not produced (the model produces 3 resources; intend test -v lists them)`}},
		{"resource present", `
tests: t: absent: [
	"fs::File[localhost,path=/srv/nothing]",
	"fs::File[localhost,path=/srv/seed]",
]`, []string{`t: main_test.cue:5:2: absent[1]: fs::File[localhost,path=/srv/seed] is produced (by resources.seed)`}},
		{"count differs", `
tests: t: count: 4
`, []string{`t: main_test.cue:3:11: count: want 4 resources, got 3`}},
		{"parameter differs", `
tests: t: {
	instances: site: shop: {name: "shop"}
	parameters: site: shop: port: 9090
}`, []string{`t: main_test.cue:5:26: parameters.site["shop"].port: want 9090, got 8080`}},
		{"error expected, none", `
tests: t: error: =~"invalid"
`, []string{`t: main_test.cue:3:11: error: want the compile to fail with an error matching =~"invalid"; it compiled (3 resources)`}},
		{"another error", `
tests: t: {
	instances: site: x: {name: "Shop"}
	error: =~"conflicting"
}`, []string{"t: main_test.cue:5:2: error: want an error matching =~\"conflicting\", got:\n    refinements.site.instances.x: refinements.site.using.parameter.name: invalid value \"Shop\" (out of bound =~\"^[a-z]+$\")"}},
		{"the model does not compile", `
tests: t: {
	instances: site: x: {name: "Shop"}
	resources: "fs::Directory[localhost,path=/srv]": {}
}`, []string{"t: main_test.cue:3:8: the model does not compile:\n    refinements.site.instances.x: refinements.site.using.parameter.name: invalid value \"Shop\" (out of bound =~\"^[a-z]+$\")\n        at main.cue:21:9\n"}},
		{"undefined resource", `
tests: t: resources: "fs::File[localhost,path=/srv/pin]": content: =~"seed"
`, []string{`t: main_test.cue:3:59: resources["fs::File[localhost,path=/srv/pin]"].content: want =~"seed", got nothing (the resource is undefined`}},
		{"text of several lines differs", `
tests: t: {
	instances: site: shop: {name: "shop"}
	resources: "fs::File[localhost,path=/srv/shop.conf]": content: "listen 8080\nworkers 2\n"
}`, []string{"t: main_test.cue:5:56: resources[\"fs::File[localhost,path=/srv/shop.conf]\"].content: differs (- want, + got):\n@@ -1,2 +1 @@\n listen 8080\n-workers 2"}},
		{"instances not concrete", `
tests: t: {
	instances: site: shop: {name: string}
	count: 4
}`, []string{`t: main_test.cue:4:`}},
		{"unknown field", `
tests: t: resource: {}
`, []string{`t: main_test.cue:3:11: resource: not a field of a test`}},
		{"test file does not compile", `
tests: t: count: 1 &
`, []string{`main_test.cue: main_test.cue:3:22: expected operand`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := run(t, writeProject(t, map[string]string{"main_test.cue": "package main\n" + c.test}), Options{})
			got := failures(rep)
			if rep.OK() || rep.Failed != 1 {
				t.Fatalf("passed %d, failed %d; want one failed test: %q", rep.Passed, rep.Failed, got)
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("no failure starts with\n  %q\ngot\n  %q", w, got)
				}
			}
		})
	}
}

// TestRunSelects: -run runs only the tests whose name it matches, in
// every file.
func TestRunSelects(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"a_test.cue": "package main\ntests: \"one dir\": count: 3\ntests: \"two\": count: 99\n",
		"b_test.cue": "package main\ntests: \"dir again\": resources: \"fs::Directory[localhost,path=/srv]\": mode: \"0755\"\n",
	})
	rep := run(t, dir, Options{Run: regexp.MustCompile("dir")})
	if len(rep.Results) != 2 || !rep.OK() || rep.Results[0].Name != "one dir" || rep.Results[1].Name != "dir again" {
		t.Fatalf("ran %+v, want the two passing tests named *dir*", rep.Results)
	}
	if !slices.Equal(rep.Files, []string{"a_test.cue", "b_test.cue"}) {
		t.Errorf("files %q", rep.Files)
	}
	if rep := run(t, dir, Options{}); rep.Passed != 2 || rep.Failed != 1 {
		t.Errorf("without -run: passed %d, failed %d; want 2 and 1", rep.Passed, rep.Failed)
	}
}

// TestTestFilesAreNoPartOfTheModel: a *_test.cue file beside the model,
// in its package, does not change what the model compiles to.
func TestTestFilesAreNoPartOfTheModel(t *testing.T) {
	dir := writeProject(t, map[string]string{"main_test.cue": "package main\nresources: extra: 1\ntests: t: count: 3\n"})
	if rep := run(t, dir, Options{}); !rep.OK() {
		t.Fatalf("%q", failures(rep))
	}
}

// TestModelDoesNotLoad: a model with a syntax error fails every test,
// naming the model's file:line:column.
func TestModelDoesNotLoad(t *testing.T) {
	dir := writeProject(t, map[string]string{"main.cue": "package main\nresources: {\n", "main_test.cue": "package main\ntests: t: count: 0\n"})
	rep := run(t, dir, Options{})
	got := failures(rep)
	if rep.OK() || len(got) != 1 || !strings.Contains(got[0], "the model does not compile") || !strings.Contains(got[0], "at main.cue:2:14") {
		t.Fatalf("want one failure naming main.cue:2:14, got %q", got)
	}
}

func TestNoProject(t *testing.T) {
	if _, err := Run(context.Background(), Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "intend.yaml") {
		t.Fatalf("Run without intend.yaml: %v", err)
	}
}
