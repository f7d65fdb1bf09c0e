// Package bench compares resil with sony/gobreaker and failsafe-go on the
// same work, side by side in one run. It is a module of its own so that the
// library's go.mod does not carry the competitors; `go test ./...` at the
// repository root does not enter it. Run it with
//
//	cd bench && go test -run '^$' -bench . -benchmem -cpu 1,2
//
// BENCHMARKS.md records the figures.
package bench
