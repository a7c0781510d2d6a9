package dictpath_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intendhq/intend/dictpath"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want is the canonical form
		wild     bool   // only ParseWild accepts it
		why      string
	}{
		{"", ".", false, "the empty text is the root"},
		{".", ".", false, "the root"},
		{"a", "a", false, "one key"},
		{"a.b.c", "a.b.c", false, "nested keys"},
		{`a\.b`, `a\.b`, false, "an escaped dot is part of the key"},
		{`\[\]\=\,\*\\`, `\[\]\=\,\*\\`, false, "every special character escaped"},
		{`\0`, `\0`, false, "the empty key"},
		{`a.\0.b`, `a.\0.b`, false, "the empty key between others"},
		{`\\0`, `\\0`, false, `the key \0 (backslash, zero)`},
		{"items[name=x].size", "items[name=x].size", false, "a filter"},
		{"items[name=x,id=1]", "items[id=1,name=x]", false, "filters are sorted by key"},
		{"items[0]", "items[0]", false, "an index"},
		{"items[10].a", "items[10].a", false, "a two-digit index"},
		{"items[0=1]", "items[0=1]", false, "a digit key is a filter when '=' follows"},
		{"items[1a=2]", "items[1a=2]", false, "a key starting with a digit"},
		{"items[-1=x]", "items[-1=x]", false, "'-' is not special"},
		{"items[k=]", "items[k=]", false, "the empty string as a value"},
		{`items[k=\0]`, `items[k=\0]`, false, "null as a value"},
		{`items[\0=v]`, `items[\0=v]`, false, "the empty filter key"},
		{`items[k=\\0]`, `items[k=\\0]`, false, `the string \0 as a value`},
		{`items[k=\*]`, `items[k=\*]`, false, "the string * as a value"},
		{`items[k=a\,b\]\=c]`, `items[k=a\,b\]\=c]`, false, "escapes in a value"},
		{`\*`, `\*`, false, "the key *"},
		{"hosts[ip=10.0.0.1]", "hosts[ip=10.0.0.1]", false, "'.' is ordinary in a value"},
		{`hosts[ip=10\.0]`, "hosts[ip=10.0]", false, "escaping '.' in a value is allowed, not canonical"},
		{"a[k.x=x[1\\]]", "a[k.x=x[1\\]]", false, "'.' and '[' are ordinary in a selector, ']' is not"},
		{`a[k=\[]`, "a[k=[]", false, "escaping '[' in a value is allowed, not canonical"},
		{`a\[0\].b`, `a\[0\].b`, false, "'[' and ']' in a key"},
		{"é.ü", "é.ü", false, "non-ASCII keys"},
		{"a b. c", "a b. c", false, "spaces are ordinary"},
		{"*", "*", true, "every member of the root"},
		{"*.a", "*.a", true, "a member of every member"},
		{"a[*]", "a[*]", true, "every element"},
		{"a[*].b", "a[*].b", true, "a member of every element"},
		{"a[k=*]", "a[k=*]", true, "every element with member k"},
		{"*[k=*,j=1]", "*[j=1,k=*]", true, "wildcards combined, filters sorted"},
		{"*[0]", "*[0]", true, "an index in every member"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			w, err := dictpath.ParseWild(tt.in)
			if err != nil {
				t.Fatalf("ParseWild(%q): %v (%s)", tt.in, err, tt.why)
			}
			if got := w.String(); got != tt.want {
				t.Errorf("ParseWild(%q).String() = %q, want %q (%s)", tt.in, got, tt.want, tt.why)
			}
			p, err := dictpath.Parse(tt.in)
			if tt.wild {
				if err == nil {
					t.Fatalf("Parse(%q) accepted a wildcard (%s)", tt.in, tt.why)
				}
				if _, ok := w.Exact(); ok {
					t.Errorf("ParseWild(%q).Exact() reported no wildcard", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v (%s)", tt.in, err, tt.why)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q (%s)", tt.in, got, tt.want, tt.why)
			}
			if e, ok := w.Exact(); !ok || !e.Equal(p) {
				t.Errorf("ParseWild(%q).Exact() = %v, %v; want %v", tt.in, e, ok, p)
			}
			q, err := dictpath.Parse(p.String())
			if err != nil || !q.Equal(p) || q.String() != p.String() {
				t.Errorf("Parse(%q) = %v, %v; want %v", p.String(), q, err, p)
			}
		})
	}
}

func TestParseError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		wild   bool // parse with ParseWild
		offset int
		msg    string // part of the message
		why    string
	}{
		{".a", false, 0, "expected a key, found '.'", "a path does not start with '.'"},
		{"a.", false, 2, "expected a key, found the end of the path", "a path does not end with '.'"},
		{"a..b", false, 2, "expected a key, found '.'", `an empty key is written \0`},
		{"[k=v]", false, 0, "expected a key, found '['", "a selector follows a key"},
		{"a[", false, 2, "expected '*', an index or a filter", "an unfinished selector"},
		{"a[]", false, 2, "expected '*', an index or a filter", "an empty selector"},
		{"a[k", false, 3, "expected '=' after the filter key, found the end", "a filter without '='"},
		{"a[k]", false, 3, "expected '=' after the filter key, found ']'", "a filter without a value"},
		{"a[k=v", false, 5, "expected ',' or ']'", "an unclosed filter"},
		{"a[k=v,]", false, 6, "expected a filter key, found ']'", "a trailing comma"},
		{"a[=v]", false, 2, "expected '*', an index or a filter", `the empty filter key is written \0`},
		{"a[k=1,k=2]", false, 6, `duplicate filter key "k"`, "filters on one key twice"},
		{`a[\0=1,\0=2]`, false, 7, `duplicate filter key ""`, "the empty filter key twice"},
		{"a[k=a=b]", false, 5, "expected ',' or ']' after the filter value, found '='", "'=' in a value is escaped"},
		{"a]", false, 1, `unexpected ']' in a key`, "']' in a key is escaped"},
		{"a=b", false, 1, `unexpected '=' in a key`, "'=' in a key is escaped"},
		{"a,b", false, 1, `unexpected ',' in a key`, "',' in a key is escaped"},
		{"a*", false, 1, `unexpected '*' in a key`, "'*' in a key is escaped"},
		{`a\`, false, 1, "found the end of the path", "a trailing backslash"},
		{`a\q`, false, 1, "invalid escape: '\\' followed by 'q'", "only special characters are escaped"},
		{`a\0`, false, 1, `\0 stands alone`, `\0 inside a key`},
		{`\0a`, false, 0, `\0 stands alone`, `\0 before text`},
		{`\0\.`, false, 0, `\0 stands alone`, `\0 before an escape`},
		{`a[k=v\0]`, false, 5, `\0 stands alone`, `\0 inside a value`},
		{`a[k=\0.]`, false, 4, `\0 stands alone`, `'.' is ordinary text in a value`},
		{"a[01]", false, 2, "no leading zeros", "indexes are canonical"},
		{"a[99999999999999999999]", false, 2, "too large", "an index beyond int"},
		{"a[k=v]b", false, 6, "expected '.' or the end of the path after ']', found 'b'", "text after a selector"},
		{"a[0][1]", false, 4, "expected '.' or the end of the path after ']', found '['", "one selector per element"},
		{"a[k=v]]", false, 6, "expected '.' or the end of the path after ']', found ']'", "a stray ']'"},
		{"a\xff", false, 1, "invalid UTF-8", "paths are UTF-8"},
		{"*", false, 0, "only allowed in a wild path", "Parse takes no wildcard key"},
		{"a.*.b", false, 2, "only allowed in a wild path", "Parse takes no wildcard key inside"},
		{"a[*]", false, 2, "only allowed in a wild path", "Parse takes no [*]"},
		{"a[k=*]", false, 4, "only allowed in a wild path", "Parse takes no k=*"},
		{"*a", true, 0, "'*' is a wildcard only as a whole key", "a partial wildcard"},
		{"a.b*", true, 3, `unexpected '*' in a key`, "a trailing wildcard"},
		{"a[*,k=v]", true, 2, "[*] takes no filters", "[*] alone"},
		{"a[*=v]", true, 2, "[*] takes no filters", "a wildcard filter key"},
		{"a[k=*x]", true, 4, "expected ',' or ']' after the filter value, found '*'", "a partial wildcard value"},
		{"a[k=x*]", true, 5, "expected ',' or ']' after the filter value, found '*'", "a wildcard after text"},
		{"a[k=*", true, 5, "expected ',' or ']' after the filter value, found the end", "an unclosed wildcard filter"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var err error
			if tt.wild {
				_, err = dictpath.ParseWild(tt.in)
			} else {
				_, err = dictpath.Parse(tt.in)
			}
			var se *dictpath.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("parse %q: error %v, want a *SyntaxError (%s)", tt.in, err, tt.why)
			}
			if se.Input != tt.in || se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("parse %q: %+v, want offset %d and a message with %q (%s)", tt.in, se, tt.offset, tt.msg, tt.why)
			}
			if !strings.Contains(err.Error(), se.Msg) {
				t.Errorf("Error() = %q does not hold the message", err.Error())
			}
		})
	}
}

func TestSyntaxErrorText(t *testing.T) {
	t.Parallel()
	_, err := dictpath.Parse("a[k")
	want := `dictpath: invalid path "a[k" at offset 3: expected '=' after the filter key, found the end of the path`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error = %v, want %s", err, want)
	}
}

func TestEqual(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want bool
	}{
		{".", "", true},
		{"a[x=1,y=2]", "a[y=2,x=1]", true},
		{"a[x=1]", "a[x=1.0]", false}, // equal numbers, different texts: "1.0" also matches the string "1.0"
		{`a[x=\0]`, "a[x=]", false},
		{`\0`, ".", false},
		{"a.b", "a", false},
		{"a[0]", "a[1]", false},
		{"a[0]", "a[0=0]", false},
	}
	for _, tt := range tests {
		a, b := dictpath.MustParse(tt.a), dictpath.MustParse(tt.b)
		if got := a.Equal(b); got != tt.want {
			t.Errorf("%q.Equal(%q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := a.Wild().Equal(b.Wild()); got != tt.want {
			t.Errorf("wild %q.Equal(%q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	var edit struct {
		Target dictpath.Path     `json:"target"`
		Find   dictpath.WildPath `json:"find"`
	}
	if err := json.Unmarshal([]byte(`{"target": "items[name=x,id=1].size", "find": "items[*]"}`), &edit); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(edit)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"target":"items[id=1,name=x].size","find":"items[*]"}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	err = json.Unmarshal([]byte(`{"target": "items[*]"}`), &edit)
	var se *dictpath.SyntaxError
	if !errors.As(err, &se) || se.Offset != 6 {
		t.Errorf("Unmarshal of a wild target: %v, want a *SyntaxError at offset 6", err)
	}
}

func TestMustParsePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("MustParse(\"a[\") did not panic")
		}
	}()
	dictpath.MustParse("a[")
}

// TestMultiKeyForm: Inmanta's list[k1=v1][k2=v2] means list[k1=v1,k2=v2],
// so paths written for Inmanta work unchanged; only filters chain.
func TestMultiKeyForm(t *testing.T) {
	for _, in := range []string{"ports[proto=tcp][port=80].open", "ports[port=80][proto=tcp].open",
		"ports[proto=tcp][port=80,x=\\0].open"} {
		p, err := dictpath.Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		want := "ports[port=80,proto=tcp].open"
		if strings.Contains(in, "x=") {
			want = "ports[port=80,proto=tcp,x=\\0].open"
		}
		if p.String() != want || !p.Equal(dictpath.MustParse(want)) {
			t.Errorf("Parse(%q) = %s, want %s", in, p, want)
		}
	}
	doc := map[string]any{"ports": []any{
		map[string]any{"proto": "udp", "port": 80.0, "open": false},
		map[string]any{"proto": "tcp", "port": 80.0, "open": true}}}
	if v, ok := dictpath.Get(doc, dictpath.MustParse("ports[proto=tcp][port=80].open")); !ok || v != true {
		t.Errorf("Get through the multi-key form = %v, %v", v, ok)
	}
	for in, want := range map[string]string{
		"ports[proto=tcp][proto=udp]": "duplicate filter key",
		"ports[0][proto=tcp]":         "expected '.' or the end of the path after ']'",
		"ports[proto=tcp][1]":         "only filters",
		"ports[proto=tcp][":           "expected",
	} {
		if _, err := dictpath.Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
