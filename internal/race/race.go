// Package race reports whether the race detector is built in, so that a
// test whose cost is in simulations, not in goroutines, can leave them to
// the plain pass: CI runs every test once plainly and once under -race
// -short, and the detector makes a simulation about ten times slower.
package race
