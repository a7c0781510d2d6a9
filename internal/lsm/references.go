package lsm

import (
	"slices"
	"strings"
)

// Relations between instances (issue 14, B.6): an attribute declared
// @lsm(rw, ref=site) names an instance of the entity site, by id or by
// identity (a string), or several (a list of strings). The attribute
// keeps the value the client wrote; the store records the instance it
// resolved to, and refuses to delete an instance while another names it.

// Reference is one value of a reference attribute.
type Reference struct {
	Attribute string
	// Entity is the entity the attribute references.
	Entity string
	// Value is the id or identity the attribute holds.
	Value string
}

// References returns the references of attrs, one per string value of
// every reference attribute (a list gives one per element, in order; a
// value that is neither a string nor a list of strings gives none: the
// model refuses it at validation), sorted by attribute, duplicates kept.
func References(specs []AttributeSpec, attrs map[string]any) []Reference {
	var out []Reference
	for _, spec := range specs {
		if spec.References == "" {
			continue
		}
		switch v := attrs[spec.Name].(type) {
		case string:
			out = append(out, Reference{Attribute: spec.Name, Entity: spec.References, Value: v})
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, Reference{Attribute: spec.Name, Entity: spec.References, Value: s})
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Reference) int { return strings.Compare(a.Attribute, b.Attribute) })
	return out
}

// SetsReferences returns the references of every set of s (candidate,
// active, rollback), each (attribute, value) once.
func SetsReferences(specs []AttributeSpec, s Sets) []Reference {
	var out []Reference
	seen := map[Reference]bool{}
	for _, set := range []map[string]any{s.Candidate, s.Active, s.Rollback} {
		for _, r := range References(specs, set) {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Reference) int { return strings.Compare(a.Attribute, b.Attribute) })
	return out
}

// HasReferences reports whether an entity has a reference attribute.
func HasReferences(specs []AttributeSpec) bool {
	return slices.ContainsFunc(specs, func(s AttributeSpec) bool { return s.References != "" })
}
