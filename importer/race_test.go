//go:build race

package importer

// raceEnabled: the race detector is on, and allocations counted in a test
// are those of an instrumented build, larger than a plain one's.
const raceEnabled = true
