package entropy

import (
	"bytes"
	"testing"
)

// TestReadFillsEveryByte: two reads of an odd length differ, and no read
// leaves its tail zero (the odd bytes past the last whole word).
func TestReadFillsEveryByte(t *testing.T) {
	for _, n := range []int{1, 7, 8, 15, 32} {
		a, b := make([]byte, n), make([]byte, n)
		Read(a)
		Read(b)
		if n >= 8 && bytes.Equal(a, b) {
			t.Errorf("%d bytes: two reads gave the same %x", n, a)
		}
		zeroTail := 0
		for i := 0; i < 64; i++ {
			c := make([]byte, n)
			Read(c)
			if c[n-1] == 0 {
				zeroTail++
			}
		}
		if zeroTail > 8 { // 64 reads: about 0.25 expected
			t.Errorf("%d bytes: the last byte was zero in %d of 64 reads", n, zeroTail)
		}
	}
}
