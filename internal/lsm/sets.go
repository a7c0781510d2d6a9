package lsm

import "fmt"

// Sets are the three attribute sets of an instance (seed 003): what a
// create or update asked for and is not validated yet, what is deployed,
// and the active set before the last promote. A nil map is an empty
// (absent) set. Attributes are decoded JSON (map[string]any, []any,
// string, float64 or json.Number, bool, nil).
type Sets struct {
	Candidate map[string]any `json:"candidate_attributes"`
	Active    map[string]any `json:"active_attributes"`
	Rollback  map[string]any `json:"rollback_attributes"`
	// The entity version each set is of (0 for an empty set, and for a
	// set written before entities had versions, which is of version 1).
	// They move with their sets: a promote makes the candidate's version
	// the active one's, a rollback brings the previous version back.
	CandidateVersion int `json:"candidate_entity_version,omitempty"`
	ActiveVersion    int `json:"active_entity_version,omitempty"`
	RollbackVersion  int `json:"rollback_entity_version,omitempty"`
}

// EntityVersion is the entity version of the instance whose sets these
// are: the active set's, else the candidate's, else the rollback's (1
// when none says).
func (s Sets) EntityVersion() int {
	switch {
	case s.Active != nil:
		return EntityVersion(s.ActiveVersion)
	case s.Candidate != nil:
		return EntityVersion(s.CandidateVersion)
	case s.Rollback != nil:
		return EntityVersion(s.RollbackVersion)
	}
	return 1
}

// Current is the set a write edits and a validation checks: the
// candidate set, or the active one when there is no candidate.
func (s Sets) Current() map[string]any {
	if s.Candidate != nil {
		return s.Candidate
	}
	return s.Active
}

// CurrentVersion is the entity version of Current.
func (s Sets) CurrentVersion() int {
	if s.Candidate != nil {
		return EntityVersion(s.CandidateVersion)
	}
	return EntityVersion(s.ActiveVersion)
}

// Apply returns the sets after one operation, leaving s and the maps it
// holds untouched (the result shares nothing with them):
//
//   - clear candidate, clear active, clear rollback: that set is emptied;
//   - promote: candidate → active, active → rollback, candidate cleared;
//   - rollback: rollback → active, active → candidate, rollback cleared.
//
// An operation Check would refuse panics: a lifecycle is checked before
// it is used, so that is a bug, not an input to handle.
func Apply(op Operation, s Sets) Sets {
	c := Sets{Candidate: copyDict(s.Candidate), Active: copyDict(s.Active), Rollback: copyDict(s.Rollback),
		CandidateVersion: s.CandidateVersion, ActiveVersion: s.ActiveVersion, RollbackVersion: s.RollbackVersion}
	switch op {
	case ClearCandidate:
		c.Candidate, c.CandidateVersion = nil, 0
	case ClearActive:
		c.Active, c.ActiveVersion = nil, 0
	case ClearRollback:
		c.Rollback, c.RollbackVersion = nil, 0
	case Promote:
		c = Sets{Active: c.Candidate, Rollback: c.Active, ActiveVersion: c.CandidateVersion, RollbackVersion: c.ActiveVersion}
	case Rollback:
		c = Sets{Active: c.Rollback, Candidate: c.Active, ActiveVersion: c.RollbackVersion, CandidateVersion: c.ActiveVersion}
	default:
		panic(fmt.Sprintf("lsm: unknown operation %q", op))
	}
	return c
}

// ApplyAll applies the operations in order, as a transfer does with its
// target or error operations.
func ApplyAll(ops []Operation, s Sets) Sets {
	out := Sets{Candidate: copyDict(s.Candidate), Active: copyDict(s.Active), Rollback: copyDict(s.Rollback),
		CandidateVersion: s.CandidateVersion, ActiveVersion: s.ActiveVersion, RollbackVersion: s.RollbackVersion}
	for _, op := range ops {
		out = Apply(op, out)
	}
	return out
}

// copyDict deep-copies a set; nil stays nil.
func copyDict(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	}
	return v // immutable: strings, numbers, booleans, nil
}
