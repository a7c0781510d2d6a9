package console

import (
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// routerEntity has a list of interfaces (rw+, keyed by name), a list of
// uplinks fixed at creation (rw) whose speed may change (rw+ inside), and
// a management entity (rw) with nothing updatable inside.
var routerEntity = client.EntityDefinition{Name: "router", Attributes: []client.AttributeSpec{
	{Name: "name", Modifier: "rw", Required: true, Schema: []byte(`{"type":"string"}`)},
	{Name: "interfaces", Modifier: "rw+", Schema: []byte(`{"type":"array"}`), Embedded: &client.EmbeddedSpec{
		List: true, Key: []string{"name"}, Attributes: []client.AttributeSpec{
			{Name: "name", Modifier: "rw", Required: true},
			{Name: "mtu", Modifier: "rw+"},
			{Name: "mac", Modifier: "r", Required: true},
			{Name: "address", Modifier: "rw+", Embedded: &client.EmbeddedSpec{Attributes: []client.AttributeSpec{
				{Name: "ip", Modifier: "rw", Required: true}}}},
		}}},
	{Name: "uplinks", Modifier: "rw", Schema: []byte(`{"type":"array"}`), Embedded: &client.EmbeddedSpec{
		List: true, Key: []string{"port", "proto"}, Attributes: []client.AttributeSpec{
			{Name: "port", Modifier: "rw", Required: true}, {Name: "proto", Modifier: "rw", Required: true},
			{Name: "speed", Modifier: "rw+"}}}},
	{Name: "mgmt", Modifier: "rw", Schema: []byte(`{"type":"object"}`), Embedded: &client.EmbeddedSpec{Attributes: []client.AttributeSpec{
		{Name: "host", Modifier: "rw", Required: true}, {Name: "token", Modifier: "r"}}}},
}}

func TestEmbeddedForms(t *testing.T) {
	t.Parallel()
	var names []string
	f := newForm(routerEntity, true, map[string]any{"interfaces": []any{map[string]any{"name": "eth0", "mtu": 1500.0}}})
	for _, fl := range f.Fields {
		names = append(names, fl.Name)
		if fl.Kind != "json" {
			t.Errorf("%s: kind %s, want json (edited as a JSON value)", fl.Name, fl.Kind)
		}
	}
	if strings.Join(names, ",") != "interfaces,uplinks" {
		t.Errorf("the update form's fields: %v; want the rw+ list and the rw list with rw+ inside, not mgmt", names)
	}
	if got := f.Fields[0].Embedded; got != "A list of entities, keyed by name: name (rw, required), mtu (rw+), mac (r), address (rw+)." {
		t.Errorf("interfaces' help: %q", got)
	}
	if got := f.Fields[1].Embedded; got != "A list of entities, keyed by port and proto: port (rw, required), proto (rw, required), speed (rw+)." {
		t.Errorf("uplinks' help: %q", got)
	}
	if f.Fields[0].Value != `[{"mtu":1500,"name":"eth0"}]` {
		t.Errorf("interfaces' value: %q", f.Fields[0].Value)
	}
	create := newForm(routerEntity, false, nil)
	if len(create.Fields) != 4 || create.Fields[3].Embedded != "An entity: host (rw, required), token (r)." {
		t.Errorf("the create form: %+v", create.Fields)
	}

	// The API's 422 inside an embedded entity goes to its attribute's field.
	f.setErrors(&client.Problem{Errors: []client.FieldError{
		{Field: "/attributes/uplinks/1/port", Detail: "uplinks: cannot change after creation"},
		{Field: "/attributes/interfaces/0/mac", Detail: "interfaces[name=eth0].mac: read-only (r), set by the server"}}})
	if f.Fields[0].Error != "interfaces[name=eth0].mac: read-only (r), set by the server" || f.Fields[1].Error == "" || len(f.Errors) != 0 {
		t.Errorf("errors: %q, %q, %v", f.Fields[0].Error, f.Fields[1].Error, f.Errors)
	}
}

func TestFlatAttributes(t *testing.T) {
	t.Parallel()
	var got []string
	for _, a := range flatAttributes(append(routerEntity.Attributes, client.AttributeSpec{Name: "odd", Modifier: "rw",
		Embedded: &client.EmbeddedSpec{Attributes: []client.AttributeSpec{{Name: "a.b", Modifier: "rw"}}}}), "") {
		got = append(got, a.Name+" "+a.Modifier)
	}
	want := []string{"name rw", "interfaces rw+, key=name", "interfaces[*].name rw", "interfaces[*].mtu rw+", "interfaces[*].mac r",
		"interfaces[*].address rw+", "interfaces[*].address.ip rw", "uplinks rw, key=port, key=proto", "uplinks[*].port rw",
		"uplinks[*].proto rw", "uplinks[*].speed rw+", "mgmt rw", "mgmt.host rw", "mgmt.token r", "odd rw", `odd.a\.b rw`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("flatAttributes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
