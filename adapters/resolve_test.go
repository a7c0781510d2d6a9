package adapters_test

import (
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/resource"
)

// TestResolveWithoutReferencesCopiesOnly checks that attributes with no
// map or list, so no secret reference (most resources), are only copied
// for the attempt (issue 28: the walk that looks for references doubled
// the allocations of this step of every attempt), and that the copy is
// the attempt's own.
func TestResolveWithoutReferencesCopiesOnly(t *testing.T) {
	attrs := map[string]any{"path": "/srv/f", "content": "file 4242\n", "mode": "0644"}
	desired := adapters.Resource{ID: resource.ID{Type: "fs::File", Agent: "a", Attribute: "path", Value: "/srv/f"},
		Attributes: attrs}
	hc := adapters.NewContext()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := hc.ResolveSecrets(desired); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("resolving attributes without references allocates %v times, want twice (the copy: a map, its table)", allocs)
	}
	plain, err := hc.ResolveSecrets(desired)
	if err != nil {
		t.Fatal(err)
	}
	plain.Attributes["mode"] = "0600"
	if attrs["mode"] != "0644" || len(plain.Attributes) != 3 || plain.Attributes["content"] != "file 4242\n" {
		t.Errorf("the attempt's attributes %v are not a copy of %v", plain.Attributes, attrs)
	}
}
