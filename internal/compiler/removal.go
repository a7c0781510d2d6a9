package compiler

import "slices"

// OrderRemovals turns the requires of resources that are being removed
// (purged) around, so that a removal runs in the reverse order of the
// creation: a directory is removed after the files in it. Between the
// resources of rs:
//
//   - a purged resource that requires a purged resource of its own set
//     drops that requirement, and the required one requires it instead
//     (the file in a directory goes first, then the directory);
//   - a resource that stays and requires a purged one drops the
//     requirement (what it required is going away; waiting for the
//     removal would order nothing useful);
//   - every other requirement stays: a purged resource still waits for
//     the resources it requires that stay, and a requirement of another
//     set, or of a resource not in rs, is kept as written.
//
// The result has no cycle when the requires of rs have none: the edges
// turned around stay inside one set and run between purged resources only,
// and nothing that stays requires a purged resource any more.
//
// It builds new Requires slices and never changes the ones it was given
// (cached outputs share them). Compile applies it to the model's
// resources; a caller that marks resources purged itself (the lifecycle
// engine's purge of an instance) applies it after.
func OrderRemovals(rs []Resource) {
	index := make(map[string]int, len(rs))
	purged := false
	for i, r := range rs {
		index[r.ID] = i
		purged = purged || r.Purged
	}
	if !purged {
		return
	}
	var reversed map[int][]string
	for i := range rs {
		r := &rs[i]
		var kept []string
		changed := false
		for _, q := range r.Requires {
			j, ok := index[q]
			switch {
			case ok && rs[j].Purged && !r.Purged:
				changed = true
			case ok && rs[j].Purged && rs[j].ResourceSet == r.ResourceSet:
				changed = true
				if reversed == nil {
					reversed = map[int][]string{}
				}
				reversed[j] = append(reversed[j], r.ID)
			default:
				kept = append(kept, q)
			}
		}
		if changed {
			if kept == nil {
				kept = []string{}
			}
			r.Requires = kept
		}
	}
	for j, ids := range reversed {
		rq := slices.Concat(rs[j].Requires, ids)
		slices.Sort(rq)
		rs[j].Requires = slices.Compact(rq)
	}
}
