package netconf

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomConfig returns ietf-interfaces data of n random interfaces, each
// with random leaves, a leaf-list and a nested keyed list (ietf-ip's
// addresses), and a module change (ietf-ip) inside.
func randomConfig(r *rand.Rand, n int) map[string]any {
	var list []any
	for i := range n {
		e := map[string]any{"name": fmt.Sprintf("eth%d", i), "type": "iana-if-type:ethernetCsmacd"}
		if r.IntN(2) == 0 {
			e["description"] = fmt.Sprintf("link <%d> & \"more\"", r.IntN(1000))
		}
		if r.IntN(2) == 0 {
			e["enabled"] = r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			e["tags"] = []any{"b", "a", fmt.Sprint(r.IntN(9))}
		}
		if r.IntN(2) == 0 {
			var addrs []any
			for j := range 1 + r.IntN(3) {
				addrs = append(addrs, map[string]any{"ip": fmt.Sprintf("10.%d.%d.1", i, j), "prefix-length": json.Number(fmt.Sprint(8 + r.IntN(24)))})
			}
			e["ietf-ip:ipv4"] = map[string]any{"address": addrs, "mtu": json.Number("1500")}
		}
		list = append(list, e)
	}
	return map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": list}}
}

// shuffled returns a deep copy of v with every list's entries shuffled.
func shuffled(r *rand.Rand, v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			out[k] = shuffled(r, e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = shuffled(r, e)
		}
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out
	}
	return v
}

// TestRenderParseRoundTrips: data rendered as edit-config XML and parsed
// back (as a get-config reply) has no diff with itself, whatever the
// order of the lists on either side; the diff of data with itself is
// empty; and a change of one leaf is exactly one diff entry, named by
// its path with the list entries' keys.
func TestRenderParseRoundTrips(t *testing.T) {
	t.Parallel()
	s := newSchema(nil, nil)
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 29))
		data := normalize(randomConfig(r, 1+r.IntN(5)))
		xmlText := s.render(shuffled(r, data).(map[string]any), nil, "")
		els, err := parseXML(xmlText)
		if err != nil {
			t.Fatalf("seed %d: parse %s: %v", seed, xmlText, err)
		}
		back := s.parseData(els, data)
		if d := s.diffData(data, back, "", true); len(d) != 0 {
			t.Fatalf("seed %d: round trip differs: %v\nxml: %s", seed, d, xmlText)
		}
		// Parsed without a guide (an observation of a leaf the model
		// does not name), the leaves' text is the same.
		bare := s.flatten(s.parseData(els, nil))
		for p, v := range s.flatten(data) {
			if !leafEqual(v, bare[p]) {
				t.Fatalf("seed %d: %s is %v parsed without a guide, want %v", seed, p, bare[p], v)
			}
		}
		if d := s.diffData(data, shuffled(r, data).(map[string]any), "", true); len(d) != 0 {
			t.Fatalf("seed %d: data differs from itself shuffled: %v", seed, d)
		}
		// One leaf changed.
		changed := shuffled(r, data).(map[string]any)
		ifs := changed["ietf-interfaces:interfaces"].(map[string]any)["interface"].([]any)
		e := ifs[r.IntN(len(ifs))].(map[string]any)
		e["description"] = "changed"
		d := s.diffData(changed, data, "", false)
		want := fmt.Sprintf("ietf-interfaces:interfaces/interface[name=%s]/description", e["name"])
		if len(d) != 1 || d[want][1] != "changed" {
			t.Fatalf("seed %d: diff of one changed leaf = %v, want exactly %s", seed, d, want)
		}
	}
}

// TestReplaceDiffsExtraLeaves: with operation replace, what the device
// holds under the owned node and the data does not name is a change to
// nothing; with merge it is not compared.
func TestReplaceDiffsExtraLeaves(t *testing.T) {
	t.Parallel()
	s := newSchema(nil, nil)
	want := normalize(map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": []any{
		map[string]any{"name": "eth1", "type": "iana-if-type:ethernetCsmacd"}}}})
	got := normalize(map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": []any{
		map[string]any{"name": "eth1", "type": "iana-if-type:ethernetCsmacd", "description": "by hand"}}}})
	owned := "ietf-interfaces:interfaces/interface[name=eth1]"
	if d := s.diffData(want, got, owned, false); len(d) != 0 {
		t.Errorf("merge: %v, want no diff", d)
	}
	d := s.diffData(want, got, owned, true)
	if c, ok := d[owned+"/description"]; len(d) != 1 || !ok || c != [2]any{"by hand", nil} {
		t.Errorf("replace: %v, want description from \"by hand\" to nothing", d)
	}
}

// TestIdentityPrefixes: an identity comes back from a device under the
// prefix the device chose; it is read as module:identity.
func TestIdentityPrefixes(t *testing.T) {
	t.Parallel()
	s := newSchema(nil, nil)
	reply := `<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces" xmlns:if="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>eth1</name>` +
		`<type xmlns:ianaift="urn:ietf:params:xml:ns:yang:iana-if-type">ianaift:ethernetCsmacd</type>` +
		`<description>if:not-an-identity</description></interface></interfaces>`
	els, err := parseXML([]byte(reply))
	if err != nil {
		t.Fatal(err)
	}
	got := s.flatten(s.parseData(els, nil))
	want := map[string]any{
		"ietf-interfaces:interfaces/interface[name=eth1]/name":        "eth1",
		"ietf-interfaces:interfaces/interface[name=eth1]/type":        "iana-if-type:ethernetCsmacd",
		"ietf-interfaces:interfaces/interface[name=eth1]/description": "if:not-an-identity",
	}
	if !maps.Equal(got, want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
}

// TestParseRefusesDirectives: a reply with a DTD is refused.
func TestParseRefusesDirectives(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>`,
		strings.Repeat("<a>", maxDepth+2) + strings.Repeat("</a>", maxDepth+2),
		`<a><b></a>`,
	} {
		if _, err := parseXML([]byte(bad)); err == nil {
			t.Errorf("parseXML(%.40q…) accepted", bad)
		}
	}
}

// TestPathsAndOwnership: the path's syntax, and that config holds
// exactly the path's chain down to the owned node.
func TestPathsAndOwnership(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path string
		ok   bool
		why  string
	}{
		{"ietf-interfaces:interfaces/interface[name=eth1]", true, "a list entry"},
		{"ietf-system:system/contact", true, "a leaf"},
		{"ietf-system:system", true, "a container"},
		{"interfaces/interface[name=eth1]", false, "the first node without its module"},
		{"/ietf-system:system", false, "a leading /"},
		{"ietf-system:system/", false, "a trailing /"},
		{"ietf-interfaces:interfaces/interface[name=eth1", false, "an unclosed predicate"},
		{"ietf-interfaces:interfaces/interface[=eth1]", false, "a predicate without its key"},
		{"a:b:c", false, "two colons"},
	} {
		_, err := parsePath(c.path)
		if (err == nil) != c.ok {
			t.Errorf("%s (%s): %v, want ok=%v", c.path, c.why, err, c.ok)
		}
	}
	steps, _ := parsePath("ietf-interfaces:interfaces/interface[name=eth1]")
	steps, _ = normSteps(steps)
	entry := func(e ...map[string]any) map[string]any {
		var l []any
		for _, x := range e {
			l = append(l, x)
		}
		return normalize(map[string]any{"ietf-interfaces:interfaces": map[string]any{"interface": l}})
	}
	for _, c := range []struct {
		data map[string]any
		ok   bool
		why  string
	}{
		{entry(map[string]any{"name": "eth1", "description": "x"}), true, "the entry"},
		{entry(map[string]any{"name": "eth2"}), false, "another entry"},
		{entry(map[string]any{"name": "eth1"}, map[string]any{"name": "eth2"}), false, "two entries"},
		{map[string]any{"ietf-system:system": map[string]any{}}, false, "another module"},
	} {
		if err := checkOwned(c.data, steps); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.why, err, c.ok)
		}
	}
}

// TestRenderOperation: the operation attribute goes on the owned node.
func TestRenderOperation(t *testing.T) {
	t.Parallel()
	s := newSchema(nil, nil)
	steps, _ := parsePath("ietf-interfaces:interfaces/interface[name=eth1]")
	steps, _ = normSteps(steps)
	got := string(s.render(skeleton(steps), steps, "delete"))
	want := `<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface xmlns:nc="` + ncBase +
		`" nc:operation="delete"><name>eth1</name></interface></interfaces>`
	if got != want {
		t.Errorf("render = %s\nwant     %s", got, want)
	}
	if f := string(s.filter(steps)); f != `<interfaces xmlns="urn:ietf:params:xml:ns:yang:ietf-interfaces"><interface><name>eth1</name></interface></interfaces>` {
		t.Errorf("filter = %s", f)
	}
	_ = slices.Sorted(maps.Keys(map[string]int{}))
}
