package verdict

// WithoutRunCache runs f with the checks that are given no RunCache
// keeping none: every run made, as before the cache, for the test that
// compares.
func WithoutRunCache(f func()) {
	noRunCache = true
	defer func() { noRunCache = false }()
	f()
}
