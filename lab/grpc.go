package lab

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
)

// Protocol is what the lab's origin, gateway and load generator speak to
// each other.
type Protocol string

// The protocols the lab speaks.
const (
	// ProtocolHTTP: HTTP/1.1 and HTTP/2 without TLS (h2c); the gateway's
	// transport is resilhttp. The default.
	ProtocolHTTP Protocol = "http"
	// ProtocolGRPC: gRPC without TLS. The origin serves
	// grpc.testing.TestService/UnaryCall (grpc-go's interoperability test
	// service), the gateway proxies every method through resilgrpc's
	// client interceptors, and the load generator calls UnaryCall. The
	// origin's and the gateway's /metrics and the admin endpoint stay on
	// HTTP servers of their own.
	ProtocolGRPC Protocol = "grpc"
)

// ParseProtocol reads a protocol's name: "http" or "grpc" ("" is http).
func ParseProtocol(s string) (Protocol, error) {
	switch p := Protocol(s); p {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return p, nil
	}
	return "", fmt.Errorf("lab: protocol %q: want http or grpc", s)
}

// Over gRPC the lab's components speak the same headers as over HTTP, as
// metadata (gRPC lower-cases the names): IntentHeader, ClientHeader,
// AttemptHeader from the gateway to the origin, AttemptsHeader,
// FailedHeader, StopHeader and FallbackHeader as trailers from the gateway
// to its caller. The propagated deadline is gRPC's own (grpc-timeout), and
// what HTTP says with its method, IdempotentHeader says.
const (
	// IdempotentHeader is "false" on a call with a side effect (the HTTP
	// lab's POST): the gateway sends it as not idempotent, unless its
	// fleet retries every intent, and the origin counts its executions.
	// Absent, a call is idempotent.
	IdempotentHeader = "Retrystorm-Idempotent"
)

// The method the lab's gRPC load generator calls and its origin serves:
// grpc-go's interoperability test service ships its generated code, so the
// lab needs no protocol buffer compiler, and any gRPC tool knows it.
const (
	grpcFullMethod = "/grpc.testing.TestService/UnaryCall"
	grpcMethod     = "grpc.testing.TestService/UnaryCall" // as rpc.method writes it
)

// GRPCService is the part of a gRPC server that the lab's Origin or
// GRPCGateway provides: the options it needs and the services it
// registers.
type GRPCService interface {
	ServerOptions() []grpc.ServerOption
	Register(s *grpc.Server)
}

// GRPCServer is one of the lab's gRPC servers, on loopback, without TLS.
// Make one with ListenGRPC; Close it.
//
// Like the lab's HTTP servers it bounds what a client can cost: 32 KiB of
// request metadata, 1 MiB messages (the lab's are a few bytes), ten
// seconds to set a connection up, a minute idle, 512 connections at once,
// and 65,536 calls at once on a connection: as many as the load generator
// keeps out. It needs no Host or cross-origin check: a web page cannot
// speak gRPC (a browser speaks HTTP/2 only over TLS, and gRPC's status
// comes in trailers a page cannot read), and the server answers nothing
// else.
type GRPCServer struct {
	srv  *grpc.Server
	addr string
	done chan struct{}
}

// grpcStreams is the calls a connection may have at once: the load
// generator's bound on intents out (LoadConfig.MaxInFlight), since it
// sends every intent on one connection.
const grpcStreams = 1 << 16

// ListenGRPC serves svc on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port).
func ListenGRPC(addr string, svc GRPCService) (*GRPCServer, error) {
	ln, err := listenLoopback(addr)
	if err != nil {
		return nil, err
	}
	opts := append([]grpc.ServerOption{
		grpc.MaxConcurrentStreams(grpcStreams),
		grpc.MaxHeaderListSize(serverHeaderBytes),
		grpc.MaxRecvMsgSize(1 << 20),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: time.Minute}),
	}, svc.ServerOptions()...)
	s := &GRPCServer{srv: grpc.NewServer(opts...), addr: ln.Addr().String(), done: make(chan struct{})}
	svc.Register(s.srv)
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(limitListener(ln, serverConns))
	}()
	return s, nil
}

// Addr returns the server's address, such as 127.0.0.1:41234.
func (s *GRPCServer) Addr() string { return s.addr }

// Close stops the server: it lets the calls in progress finish for a
// moment (closeGrace), then cancels those left and closes every
// connection, and waits for it to stop.
func (s *GRPCServer) Close() {
	var wg sync.WaitGroup
	stopped := make(chan struct{})
	wg.Go(func() {
		s.srv.GracefulStop()
		close(stopped)
	})
	t := time.NewTimer(closeGrace)
	select {
	case <-stopped:
	case <-t.C:
		s.srv.Stop()
	}
	t.Stop()
	wg.Wait()
	<-s.done
}

// rawFrame is a message as it travels, undecoded: the gateway proxies it as
// it is, so a service of any type could sit behind it.
type rawFrame []byte

// frameCodec passes frames through. Its name is proto's, the content
// subtype gRPC sends by default, so that the origin decodes what the
// gateway forwards as the protocol buffer it is.
type frameCodec struct{}

func (frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(*rawFrame)
	if !ok {
		return nil, fmt.Errorf("lab: the gateway's codec takes frames, not %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*f)}, nil
}

func (frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*rawFrame)
	if !ok {
		return fmt.Errorf("lab: the gateway's codec takes frames, not %T", v)
	}
	*f = data.Materialize() // a copy: gRPC frees data on return
	return nil
}

func (frameCodec) Name() string { return "proto" }
