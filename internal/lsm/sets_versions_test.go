package lsm

import "testing"

// TestApplyMovesVersions: each set's entity version moves with the set,
// so a promote makes a migration's version the instance's and a rollback
// brings the old one back.
func TestApplyMovesVersions(t *testing.T) {
	a := map[string]any{"port": 1.0}
	b := map[string]any{"listen_port": 1.0}
	for _, tc := range []struct {
		reason   string
		op       Operation
		in, want Sets
		version  int
	}{
		{"promote: the candidate's version is the active one's", Promote,
			Sets{Candidate: b, CandidateVersion: 2, Active: a, ActiveVersion: 1},
			Sets{Active: b, ActiveVersion: 2, Rollback: a, RollbackVersion: 1}, 2},
		{"rollback: the old version comes back", Rollback,
			Sets{Active: b, ActiveVersion: 2, Rollback: a, RollbackVersion: 1},
			Sets{Active: a, ActiveVersion: 1, Candidate: b, CandidateVersion: 2}, 1},
		{"clear candidate: its version goes with it", ClearCandidate,
			Sets{Candidate: b, CandidateVersion: 2, Active: a, ActiveVersion: 1},
			Sets{Active: a, ActiveVersion: 1}, 1},
		{"sets of before versions are of version 1", Promote,
			Sets{Candidate: a}, Sets{Active: a}, 1},
	} {
		got := Apply(tc.op, tc.in)
		if got.CandidateVersion != tc.want.CandidateVersion || got.ActiveVersion != tc.want.ActiveVersion ||
			got.RollbackVersion != tc.want.RollbackVersion || got.EntityVersion() != tc.version {
			t.Errorf("%s: %+v, want %+v (instance of version %d)", tc.reason, got, tc.want, tc.version)
		}
	}
}
