//go:build !(js && wasm)

// Package entropy fills the seeds of the random sources that a policy
// builds for itself when its settings pass none (production use: a simulator
// always passes one). It reads the operating system's cryptographic source.
//
// In the browser's WebAssembly module the seeds come from the Go runtime's
// own ChaCha8 generator instead, which the runtime seeds from the browser's
// crypto.getRandomValues: crypto/rand would add about 57 KB (gzipped) of
// FIPS code to a module that must stay small, for seeds that only spread
// jitter and picks.
package entropy

import "crypto/rand"

// Read fills b with random bytes. It never fails: crypto/rand panics
// instead of returning an error.
func Read(b []byte) {
	_, _ = rand.Read(b)
}
