package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleLSMEmbedded walks examples/lsm's proxy, whose routes are a
// list of embedded entities, with the CLI alone: the catalog lists the
// attributes inside a route; a create gives the routes as JSON; an update
// changes one route by its prefix and adds another (--set, v2 edits); a
// change of a route's rw scheme is refused at its pointer; --remove takes
// a route away.
func TestExampleLSMEmbedded(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmemb")
	_, root := exportExample(t, vars, "lsm", "/tmp/intend-lsm", "proxy (lifecycle simple)")
	out := ok(t, vars, "lsm", "catalog", "proxy")
	for name, mod := range map[string]string{"routes": "rw+,key=prefix", "routes[*].prefix": "rw",
		"routes[*].scheme": "rw", "routes[*].upstream": "rw+", "routes[*].timeout": "rw+"} {
		if row := rowOf(t, out, name); row[1] != mod {
			t.Errorf("catalog row %s: %v, want modifier %s", name, row, mod)
		}
	}

	ok(t, vars, "lsm", "create", "proxy", "--attr", "name=front", "--attr", "port=8000",
		"--attr", `routes=[{"prefix":"/shop","upstream":8080}]`, "--wait", "up")
	file := filepath.Join(root, "proxies", "front.json")
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != `{"listen":"127.0.0.1:8000","routes":[{"prefix":"/shop","upstream":"http://127.0.0.1:8080","timeout":30}]}`+"\n" {
		t.Errorf("front.json = %q", got)
	}

	ok(t, vars, "lsm", "update", "proxy", "front", "--set", "routes[prefix=/shop].upstream=8081",
		"--set", `routes[prefix=/blog]={"prefix":"/blog","scheme":"https","upstream":8443,"timeout":5}`, "--wait", "up")
	if got := read(); !strings.Contains(got, `{"prefix":"/shop","upstream":"http://127.0.0.1:8081","timeout":30},{"prefix":"/blog","upstream":"https://127.0.0.1:8443","timeout":5}`) {
		t.Errorf("front.json after the update = %q", got)
	}

	fails(t, vars, exitFailed, []string{"422", "/attributes/routes/0/scheme", "routes[prefix=/shop].scheme: cannot change after creation"},
		"lsm", "update", "proxy", "front", "--set", `routes[prefix=/shop].scheme="https"`)
	fails(t, vars, exitUsage, []string{"not both"}, "lsm", "update", "proxy", "front", "--attr", "port=8001", "--remove", "routes[prefix=/blog]")
	fails(t, vars, exitUsage, []string{"--set", "routes[prefix=/shop"}, "lsm", "update", "proxy", "front", "--set", "routes[prefix=/shop.upstream=1")

	ok(t, vars, "lsm", "update", "proxy", "front", "--remove", "routes[prefix=/blog]", "--wait", "up")
	if got := read(); strings.Contains(got, "/blog") || !strings.Contains(got, "/shop") {
		t.Errorf("front.json after the remove = %q", got)
	}
}

func TestSplitPathAssignment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, path, value string }{
		{"memory=8", "memory", "8"},
		{"routes[prefix=/shop].upstream=8081", "routes[prefix=/shop].upstream", "8081"},
		{`ports[proto=tcp,port=80]={"a":1}`, "ports[proto=tcp,port=80]", `{"a":1}`},
		{`a\=b=c`, `a\=b`, "c"},
		{"x[v=[].y=z=w", "x[v=[].y", "z=w"},
	} {
		p, v, ok := splitPathAssignment(c.in)
		if !ok || p != c.path || v != c.value {
			t.Errorf("splitPathAssignment(%q) = %q, %q, %v; want %q, %q", c.in, p, v, ok, c.path, c.value)
		}
	}
	for _, in := range []string{"memory", "=8", "a[b=c]"} {
		if _, _, ok := splitPathAssignment(in); ok {
			t.Errorf("splitPathAssignment(%q) split", in)
		}
	}
}
