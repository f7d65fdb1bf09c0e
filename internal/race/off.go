//go:build !race

package race

// Enabled: this build has the race detector.
const Enabled = false
