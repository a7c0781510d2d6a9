package dictpath

import (
	"encoding/json"
	"testing"
)

func TestBuild(t *testing.T) {
	t.Parallel()
	root := Path{}
	ports := root.Key("ports")
	tcp, ok := ports.Where("proto", "tcp")
	if !ok {
		t.Fatal("Where refused a string")
	}
	both, ok := tcp.Where("port", json.Number("80"))
	if !ok {
		t.Fatal("Where refused a number")
	}
	cases := []struct {
		why  string
		p    Path
		want string
	}{
		{"a member", root.Key("a").Key("b"), "a.b"},
		{"an index", ports.Index(2).Key("size"), "ports[2].size"},
		{"filters add up, sorted", both.Key("open"), "ports[port=80,proto=tcp].open"},
		{"specials escaped", root.Key("a.b").Key("c[1]"), `a\.b.c\[1\]`},
		{"a value with dots and slashes", must(root.Key("ifs").Where("name", "ge-0/0/1.5")), "ifs[name=ge-0/0/1.5]"},
		{"null, bool, float", must(must(must(root.Key("x").Where("a", nil)).Where("b", true)).Where("c", 1.5)), `x[a=\0,b=true,c=1.5]`},
		{"the empty key", root.Key(""), `\0`},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
		if q, err := Parse(c.p.String()); err != nil || !q.Equal(c.p) {
			t.Errorf("%s: Parse(%q) = %v, %v: not the path built", c.why, c.p, q, err)
		}
	}
	if ports.String() != "ports" {
		t.Errorf("Where changed the path it was called on: %s", ports)
	}
	if _, ok := tcp.Where("proto", "udp"); ok {
		t.Error("Where took a key filtered on already")
	}
	if _, ok := ports.Where("x", map[string]any{}); ok {
		t.Error("Where took a dict as a value")
	}
	doc := map[string]any{"ports": []any{map[string]any{"proto": "tcp", "port": 80.0, "open": true}}}
	if v, ok := Get(doc, both.Key("open")); !ok || v != true {
		t.Errorf("Get through a built path: %v, %v", v, ok)
	}
	for _, f := range []func(){func() { root.Index(0) }, func() { ports.Index(0).Index(1) }, func() { root.Where("a", "b") }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}

func must(p Path, ok bool) Path {
	if !ok {
		panic("refused")
	}
	return p
}
