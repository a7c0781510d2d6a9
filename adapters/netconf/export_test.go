package netconf

// Commits returns the commits this process made.
func Commits() int64 { return commits.Load() }
