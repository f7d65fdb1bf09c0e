package page

// Build the WebAssembly module and copy wasm_exec.js into assets/, to be
// embedded into the retrystorm binary.
//go:generate go run ./internal/genassets
