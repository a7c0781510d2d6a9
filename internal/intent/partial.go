package intent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/intendhq/intend/adapters/resource"
)

// DecodePartial decodes and checks a partial export:
//
//	{"resources": [...], "removed_resource_sets": ["db", ...]}
//
// "resources" is required (it may be empty) and its elements are resource
// objects as in DecodeBytes; "removed_resource_sets" is optional and holds
// non-empty set names. Decoding is as strict as DecodeBytes'. It checks
// what the partial export alone can tell: everything DecodeBytes checks,
// except that requires may name resources the export does not carry (the
// stored version may hold them; MergePartial checks them), and that no set
// is both updated and removed.
//
// Unlike DecodeBytes it keeps the order of the export: the resources, their
// requires and the removed sets come back as written (the Version is not
// normalised), so that the problems MergePartial reports, by index into
// them, point into the export. removed is nil when the member is absent.
//
// DecodePartial does not keep b.
func DecodePartial(b []byte) (v Version, removed []string, err error) {
	d := newDecoder(b)
	d.partial = true
	d.document()
	if d.syntaxFailed {
		return Version{}, nil, d.probs.err()
	}
	check(d.resources, d.keys, true, true, &d.probs)
	checkRemoved(d.resources, d.removed, &d.probs)
	if err := d.probs.err(); err != nil {
		return Version{}, nil, err
	}
	return Version{Resources: d.resources, Plugins: d.plugins}, d.removed, nil
}

// checkRemoved checks that no removed set of a partial export with
// resources rs is also updated (holds a resource of rs). It returns the
// updated sets, each with the index of its first resource in rs. (Empty
// names are the callers' to report: the decoder reports them where it
// reads them, with their type.)
func checkRemoved(rs []Resource, removed []string, p *problems) map[string]int {
	updated := map[string]int{}
	for i := range rs {
		if s := rs[i].ResourceSet; s != "" {
			if _, ok := updated[s]; !ok {
				updated[s] = i
			}
		}
	}
	for k, s := range removed {
		if i, ok := updated[s]; ok && s != "" {
			p.add(pointer("removed_resource_sets", k),
				fmt.Sprintf("resource set %q is both updated (%s is one of its resources) and removed", s, pointer("resources", i)))
		}
	}
	return updated
}

// StoredResource is a resource of the stored version that a partial export
// is merged into: as much of it as the merge needs. Its attributes are
// not needed: its content is stored already and was validated when it was
// exported.
type StoredResource struct {
	// ID names the resource; it carries no version.
	ID resource.ID
	// ResourceSet is its set; "" is the shared set.
	ResourceSet string
	// Requires are its requires as stored (sorted, without duplicates).
	Requires []resource.ID
	// Hash is its stored intent hash.
	Hash [32]byte
}

// Merge is the complete new version that a partial export makes of the
// stored one: Resources and Kept together, without overlap.
type Merge struct {
	// Resources are the resources of the partial export, every one of
	// which is in the new version: copies, sorted by id, with their
	// requires sorted and without duplicates (the partial export itself
	// is not changed).
	Resources []Resource
	// Kept are the stored resources that the new version keeps as they
	// are, sorted by id: the shared ones the partial export does not carry
	// and those of the sets it neither updates nor removes.
	Kept []StoredResource
}

// MergePartial merges the partial export partial, which removes the sets
// named in removed, into the stored version base (empty if there is none)
// and returns the new version. It decides and does not act, so the store
// can run it inside the transaction that holds the stored version still.
//
// base may be the part of the stored version that partial touches: the
// resources of the sets it updates or removes, those with the ids it
// carries and those it requires, the requires of which need not be given
// (the set rules keep everything else out of reach, see
// store.touchedResources). Kept then holds only the kept resources of
// that part.
//
// The new version is base with
//
//   - every set that a resource of partial belongs to replaced wholly by
//     partial's resources of that set (the set's other resources go);
//   - every set in removed removed (one that base does not have is fine);
//   - the shared resources of partial added, and those of base kept.
//
// It is refused, with a *ValidationError, when a set is both updated and
// removed; when a shared resource of partial exists in base with another
// intent hash (shared resources change only in a full export); when a
// resource of partial exists in base in another set (sets change only in a
// full export); and when the new version as a whole does not pass the
// checks of Version.Validate, the set rules included. Problems about a
// resource of partial point into the partial export by the index of the
// resource (and of the require) in partial as given, so for the result of
// DecodePartial into its body; removed sets are /removed_resource_sets/k.
// A problem with a resource of base, which a consistent base cannot cause,
// has the empty path and names the resource in its detail.
func MergePartial(base []StoredResource, partial Version, removed []string) (Merge, error) {
	var p problems
	prs := partial.Resources
	updated := checkRemoved(prs, removed, &p)
	gone := make(map[string]bool, len(updated)+len(removed))
	for s := range updated {
		gone[s] = true
	}
	for k, s := range removed {
		if s == "" {
			p.add(pointer("removed_resource_sets", k), "must not be empty: the shared set cannot be removed")
		}
		gone[s] = true
	}

	baseKeys := make([]string, len(base))
	stored := make(map[string]int, len(base))
	for j := range base {
		baseKeys[j] = base[j].ID.String()
		stored[baseKeys[j]] = j
	}
	carried := make(map[string]bool, len(prs))
	for i := range prs {
		r := &prs[i]
		key := r.ID.String()
		carried[key] = true
		j, ok := stored[key]
		if !ok {
			continue
		}
		switch b := &base[j]; {
		case b.ResourceSet != r.ResourceSet:
			p.add(pointer("resources", i, "resource_set"),
				fmt.Sprintf("resource %q is in %s in the stored version and in %s here: a resource changes set only in a full export",
					key, describeSet(b.ResourceSet), describeSet(r.ResourceSet)))
		case r.ResourceSet == "" && r.Hash() != b.Hash:
			p.add(pointer("resources", i),
				fmt.Sprintf("shared resource %q differs from the stored one; shared resources change only in a full export", key))
		}
	}

	// The merged version, for checking as a whole: the partial export's
	// resources and the kept ones, sorted by id. origin[i] is the index in
	// prs of merged resource i, or -1-j for kept resource j.
	n := len(prs)
	merged := make([]Resource, 0, n+len(base))
	origin := make([]int32, 0, n+len(base))
	keys := make([]string, 0, n+len(base))
	for i, r := range prs {
		if len(r.Requires) > 1 {
			r.Requires = sortIDs(slices.Clone(r.Requires))
		}
		merged = append(merged, r)
		origin = append(origin, int32(i))
		keys = append(keys, r.ID.String())
	}
	kept := make([]StoredResource, 0, len(base))
	for j := range base {
		b := &base[j]
		if carried[baseKeys[j]] || b.ResourceSet != "" && gone[b.ResourceSet] {
			continue
		}
		// The identity attribute stands in for attributes that are
		// stored already and were checked when they were exported.
		merged = append(merged, Resource{ID: b.ID, Attributes: map[string]any{b.ID.Attribute: b.ID.Value},
			Requires: b.Requires, ResourceSet: b.ResourceSet})
		origin = append(origin, int32(-1-len(kept)))
		keys = append(keys, baseKeys[j])
		kept = append(kept, *b)
	}
	perm := make([]int, len(merged))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	sorted := make([]Resource, len(merged))
	sortedOrigin := make([]int32, len(merged))
	for i, k := range perm {
		sorted[i], sortedOrigin[i] = merged[k], origin[k]
	}

	p.at = func(i int, tail []any) (string, string) {
		o := sortedOrigin[i]
		if o < 0 {
			return "", fmt.Sprintf("stored resource %q", sorted[i].ID.String())
		}
		if len(tail) >= 2 && tail[0] == "requires" {
			if j, ok := tail[1].(int); ok {
				tail = slices.Clone(tail)
				tail[1] = requireIndex(prs[o].Requires, sorted[i].Requires[j])
			}
		}
		return pointer(append([]any{"resources", int(o)}, tail...)...), ""
	}
	check(sorted, nil, false, false, &p)
	if err := p.err(); err != nil {
		return Merge{}, err
	}

	out := Merge{Resources: make([]Resource, 0, n), Kept: make([]StoredResource, 0, len(kept))}
	for i, o := range sortedOrigin {
		if o >= 0 {
			out.Resources = append(out.Resources, sorted[i])
		} else {
			out.Kept = append(out.Kept, kept[-1-o])
		}
	}
	return out, nil
}

// requireIndex returns the index of the first of requires that names the
// same resource as id: where a require of a normalised copy was written.
func requireIndex(requires []resource.ID, id resource.ID) int {
	key := id.String()
	for k, q := range requires {
		if q.String() == key {
			return k
		}
	}
	return 0
}

// describeSet names a resource set in messages.
func describeSet(set string) string {
	if set == "" {
		return "the shared set"
	}
	return fmt.Sprintf("resource set %q", set)
}
