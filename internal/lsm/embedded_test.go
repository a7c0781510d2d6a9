package lsm

import (
	"encoding/json"
	"reflect"
	"testing"
)

// routerSpecs: a router with a list of interfaces (rw+: they come and go),
// each with an address (one embedded entity), a list of uplinks fixed at
// creation (rw), and a management entity (rw) the model completes.
var routerSpecs = []AttributeSpec{
	{Name: "name", Modifier: ReadWrite, Required: true},
	{Name: "interfaces", Modifier: ReadWriteAlways, Default: json.RawMessage("[]"), Embedded: &EmbeddedSpec{
		List: true, Key: []string{"name"}, Attributes: []AttributeSpec{
			{Name: "name", Modifier: ReadWrite, Required: true},
			{Name: "mtu", Modifier: ReadWriteAlways, Default: json.RawMessage("1500")},
			{Name: "vlan", Modifier: ReadWrite},
			{Name: "mac", Modifier: ReadOnly},
			{Name: "address", Modifier: ReadWriteAlways, Embedded: &EmbeddedSpec{Attributes: []AttributeSpec{
				{Name: "ip", Modifier: ReadWrite, Required: true},
				{Name: "prefix", Modifier: ReadWriteAlways, Default: json.RawMessage("24")},
			}}},
		}}},
	{Name: "uplinks", Modifier: ReadWrite, Default: json.RawMessage("[]"), Embedded: &EmbeddedSpec{
		List: true, Key: []string{"port", "proto"}, Attributes: []AttributeSpec{
			{Name: "port", Modifier: ReadWrite, Required: true},
			{Name: "proto", Modifier: ReadWrite, Required: true},
			{Name: "speed", Modifier: ReadWriteAlways},
		}}},
	{Name: "mgmt", Modifier: ReadWrite, Embedded: &EmbeddedSpec{Attributes: []AttributeSpec{
		{Name: "host", Modifier: ReadWrite, Required: true},
		{Name: "token", Modifier: ReadOnly},
		{Name: "timeout", Modifier: ReadWriteAlways},
	}}},
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}

func TestCheckCreateEmbedded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why   string
		attrs string
		want  []AttributeProblem
	}{
		{"no embedded values at all", `{"name":"r1"}`, nil},
		{"every writable field at every depth",
			`{"name":"r1","interfaces":[{"name":"eth0","mtu":9000,"vlan":5,"address":{"ip":"10.0.0.1","prefix":16}},{"name":"eth1"}],
			  "uplinks":[{"port":1,"proto":"tcp","speed":10}],"mgmt":{"host":"h","timeout":3}}`, nil},
		{"an unknown field in an element",
			`{"name":"r1","interfaces":[{"name":"eth0","colour":"red"}]}`,
			[]AttributeProblem{{Attribute: "interfaces[name=eth0].colour", Pointer: "/interfaces/0/colour", Reason: ReasonUnknown}}},
		{"an r field in an element is the model's",
			`{"name":"r1","interfaces":[{"name":"eth0"},{"name":"eth1","mac":"aa"}]}`,
			[]AttributeProblem{{Attribute: "interfaces[name=eth1].mac", Pointer: "/interfaces/1/mac", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"an r field of one embedded entity",
			`{"name":"r1","mgmt":{"host":"h","token":"t"}}`,
			[]AttributeProblem{{Attribute: "mgmt.token", Pointer: "/mgmt/token", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"a required field missing two deep",
			`{"name":"r1","interfaces":[{"name":"eth0","address":{"prefix":8}}]}`,
			[]AttributeProblem{{Attribute: "interfaces[name=eth0].address.ip", Pointer: "/interfaces/0/address/ip", Reason: ReasonMissing, Modifier: ReadWrite}}},
		{"an element without its key is named by index",
			`{"name":"r1","interfaces":[{"mtu":1}]}`,
			[]AttributeProblem{{Attribute: "interfaces[0].name", Pointer: "/interfaces/0/name", Reason: ReasonMissing, Modifier: ReadWrite}}},
		{"two elements with one key",
			`{"name":"r1","uplinks":[{"port":1,"proto":"tcp"},{"port":1.0,"proto":"tcp"},{"port":1,"proto":"udp"}]}`,
			[]AttributeProblem{{Attribute: "uplinks[1]", Pointer: "/uplinks/1", Reason: ReasonDuplicateKey,
				Detail: "element 0 has the same key uplinks[port=1,proto=tcp]"}}},
		{"special characters in keys and values are escaped in the path and the pointer",
			`{"name":"r1","interfaces":[{"name":"ge-0/0/1.5","a.b/c~":1}]}`,
			[]AttributeProblem{{Attribute: `interfaces[name=ge-0/0/1.5].a\.b/c~`, Pointer: "/interfaces/0/a.b~1c~0", Reason: ReasonUnknown}}},
		{"a top-level problem is named as before",
			`{"interfaces":[]}`,
			[]AttributeProblem{{Attribute: "name", Reason: ReasonMissing, Modifier: ReadWrite}}},
		{"values of the wrong shape are the model's to refuse",
			`{"name":"r1","interfaces":{"name":"eth0"},"mgmt":[1],"uplinks":[1,"x"]}`, nil},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			checkAttributeError(t, CheckCreate(routerSpecs, decode(t, c.attrs)), c.want)
		})
	}
}

func TestCheckUpdateEmbedded(t *testing.T) {
	t.Parallel()
	// current is as the server keeps it: defaults written in, r values
	// computed by the model.
	const current = `{"name":"r1",
		"interfaces":[{"name":"eth0","mtu":1500,"vlan":5,"mac":"aa","address":{"ip":"10.0.0.1","prefix":24}},{"name":"eth1","mtu":1500,"mac":"bb"}],
		"uplinks":[{"port":1,"proto":"tcp","speed":10},{"port":2,"proto":"tcp"}],
		"mgmt":{"host":"h","token":"t"}}`
	cases := []struct {
		why   string
		edits []Edit
		want  []AttributeProblem
	}{
		{"an rw+ field of an element, by key", []Edit{replace("interfaces[name=eth0].mtu", "9000")}, nil},
		{"an rw field of an element, by key",
			[]Edit{replace("interfaces[name=eth0].vlan", "6")},
			[]AttributeProblem{{Attribute: "interfaces[name=eth0].vlan", Pointer: "/interfaces/0/vlan", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an rw field set later is a change", []Edit{replace("interfaces[name=eth1].vlan", "7")},
			[]AttributeProblem{{Attribute: "interfaces[name=eth1].vlan", Pointer: "/interfaces/1/vlan", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an rw field two deep", []Edit{replace("interfaces[name=eth0].address.ip", `"10.0.0.2"`)},
			[]AttributeProblem{{Attribute: "interfaces[name=eth0].address.ip", Pointer: "/interfaces/0/address/ip", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an rw+ field two deep", []Edit{replace("interfaces[name=eth0].address.prefix", "16")}, nil},
		{"an element added to an rw+ list, its rw fields set now",
			[]Edit{{Operation: "replace", Target: "interfaces[name=eth2]", Value: json.RawMessage(`{"name":"eth2","vlan":9,"address":{"ip":"10.0.0.3"}}`)}}, nil},
		{"an element added to an rw+ list is checked as a create",
			[]Edit{{Operation: "replace", Target: "interfaces[name=eth2]", Value: json.RawMessage(`{"name":"eth2","mac":"cc","address":{}}`)}},
			[]AttributeProblem{
				{Attribute: "interfaces[name=eth2].address.ip", Pointer: "/interfaces/2/address/ip", Reason: ReasonMissing, Modifier: ReadWrite},
				{Attribute: "interfaces[name=eth2].mac", Pointer: "/interfaces/2/mac", Reason: ReasonReadOnly, Modifier: ReadOnly},
			}},
		{"an element removed from an rw+ list", []Edit{{Operation: "remove", Target: "interfaces[name=eth0]"}}, nil},
		{"an element moved within an rw+ list",
			[]Edit{{Operation: "replace", Target: "interfaces", Value: json.RawMessage(`[{"name":"eth1","mtu":1500,"mac":"bb"},{"name":"eth0","mtu":1500,"vlan":5,"mac":"aa","address":{"ip":"10.0.0.1","prefix":24}}]`)}}, nil},
		{"an rw+ field of an rw list's element", []Edit{replace("uplinks[port=2,proto=tcp].speed", "40")}, nil},
		{"an element added to an rw list",
			[]Edit{{Operation: "replace", Target: "uplinks[port=3,proto=udp]", Value: json.RawMessage(`{"port":3,"proto":"udp"}`)}},
			[]AttributeProblem{{Attribute: "uplinks", Reason: ReasonNotUpdatable, Modifier: ReadWrite, Detail: "adds uplinks[port=3,proto=udp]"}}},
		{"an element removed from an rw list",
			[]Edit{{Operation: "remove", Target: "uplinks[port=1][proto=tcp]"}},
			[]AttributeProblem{{Attribute: "uplinks", Reason: ReasonNotUpdatable, Modifier: ReadWrite, Detail: "removes uplinks[port=1,proto=tcp]"}}},
		{"an rw list reordered",
			[]Edit{{Operation: "replace", Target: "uplinks", Value: json.RawMessage(`[{"port":2,"proto":"tcp"},{"port":1,"proto":"tcp","speed":10}]`)}},
			[]AttributeProblem{{Attribute: "uplinks", Reason: ReasonNotUpdatable, Modifier: ReadWrite, Detail: "reorders its elements"}}},
		{"a key changed is an element removed and another added",
			[]Edit{replace("uplinks[port=1,proto=tcp].port", "5")},
			[]AttributeProblem{{Attribute: "uplinks", Reason: ReasonNotUpdatable, Modifier: ReadWrite, Detail: "adds uplinks[port=5,proto=tcp]; removes uplinks[port=1,proto=tcp]"}}},
		{"an rw+ field of an rw embedded entity", []Edit{replace("mgmt.timeout", "5")}, nil},
		{"an rw field of an rw embedded entity", []Edit{replace("mgmt.host", `"h2"`)},
			[]AttributeProblem{{Attribute: "mgmt.host", Pointer: "/mgmt/host", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an r field changed", []Edit{replace("mgmt.token", `"forged"`)},
			[]AttributeProblem{{Attribute: "mgmt.token", Pointer: "/mgmt/token", Reason: ReasonReadOnly, Modifier: ReadOnly}}},
		{"an r field left out: the model computes it again", []Edit{{Operation: "remove", Target: "interfaces[name=eth0].mac"}}, nil},
		{"an rw embedded entity removed", []Edit{{Operation: "remove", Target: "mgmt"}},
			[]AttributeProblem{{Attribute: "mgmt", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
		{"an unknown field in an element", []Edit{replace("interfaces[name=eth1].colour", `"red"`)},
			[]AttributeProblem{{Attribute: "interfaces[name=eth1].colour", Pointer: "/interfaces/1/colour", Reason: ReasonUnknown}}},
		{"an rw+ list's element made a duplicate",
			[]Edit{replace("interfaces[name=eth1].name", `"eth0"`)},
			[]AttributeProblem{{Attribute: "interfaces[1]", Pointer: "/interfaces/1", Reason: ReasonDuplicateKey,
				Detail: "element 0 has the same key interfaces[name=eth0]"}}},
		{"an rw list replaced by something that is no list", []Edit{replace("uplinks", `"none"`)},
			[]AttributeProblem{{Attribute: "uplinks", Reason: ReasonNotUpdatable, Modifier: ReadWrite}}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			cur := decode(t, current)
			next, err := ApplyEdits(cur, c.edits)
			if err != nil {
				t.Fatal(err)
			}
			checkAttributeError(t, CheckUpdate(routerSpecs, cur, next), c.want)
			if !reflect.DeepEqual(cur, decode(t, current)) {
				t.Error("CheckUpdate changed current")
			}
		})
	}
}

func replace(target, value string) Edit {
	return Edit{Operation: "replace", Target: target, Value: json.RawMessage(value)}
}

func TestEmbeddedDefaultsAndReadOnly(t *testing.T) {
	t.Parallel()
	given := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","address":{"ip":"10.0.0.1"}},{"name":"eth1","mtu":9000}],"mgmt":{"host":"h"}}`)
	got := WithDefaults(routerSpecs, given)
	want := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":1500,"address":{"ip":"10.0.0.1","prefix":24}},{"name":"eth1","mtu":9000}],
		"uplinks":[],"mgmt":{"host":"h"}}`)
	if !sameJSON(got, want) {
		t.Errorf("WithDefaults = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(given, decode(t, `{"name":"r1","interfaces":[{"name":"eth0","address":{"ip":"10.0.0.1"}},{"name":"eth1","mtu":9000}],"mgmt":{"host":"h"}}`)) {
		t.Error("WithDefaults changed its input")
	}

	stored := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mac":"aa"},{"name":"eth1"}],"mgmt":{"host":"h","token":"t"}}`)
	stripped := WithoutReadOnly(routerSpecs, stored)
	if !sameJSON(stripped, decode(t, `{"name":"r1","interfaces":[{"name":"eth0"},{"name":"eth1"}],"mgmt":{"host":"h"}}`)) {
		t.Errorf("WithoutReadOnly = %v", stripped)
	}
	if stored["interfaces"].([]any)[0].(map[string]any)["mac"] != "aa" {
		t.Error("WithoutReadOnly changed its input")
	}
	none := decode(t, `{"name":"r1","interfaces":[{"name":"eth0"}]}`)
	if got := WithoutReadOnly(routerSpecs, none); reflect.ValueOf(got).Pointer() != reflect.ValueOf(none).Pointer() {
		t.Error("WithoutReadOnly copied attributes without r values")
	}

	param := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":1500,"mac":"aa"}],"uplinks":[],"mgmt":{"host":"h","token":"t"}}`)
	ro := ReadOnlyValues(routerSpecs, param)
	if !sameJSON(ro, decode(t, `{"interfaces":[{"name":"eth0","mtu":1500,"mac":"aa"}],"mgmt":{"host":"h","token":"t"}}`)) {
		t.Errorf("ReadOnlyValues = %v: the embedded attributes with r values inside, whole; uplinks has none", ro)
	}
}

func TestRestoreEmbedded(t *testing.T) {
	t.Parallel()
	then := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":1500,"mac":"aa"}],"uplinks":[{"port":1,"proto":"tcp","speed":10}],"mgmt":{"host":"h","token":"t0"}}`)
	cur := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":9000,"mac":"aa"},{"name":"eth1","mtu":1500,"mac":"bb"}],"uplinks":[{"port":1,"proto":"tcp","speed":40}],"mgmt":{"host":"h","token":"t1","timeout":3}}`)
	next := RestoreAttributes(routerSpecs, cur, then)
	want := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":1500}],"uplinks":[{"port":1,"proto":"tcp","speed":10}],"mgmt":{"host":"h"}}`)
	if !sameJSON(next, want) {
		t.Errorf("RestoreAttributes = %v, want %v", next, want)
	}
	if err := CheckUpdate(routerSpecs, cur, next); err != nil {
		t.Errorf("the restore is refused: %v", err)
	}
}

// TestUpdateAddsEmbeddedDefaults: an update that adds an element gets
// its fields' defaults in the candidate set (the create's elements got
// them from WithDefaults), and the elements it keeps stay as they were;
// an entity without embedded ones gets its attributes back as they are.
func TestUpdateAddsEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	l := Simple()
	active := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":9000}],"uplinks":[]}`)
	s := Subject{ID: "r1", Version: 3, State: "up", Lifecycle: &l, Attributes: routerSpecs,
		Entity: Entity{Name: "router", Attributes: routerSpecs}, Sets: Sets{Active: active}}
	next := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":9000},{"name":"eth1","address":{"ip":"10.0.0.2"}}],"uplinks":[]}`)
	d, rej := Decide(s, Request{Op: OpUpdate, CurrentVersion: 3, Attributes: next})
	if rej != nil {
		t.Fatal(rej)
	}
	want := decode(t, `{"name":"r1","interfaces":[{"name":"eth0","mtu":9000},{"name":"eth1","mtu":1500,"address":{"ip":"10.0.0.2","prefix":24}}],"uplinks":[]}`)
	if !sameJSON(d.Sets.Candidate, want) {
		t.Errorf("candidate = %v, want %v", d.Sets.Candidate, want)
	}
	if _, ok := next["interfaces"].([]any)[1].(map[string]any)["mtu"]; ok {
		t.Error("Decide changed the request's attributes")
	}
	flat := []AttributeSpec{{Name: "name", Modifier: ReadWrite}, {Name: "size", Modifier: ReadWriteAlways, Default: json.RawMessage("2")}}
	attrs := map[string]any{"name": "x"}
	if got := WithEmbeddedDefaults(flat, attrs); reflect.ValueOf(got).Pointer() != reflect.ValueOf(attrs).Pointer() {
		t.Errorf("without embedded entities: %v, want the attributes themselves", got)
	}
}
