package resilgrpc

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ServerSettings configures a [Server]. The zero value refuses only calls
// whose deadline has already passed.
type ServerSettings struct {
	// MinTime is the least time a call needs: a call whose deadline
	// leaves less is refused before its handler runs, since nobody will
	// wait for its answer. Zero refuses only calls already past their
	// deadline. Calls without a deadline are never refused.
	MinTime time.Duration
	// MinTimes overrides MinTime for the methods they name
	// ("/package.Service/Method", or "/package.Service/" for a service).
	MinTimes map[string]time.Duration
	// Code is the status of a refusal. Zero (OK) means UNAVAILABLE.
	Code codes.Code
	// Now reads the time the deadlines are compared with. Nil means
	// time.Now; an injected clock must agree with the one the deadlines
	// come from.
	Now func() time.Time
	// OnShed, if set, is called with every refused call's method and the
	// time its deadline left, on the goroutine that refused it. It must
	// not block.
	OnShed func(fullMethod string, left time.Duration)
}

// Server holds the server interceptors: deadline shedding on the deadline
// gRPC propagates. A call whose deadline leaves less than MinTime is
// refused at once with Code (UNAVAILABLE) and the trailer
// grpc-retry-pushback-ms: -1, which asks gRPC clients (grpc-go's retries
// and resilgrpc's alike) not to retry it: its caller's deadline is too near
// for any attempt. The refusal costs no handler time.
//
// Make one with [NewServer]; the zero value is not usable. A Server is safe
// for concurrent use.
type Server struct {
	min     time.Duration
	mins    map[string]time.Duration
	code    codes.Code
	now     func() time.Time
	onShed  func(string, time.Duration)
	shed    atomic.Uint64
	trailer metadata.MD
}

// NewServer returns a Server, or an error naming the invalid setting.
func NewServer(s ServerSettings) (*Server, error) {
	if s.MinTime < 0 {
		return nil, fmt.Errorf("resilgrpc: ServerSettings.MinTime = %v: must not be negative", s.MinTime)
	}
	for k, v := range s.MinTimes {
		if v < 0 {
			return nil, fmt.Errorf("resilgrpc: ServerSettings.MinTimes[%q] = %v: must not be negative", k, v)
		}
		if !validName(k) {
			return nil, fmt.Errorf("resilgrpc: ServerSettings.MinTimes[%q]: want \"/package.Service/Method\" or \"/package.Service/\"", k)
		}
	}
	if s.Code > codes.Unauthenticated {
		return nil, fmt.Errorf("resilgrpc: ServerSettings.Code = %v: unknown", s.Code)
	}
	sv := &Server{min: s.MinTime, mins: s.MinTimes, code: s.Code, now: s.Now, onShed: s.OnShed,
		trailer: metadata.Pairs(PushbackHeader, "-1")}
	if sv.code == codes.OK {
		sv.code = codes.Unavailable
	}
	if sv.now == nil {
		sv.now = time.Now
	}
	return sv, nil
}

// Shed returns how many calls the Server refused.
func (s *Server) Shed() uint64 { return s.shed.Load() }

// ServerOptions returns the options that install both interceptors.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(s.StreamInterceptor()),
	}
}

// UnaryInterceptor returns the unary server interceptor.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := s.admit(ctx, info.FullMethod); err != nil {
			_ = grpc.SetTrailer(ctx, s.trailer)
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor returns the stream server interceptor: the deadline is
// judged once, when the stream opens.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := s.admit(ss.Context(), info.FullMethod); err != nil {
			ss.SetTrailer(s.trailer)
			return err
		}
		return handler(srv, ss)
	}
}

// admit refuses a call whose deadline leaves less than its method needs.
func (s *Server) admit(ctx context.Context, fullMethod string) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	need := s.need(fullMethod)
	left := dl.Sub(s.now())
	if left > 0 && left >= need {
		return nil
	}
	s.shed.Add(1)
	if s.onShed != nil {
		s.onShed(fullMethod, left)
	}
	return status.Errorf(s.code, "resilgrpc: shed: the deadline leaves %v, the method needs %v", max(left, 0), need)
}

func (s *Server) need(fullMethod string) time.Duration {
	if d, ok := match(s.mins, fullMethod); ok {
		return d
	}
	return s.min
}
