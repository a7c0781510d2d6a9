package store

// RecordPerResource makes s record every attempt in a row of its own, as
// before migration 031 (unchanged ones too), for tests that compare.
func RecordPerResource(s *Store) { s.perResource = true }
