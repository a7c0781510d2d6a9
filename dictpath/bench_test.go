package dictpath_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/intendhq/intend/dictpath"
)

// benchDoc is a service instance's attributes of some size: 50 members, a
// list of 200 dicts.
func benchDoc(b *testing.B) any {
	var s strings.Builder
	s.WriteString(`{"items": [`)
	for i := range 200 {
		if i > 0 {
			s.WriteString(",")
		}
		fmt.Fprintf(&s, `{"name": "item%d", "size": %d, "tags": ["a", "b"], "opts": {"x": 1}}`, i, i)
	}
	s.WriteString("]")
	for i := range 50 {
		fmt.Fprintf(&s, `, "attr%d": {"v": %d, "s": "text"}`, i, i)
	}
	s.WriteString("}")
	return decode(b, s.String(), true)
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dictpath.Parse(`network.interfaces[name=eth0,vlan=10].addresses[ip=10.0.0.1].prefix\.len`); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	doc := benchDoc(b)
	p := dictpath.MustParse("items[name=item150].opts.x")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := dictpath.Get(doc, p); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkReplace is dominated by the copy of the document that keeps the
// input unchanged.
func BenchmarkReplace(b *testing.B) {
	doc := benchDoc(b)
	p := dictpath.MustParse("items[name=item150].opts.x")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dictpath.Replace(doc, p, 2.0); err != nil {
			b.Fatal(err)
		}
	}
}
