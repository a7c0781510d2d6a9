// Package intent decodes, validates and hashes the export of one
// desired-state version: the set of resources an environment should have,
// with their attributes and the order in which they must be deployed.
//
// An export is the JSON document
//
//	{"resources": [
//	  {"id": "fs::File[localhost,path=/tmp/a]",
//	   "attributes": {"path": "/tmp/a", "content": "hi"},
//	   "requires": ["fs::File[localhost,path=/tmp/b]"],
//	   "purged": false, "send_event": false,
//	   "receive_events": false, "report_only": false,
//	   "undefined": false, "resource_set": "web"}
//	]}
//
// An "undefined" resource is one whose attributes depend on values not
// known yet (a fact an adapter has not reported): its attributes may be
// incomplete, but still hold the attribute its id names. The orchestrator
// never deploys it and skips the resources that require it; a later
// version that defines it resolves them. A purged resource cannot be
// undefined: removing it needs no unknown value.
//
// A resource without "resource_set" belongs to the shared set. A resource
// of a set may require only resources of its own set and shared ones; a
// shared resource only shared ones. Sets are what a partial export
// (DecodePartial, MergePartial) replaces one at a time.
//
// Decoding is strict, because an export that is silently misread deploys the
// wrong thing: unknown or duplicate keys, wrong JSON types, invalid UTF-8 and
// unpaired surrogate escapes are refused, and every problem is reported with
// the JSON pointer (RFC 6901) of where it is, not only the first one. Numbers
// in attributes keep their text (as json.Number), so "420" and "420.0" stay
// different and nothing is lost to float64.
//
// A Version from DecodeBytes is normalised: resources are sorted by id,
// each resource's requires are sorted and free of duplicates. Attribute
// values may nest at most 1000 levels deep.
//
// Resource.Hash is the intent hash: equal for equal intent however the
// export spelled it, and the way to tell which resources a new version
// changes.
package intent

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/intendhq/intend/adapters/resource"
	"github.com/intendhq/intend/internal/ledger"
)

// Resource is the desired state of one resource in a version.
type Resource struct {
	// ID names the resource; it never carries a version.
	ID resource.ID
	// Attributes is the desired state as decoded JSON: map[string]any,
	// []any, string, json.Number, bool or nil. It holds the attribute named
	// by the id, with the id's value.
	Attributes map[string]any
	// Requires lists the resources that must be deployed before this one,
	// sorted by id and without duplicates; all of them are in the same
	// version and none carries a version. (DecodePartial keeps them as
	// written, and a partial export may require resources it does not
	// carry.)
	Requires []resource.ID
	// Purged asks for the resource to be removed.
	Purged bool
	// SendEvent makes a change of this resource notify the resources that
	// require it.
	SendEvent bool
	// ReceiveEvents lets this resource react to events of the resources it
	// requires.
	ReceiveEvents bool
	// ReportOnly asks for the difference to be reported and not applied.
	ReportOnly bool
	// Undefined marks a resource whose attributes depend on values not
	// known yet: they may be incomplete (the id's attribute is always
	// there). It is never deployed, and neither is anything that
	// requires it, directly or not, until a version defines it. A purged
	// resource cannot be undefined.
	Undefined bool
	// ResourceSet names the resource set the resource belongs to; "" is
	// the shared set. A partial export replaces whole sets, so a resource
	// may require only resources of its own set or shared ones, and a
	// shared resource only shared ones.
	ResourceSet string
}

// Agent returns the agent that deploys the resource.
func (r Resource) Agent() string { return r.ID.Agent }

// Version is the desired state of an environment: all of its resources,
// sorted by id string.
type Version struct {
	Resources []Resource
	// Plugins are the adapter plugins the version requires (an export's
	// "plugins"; CheckPlugins). Nil: the export names none, which a
	// partial export reads as "the base version's"; empty: none.
	Plugins []ledger.Plugin
}

// Agents returns the agents that have resources in the version, sorted and
// without duplicates.
func (v Version) Agents() []string {
	var out []string
	for _, r := range v.Resources {
		out = append(out, r.ID.Agent)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Decode reads a version export from r and decodes it with DecodeBytes.
// The caller bounds the size of r (http.MaxBytesReader for request bodies).
func Decode(r io.Reader) (Version, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Version{}, fmt.Errorf("read version export: %w", err)
	}
	return DecodeBytes(b)
}

// DecodeBytes decodes and validates a version export. An invalid export is
// refused with a *ValidationError that lists every problem found: malformed
// JSON (which stops decoding), wrong members or types, and everything
// Version.Validate checks. The returned Version is normalised.
//
// DecodeBytes does not keep b.
func DecodeBytes(b []byte) (Version, error) {
	d := newDecoder(b)
	d.document()
	if d.syntaxFailed {
		return Version{}, d.probs.err()
	}
	check(d.resources, d.keys, true, false, &d.probs)
	if err := d.probs.err(); err != nil {
		return Version{}, err
	}
	normalize(d.resources, d.keys)
	return Version{Resources: d.resources, Plugins: d.plugins}, nil
}

// Validate checks v: every id and require parses and carries no version;
// ids are unique; each resource's attributes hold the attribute its id names
// with the id's value (a string equal to it, or a number whose JSON text
// equals it); requires name other resources of v and form no cycle; a
// resource of a set requires only resources of its set or shared ones, a
// shared resource only shared ones; resource set names are valid UTF-8;
// attribute values are JSON values (nil, bool, string, valid json.Number,
// finite floats, integers, map[string]any, []any); no resource is both
// purged and undefined; and v is normalised. It returns nil or a
// *ValidationError listing every problem, with paths as in the export of v.
func (v Version) Validate() error {
	var p problems
	check(v.Resources, nil, false, false, &p)
	return p.err()
}

// Normalize sorts the resources of v by id string and the requires of each
// resource, dropping duplicate requires. It changes the slices of v in
// place.
func (v Version) Normalize() {
	keys := make([]string, len(v.Resources))
	for i := range v.Resources {
		keys[i] = v.Resources[i].ID.String()
	}
	normalize(v.Resources, keys)
}

// normalize is Normalize with keys[i] == rs[i].ID.String() given.
func normalize(rs []Resource, keys []string) {
	for i := range rs {
		if r := &rs[i]; len(r.Requires) > 1 {
			r.Requires = sortIDs(r.Requires)
		}
	}
	if slices.IsSorted(keys) {
		return
	}
	perm := make([]int32, len(rs))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	sorted := make([]Resource, len(rs))
	for i, j := range perm {
		sorted[i] = rs[j]
	}
	copy(rs, sorted)
}

// sortIDs sorts ids by their string and drops duplicates, reusing ids'
// backing array.
func sortIDs(ids []resource.ID) []resource.ID {
	type keyed struct {
		key string
		id  resource.ID
	}
	ks := make([]keyed, len(ids))
	for i, id := range ids {
		ks[i] = keyed{id.String(), id}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	ks = slices.CompactFunc(ks, func(a, b keyed) bool { return a.key == b.key })
	out := ids[:len(ks)]
	for i := range ks {
		out[i] = ks[i].id
	}
	clear(ids[len(ks):])
	return out
}
