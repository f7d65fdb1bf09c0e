// Package layering holds the test that keeps the module's package graph
// in floors (docs/architecture.md): an import may stay on its floor or go
// down, never up. It has no code of its own.
package layering
