package resilgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil/admission"
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
	// Shedder, if set, admits every call that passed the check above
	// through a admission.Shedder: its own deadline checks, its concurrency
	// limit (adaptive or fixed) and its wait queue, the very decisions
	// resilhttp.Shed makes for HTTP; the call's end is reported to it, a
	// deadline passed in the handler as a drop. As under resilhttp.Shed,
	// the handler runs under the caller's deadline less the Shedder's
	// DeadlineSettings.Reserve: it stops, and the Shedder hears of the
	// deadline it missed, before the caller gives up and cancels the call
	// (a cancellation that arrives before the server's own deadline says
	// only that the caller left). Its deadline refusals are
	// answered as above; its overload refusals (limit, queue) with
	// UNAVAILABLE and, when ShedderSettings.RetryAfter is set, that wait
	// as the pushback. Nil means none: no concurrency limit.
	Shedder *admission.Shedder
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
	dl      *admission.DeadlineShedder            // MinTime's decisions
	dls     map[string]*admission.DeadlineShedder // MinTimes'
	shedder *admission.Shedder
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
		shedder: s.Shedder, trailer: metadata.Pairs(PushbackHeader, "-1")}
	// The decisions are resil's: a call may start when its deadline
	// leaves at least the method's time.
	var err error
	if sv.dl, err = admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: s.MinTime}); err != nil {
		return nil, fmt.Errorf("resilgrpc: ServerSettings.MinTime: %w", err)
	}
	sv.dls = make(map[string]*admission.DeadlineShedder, len(s.MinTimes))
	for k, v := range s.MinTimes {
		if sv.dls[k], err = admission.NewDeadlineShedder(admission.DeadlineSettings{ServiceTime: v}); err != nil {
			return nil, fmt.Errorf("resilgrpc: ServerSettings.MinTimes[%q]: %w", k, err)
		}
	}
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
		t, trailer, err := s.admit(ctx, info.FullMethod)
		if err != nil {
			if trailer != nil {
				_ = grpc.SetTrailer(ctx, trailer)
			}
			return nil, err
		}
		ctx, cancel := s.handlerContext(ctx)
		defer cancel()
		defer s.end(ctx, t)
		return handler(ctx, req)
	}
}

// StreamInterceptor returns the stream server interceptor: the deadline is
// judged once, when the stream opens.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		t, trailer, err := s.admit(ss.Context(), info.FullMethod)
		if err != nil {
			if trailer != nil {
				ss.SetTrailer(trailer)
			}
			return err
		}
		ctx, cancel := s.handlerContext(ss.Context())
		defer cancel()
		defer s.end(ctx, t)
		if ctx != ss.Context() {
			ss = &contextStream{ServerStream: ss, ctx: ctx}
		}
		return handler(srv, ss)
	}
}

// handlerContext returns the context a handler runs under: with a
// Shedder, the caller's deadline less its Reserve (as resilhttp.Shed's
// handlers), else ctx itself.
func (s *Server) handlerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.shedder == nil {
		return ctx, func() {}
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	if d := s.shedder.Deadline().Deadline(dl); d.Before(dl) {
		return context.WithDeadline(ctx, d)
	}
	return ctx, func() {}
}

// contextStream is a server stream whose handler runs under another
// context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *contextStream) Context() context.Context { return c.ctx }

// admit refuses a call whose deadline leaves less than its method needs,
// then, with a Shedder, one it refuses. It returns the Shedder's ticket,
// or the refusal and the trailer to send with it.
func (s *Server) admit(ctx context.Context, fullMethod string) (admission.ShedTicket, metadata.MD, error) {
	if dl, ok := ctx.Deadline(); ok {
		now := s.now()
		d, need := s.dl, s.min
		if m, ok := match(s.dls, fullMethod); ok {
			d, need = m, m.Estimate()
		}
		if d.Decide(now, dl) != admission.ShedNone {
			left := dl.Sub(now)
			s.refused(fullMethod, left)
			return admission.ShedTicket{}, s.trailer, status.Errorf(s.code, "resilgrpc: shed: the deadline leaves %v, the method needs %v", max(left, 0), need)
		}
	}
	if s.shedder == nil {
		return admission.ShedTicket{}, nil, nil
	}
	t, err := s.shedder.Admit(ctx, time.Time{})
	if err == nil {
		return t, nil, nil
	}
	left := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		left = dl.Sub(s.now())
	}
	s.refused(fullMethod, left)
	se, _ := errors.AsType[*admission.ShedError](err)
	if se == nil || !se.Reason.Overload() {
		return admission.ShedTicket{}, s.trailer, status.Errorf(s.code, "resilgrpc: shed: %v", err)
	}
	var trailer metadata.MD
	if se.Wait > 0 {
		trailer = metadata.Pairs(PushbackHeader, strconv.FormatInt(se.Wait.Milliseconds(), 10))
	}
	return admission.ShedTicket{}, trailer, status.Errorf(codes.Unavailable, "resilgrpc: shed: %v", err)
}

func (s *Server) refused(fullMethod string, left time.Duration) {
	s.shed.Add(1)
	if s.onShed != nil {
		s.onShed(fullMethod, left)
	}
}

// end tells the Shedder how the call it admitted ended: a deadline that
// passed while the handler ran is a drop (the client's cancellation often
// arrives before the server's own deadline fires), a caller who left
// before it says nothing.
func (s *Server) end(ctx context.Context, t admission.ShedTicket) {
	if s.shedder == nil {
		return
	}
	switch dl, ok := ctx.Deadline(); {
	case ctx.Err() == nil:
		s.shedder.Done(t, false)
	case ok && !s.shedder.Now().Before(dl):
		s.shedder.Done(t, true)
	default:
		s.shedder.Ignore(t)
	}
}
