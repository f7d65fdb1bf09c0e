package resilgrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrystorm/retrystorm/resil"
)

// judge marks an attempt's error for resil's default classification:
// retryable codes as they are (with the server's pushback), failure codes
// Permanent, other answers Neutral. ctx is the caller's, actx the attempt's.
func (m *method) judge(ctx, actx context.Context, err error, committed bool, trailer metadata.MD) error {
	if ctx.Err() != nil {
		return err // the Guard judges the caller's own end first
	}
	code := status.Code(err)
	push, abort := pushback(trailer)
	bit := uint64(1) << min(uint32(code), 63)
	switch {
	case committed:
		// Headers came: the call is committed and never retried, but it
		// still says how the server did.
		if m.fail&bit != 0 || abort {
			return resil.Permanent(err)
		}
		return resil.Neutral(err)
	case code == codes.DeadlineExceeded && attemptDeadline(ctx, actx):
		// The deadline the server ran out of was the per-attempt
		// timeout's: retried, as the Guard retries its attempt timeouts
		// (the answer may beat the client's own timer).
		return &deadlineError{err}
	case code == codes.DeadlineExceeded && hasDeadline(ctx):
		// It was the caller's own: a retry cannot make it.
		return resil.Permanent(&deadlineError{err})
	case abort:
		// The server asked for no retry: a failure for the throttle, as
		// gRFC A6 counts it, whatever the code.
		if m.retry&bit != 0 {
			return resil.RetryAfter(err, -1)
		}
		return resil.Permanent(err)
	case m.retry&bit != 0:
		if code == codes.DeadlineExceeded {
			err = &deadlineError{err} // a timeout: the budget's TimeoutCost
		}
		if push >= 0 {
			// Zero asks for a retry at once; resil reads zero as no
			// pushback, so it is the least wait instead.
			return resil.RetryAfter(err, max(push, time.Nanosecond))
		}
		return err
	case m.fail&bit != 0:
		return resil.Permanent(err)
	}
	return resil.Neutral(err)
}

// attemptDeadline reports whether the attempt ran under a deadline of its
// own, earlier than the caller's: a per-attempt timeout.
func attemptDeadline(ctx, actx context.Context) bool {
	adl, ok := actx.Deadline()
	if !ok {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || adl.Before(dl)
}

func hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
}

// pushback reads the grpc-retry-pushback-ms trailer: the wait asked for
// (negative when none was), and whether the server asked for no retry (a
// negative, malformed or repeated value, per gRFC A6).
func pushback(md metadata.MD) (time.Duration, bool) {
	v := md.Get(PushbackHeader)
	switch len(v) {
	case 0:
		return -1, false
	case 1:
		ms, err := strconv.ParseInt(v[0], 10, 32)
		if err != nil || ms < 0 {
			return -1, true
		}
		return time.Duration(ms) * time.Millisecond, false
	}
	return -1, true
}

// deadlineError is a DEADLINE_EXCEEDED answer: a timeout for resil.
type deadlineError struct{ err error }

func (e *deadlineError) Error() string { return e.err.Error() }
func (e *deadlineError) Unwrap() error { return e.err }
func (e *deadlineError) Timeout() bool { return true }

// callError is the error of a guarded call that failed: it reports the
// status the caller should see (the last attempt's, or the refusal's) and
// unwraps to resil's error, so that status.Code and errors.Is both work.
type callError struct {
	st  *status.Status
	err error
}

func (e *callError) Error() string {
	return "rpc error: code = " + e.st.Code().String() + " desc = " + e.st.Message() + " (" + reason(e.err) + ")"
}

func (e *callError) Unwrap() error { return e.err }

// GRPCStatus returns the status the caller sees.
func (e *callError) GRPCStatus() *status.Status { return e.st }

func reason(err error) string {
	if se, ok := errors.AsType[*resil.StopError](err); ok {
		return se.Reason.Error() + " after " + strconv.Itoa(se.Attempts) + " attempts"
	}
	return err.Error()
}

// callError turns what the Guard returned into an error with the right
// status: the caller's context error as CANCELLED or DEADLINE_EXCEEDED, the
// last attempt's status, or UNAVAILABLE for a refusal. A fallback's own
// error is returned as it is.
func toCallError(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := errors.AsType[*resil.StopError](err); ok {
		switch {
		case isContextError(se.Reason):
			return &callError{st: status.FromContextError(se.Reason), err: err}
		case se.Last != nil:
			return &callError{st: statusOf(se.Last), err: err}
		}
		return &callError{st: status.New(codes.Unavailable, se.Reason.Error()), err: err}
	}
	switch {
	case isContextError(err):
		return &callError{st: status.FromContextError(err), err: err}
	case errors.Is(err, resil.ErrBreakerOpen):
		if _, ok := status.FromError(err); !ok {
			return &callError{st: status.New(codes.Unavailable, err.Error()), err: err}
		}
	}
	return err
}

func isContextError(err error) bool {
	return err == context.Canceled || err == context.DeadlineExceeded
}

// statusOf finds the status an attempt's error carries, unchanged by the
// marks resil and judge wrapped it in.
func statusOf(err error) *status.Status {
	if s, ok := errors.AsType[interface {
		error
		GRPCStatus() *status.Status
	}](err); ok {
		if st := s.GRPCStatus(); st != nil {
			return st
		}
	}
	return status.FromContextError(err) // Unknown, with the error's text, for others
}
