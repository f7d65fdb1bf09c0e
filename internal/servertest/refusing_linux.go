package servertest

import (
	"fmt"
	"net"
	"syscall"
	"testing"
)

// Refusing returns a host:port of 127.0.0.1 that refuses connections
// until t ends: a socket bound to it that never listens. The port stays
// taken, so no other server, of this process or another, can start
// listening there and answer in its place, as one did for an address
// FreeAddrs had found free (nginx answered 200 from "refused" servers, in
// the full test suite). Elsewhere than Linux the port is not held.
func Refusing(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("servertest: a socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	// No SO_REUSEADDR: a listener that sets it (Go's do) may not bind
	// beside a socket that did not.
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("servertest: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("servertest: getsockname: %v", err)
	}
	in, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("servertest: bound to %T", sa)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(in.Port))
}
