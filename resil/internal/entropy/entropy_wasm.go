//go:build js && wasm

package entropy

import (
	"encoding/binary"
	"math/rand/v2"
)

// Read fills b with bytes from the runtime's generator, which is seeded from
// the browser's crypto.getRandomValues and never fails.
func Read(b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rand.Uint64())
		b = b[8:]
	}
	if len(b) > 0 {
		var last [8]byte
		binary.LittleEndian.PutUint64(last[:], rand.Uint64())
		copy(b, last[:])
	}
}
