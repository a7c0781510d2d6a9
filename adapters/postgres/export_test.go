package postgres

// Exported for the tests of package postgres_test.
var (
	PasswordMatches = passwordMatches
	ScramVerifier   = scramVerifier
	Classify        = classify
)
