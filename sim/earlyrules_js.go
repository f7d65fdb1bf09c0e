//go:build js

package sim

import "math/rand/v2"

// The WebAssembly build (the page's module) plays every run to its end:
// early exit is check's (docs/early-exit.md), which the page does not
// run, and its rules stay out of the module, for its weight. A whole run
// keeps every promise an EarlyExit makes.

type early struct{}

func newEarly(*fleet, EarlyExit, *rand.PCG) *early { return nil }

func (f *fleet) checkEarly(int64, *EarlyEnd) bool { return false }
