// Package bench compares resil with sony/gobreaker and failsafe-go on the
// same work, side by side in one run. It is a module of its own so that the
// library's go.mod does not carry the competitors; `go test ./...` at the
// repository root does not enter it. Run it with
//
//	cd bench && go test -run '^$' -bench . -benchmem -cpu 1,2
//
// BENCHMARKS.md records the figures.
//
// peer_test.go sets retrystorm's simulator beside Stability Sim's engine,
// each a whole process, from a bundle of the peer the user builds from
// their own checkout (BENCHMARKS.md, "Stability Sim, side by side"):
//
//	STABILITY_SIM_ENGINE=/path/stability-engine.mjs go test -run Peer -v -timeout 60m
package bench
