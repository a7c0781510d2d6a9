package dictpath_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/intendhq/intend/dictpath"
)

func Example() {
	var attrs any
	_ = json.Unmarshal([]byte(`{"name": "web", "ports": [{"port": 80, "proto": "tcp"}]}`), &attrs)

	// Each edit returns a new document; attrs is kept as it was.
	next, err := dictpath.Replace(attrs, dictpath.MustParse("ports[port=443].proto"), "tcp")
	if err != nil {
		panic(err)
	}
	next, err = dictpath.Merge(next, dictpath.MustParse("ports[port=80]"), map[string]any{"proto": nil, "redirect": true})
	if err != nil {
		panic(err)
	}
	before, _ := json.Marshal(attrs)
	after, _ := json.Marshal(next)
	fmt.Println(string(before))
	fmt.Println(string(after))
	// Output:
	// {"name":"web","ports":[{"port":80,"proto":"tcp"}]}
	// {"name":"web","ports":[{"port":80,"redirect":true},{"port":"443","proto":"tcp"}]}
}

func ExampleFind() {
	var attrs any
	_ = json.Unmarshal([]byte(`{"vlans": [{"id": 10, "name": "a"}, {"id": 20}, {"id": 30, "name": "c"}]}`), &attrs)
	for _, m := range dictpath.Find(attrs, mustParseWild("vlans[name=*].id")) {
		fmt.Println(m.Path, m.Value)
	}
	// Output:
	// vlans[0].id 10
	// vlans[2].id 30
}

func ExamplePathError() {
	attrs := map[string]any{"ports": map[string]any{"port": 80.0}}
	_, err := dictpath.Replace(attrs, dictpath.MustParse("ports[port=80].proto"), "tcp")
	var pe *dictpath.PathError
	if errors.As(err, &pe) && errors.Is(err, dictpath.ErrType) {
		fmt.Println(pe.At, "|", pe.Msg)
	}
	// Output:
	// ports | found a dict, want a list
}

func ExampleParse() {
	p, err := dictpath.Parse(`a\.b[id=1,name=x].c`)
	fmt.Println(p, err)
	_, err = dictpath.Parse("a[name=x")
	fmt.Println(err)
	// Output:
	// a\.b[id=1,name=x].c <nil>
	// dictpath: invalid path "a[name=x" at offset 8: expected ',' or ']' after the filter value, found the end of the path (escape special characters with '\')
}

func mustParseWild(s string) dictpath.WildPath {
	w, err := dictpath.ParseWild(s)
	if err != nil {
		panic(err)
	}
	return w
}
