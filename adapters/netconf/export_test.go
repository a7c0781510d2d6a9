package netconf

// Commits returns the commits this process made.
func Commits() int64 { return commits.Load() }

// SetHook sets the transaction's test hook until the test ends.
func SetHook(t interface{ Cleanup(func()) }, f func(point string)) {
	hook = f
	t.Cleanup(func() { hook = nil })
}
