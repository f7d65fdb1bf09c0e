//go:build !linux

package servertest

import "testing"

// Refusing returns a host:port of 127.0.0.1 that refuses connections:
// one nothing listens on now. Here the port is not held, so another
// server may yet take it (on Linux it is).
func Refusing(t testing.TB) string {
	t.Helper()
	addrs, err := FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	return addrs[0]
}
