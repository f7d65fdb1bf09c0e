package resilgrpc

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrystorm/retrystorm/resil"
)

// StreamInterceptor returns the stream client interceptor: a stream is
// retried under its method's Guard until it commits, never after.
//
// A stream commits, as gRFC A6 says, when the first response message or the
// response headers arrive, when its buffered request messages pass
// ReplayLimit, or when its Context is asked for (as in grpc-go). Until then
// the request messages sent are kept (cloned) and replayed on the retry;
// after it, the stream is the attempt's own and its errors are returned as
// they come. Streams are never hedged. The Guard judges the attempt at its
// commit point: the breaker and the budget see a committed stream as a
// success, and an attempt that failed before it by its status code.
//
// A retry is decided when the failure is seen: by RecvMsg or Header, or
// when the per-attempt timeout (GuardSettings.AttemptTimeout, which bounds
// the time to commit) expires. A failed attempt's SendMsg returns nil,
// since the message will be replayed; the status comes from RecvMsg.
//
// NewStream waits for the first attempt to be created, retrying as the
// policy allows. As with any gRPC stream, cancel the context or read until
// RecvMsg returns an error, or the stream's resources are held.
func (c *Client) StreamInterceptor() grpc.StreamClientInterceptor { return c.stream }

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, fullMethod string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	m := c.lookup(fullMethod)
	if m == nil {
		return streamer(ctx, desc, cc, fullMethod, opts...)
	}
	rs := &retryStream{c: c, m: m, desc: desc, cc: cc, method: fullMethod, streamer: streamer,
		changed: make(chan struct{})}
	if m.timeout > 0 {
		rs.ctx, rs.cancel = context.WithTimeout(ctx, m.timeout)
	} else {
		rs.ctx, rs.cancel = context.WithCancel(ctx)
	}
	rs.opts = opts
	if m.wfr {
		rs.opts = append(opts[:len(opts):len(opts)], grpc.WaitForReady(true))
	}
	o := resil.CallOptions[*attempt]{Idempotency: m.idem, NoHedge: true}
	readOptions(opts, &o)
	go rs.drive(o)

	rs.mu.Lock()
	rs.waitLocked(func() bool { return rs.cur == nil })
	cur, final := rs.cur, rs.final
	rs.mu.Unlock()
	if cur == nil {
		rs.cancel()
		if final == nil {
			// A Guard's fallback answered the refusal: it cannot make a stream.
			final = status.Error(codes.Unavailable, "resilgrpc: the stream was refused; a fallback cannot answer a stream")
		}
		return nil, final
	}
	return rs, nil
}

// retryStream is the stream the caller holds: it forwards to the current
// attempt and replaces it, under the Guard, until it commits.
type retryStream struct {
	c        *Client
	m        *method
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	ctx      context.Context // the caller's, with the method's timeout
	cancel   context.CancelFunc

	mu         sync.Mutex
	cur        *attempt
	committed  bool
	buf        []any // request messages to replay, until committed
	size       int
	closedSend bool
	finished   bool  // the Guard's call returned
	final      error // and its error
	changed    chan struct{}
	endOnce    sync.Once
}

// attempt is one gRPC stream the Guard sent.
type attempt struct {
	s      grpc.ClientStream
	actx   context.Context // the Guard's context for the attempt
	cancel context.CancelFunc
	end    chan error // the caller's side reports the commit (nil) or the failure
}

// broadcast wakes every waiter. Called with mu held.
func (rs *retryStream) broadcast() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// waitLocked waits, with mu held, while the Guard's call goes on and
// still holds: until a new attempt or the end.
func (rs *retryStream) waitLocked(still func() bool) {
	for still() && !rs.finished {
		ch := rs.changed
		rs.mu.Unlock()
		<-ch
		rs.mu.Lock()
	}
}

// drive runs the Guard's call: one attempt per call of send, until one
// commits or the policy stops.
func (rs *retryStream) drive(o resil.CallOptions[*attempt]) {
	_, err := resil.CallWith(rs.ctx, rs.m.guard, o, rs.send)
	rs.mu.Lock()
	rs.finished, rs.final = true, toCallError(err)
	rs.broadcast()
	rs.mu.Unlock()
	if err != nil {
		rs.end()
	}
}

// send is the Guard's attempt: it opens a stream, replays what the caller
// sent, hands the stream over, and waits for its commit or its failure.
func (rs *retryStream) send(actx context.Context, a resil.Attempt) (*attempt, error) {
	sctx, cancel := context.WithCancel(rs.c.outgoing(rs.ctx, a))
	att := &attempt{actx: actx, cancel: cancel, end: make(chan error, 1)}
	// The attempt's context bounds the time to commit only: once
	// committed, the stream lives as long as the caller's context.
	stop := context.AfterFunc(actx, func() {
		rs.mu.Lock()
		keep := rs.committed && rs.cur == att
		rs.mu.Unlock()
		if !keep {
			cancel()
		}
	})
	s, err := rs.streamer(sctx, rs.desc, rs.cc, rs.method, rs.opts...)
	if err != nil {
		stop()
		cancel()
		return nil, rs.m.judge(rs.ctx, actx, err, false, nil)
	}
	att.s = s
	rs.mu.Lock()
	for _, msg := range rs.buf {
		if s.SendMsg(msg) != nil {
			break // the attempt failed; RecvMsg will say how
		}
	}
	if rs.closedSend {
		_ = s.CloseSend()
	}
	rs.cur = att
	rs.broadcast()
	rs.mu.Unlock()
	select { // err is nil: the stream opened
	case err = <-att.end:
	case <-actx.Done():
		rs.mu.Lock()
		committed := rs.committed && rs.cur == att
		rs.mu.Unlock()
		if !committed {
			err = status.FromContextError(actx.Err()).Err()
		}
	}
	stop()
	if err != nil {
		cancel() // the attempt is over
	}
	return att, err
}

// current returns the attempt to use, whether the stream is committed, and
// the call's error once the Guard gave up.
func (rs *retryStream) current() (*attempt, bool, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.finished && rs.final != nil {
		return rs.cur, false, rs.final
	}
	return rs.cur, rs.committed, nil
}

// commit makes att the stream's attempt for good.
func (rs *retryStream) commit(att *attempt) {
	rs.mu.Lock()
	rs.commitLocked(att)
	rs.mu.Unlock()
}

func (rs *retryStream) commitLocked(att *attempt) {
	if rs.committed || rs.cur != att {
		return
	}
	rs.committed, rs.buf, rs.size = true, nil, 0
	select {
	case att.end <- nil:
	default:
	}
}

// failed reports att's failure before its commit to the Guard and waits for
// its decision: nil when a new attempt is ready, else the error to return.
func (rs *retryStream) failed(att *attempt, err error) error {
	hdr, _ := att.s.Header() // at once: the stream has ended
	judged := rs.m.judge(rs.ctx, att.actx, err, hdr != nil, att.s.Trailer())
	select {
	case att.end <- judged:
	default:
	}
	rs.mu.Lock()
	rs.waitLocked(func() bool { return rs.cur == att })
	finished, final := rs.finished, rs.final
	rs.mu.Unlock()
	if !finished {
		return nil
	}
	rs.end()
	if final == nil {
		return err
	}
	return final
}

// end releases the stream's contexts once it is over.
func (rs *retryStream) end() {
	rs.endOnce.Do(func() {
		rs.mu.Lock()
		cur := rs.cur
		rs.mu.Unlock()
		if cur != nil {
			cur.cancel()
		}
		rs.cancel()
	})
}

// RecvMsg receives from the current attempt; a failure before the commit
// is retried as the Guard decides.
func (rs *retryStream) RecvMsg(m any) error {
	for {
		att, committed, err := rs.current()
		if err != nil {
			return err
		}
		err = att.s.RecvMsg(m)
		if committed {
			if err != nil {
				rs.end()
			}
			return err
		}
		if err == nil || err == io.EOF {
			rs.commit(att)
			if err == io.EOF {
				rs.end()
			}
			return err
		}
		if err := rs.failed(att, err); err != nil {
			return err
		}
	}
}

// Header waits for the response headers of the current attempt; their
// arrival commits the stream. As grpc-go's, it returns no error when the
// call failed: RecvMsg says how.
func (rs *retryStream) Header() (metadata.MD, error) {
	for {
		att, committed, err := rs.current()
		if err != nil {
			return nil, nil
		}
		md, err := att.s.Header()
		if committed || md != nil {
			rs.commit(att)
			return md, err
		}
		if err == nil {
			// The attempt ended without headers (grpc-go's Header hides
			// its error): no message came either, so receiving reads only
			// its status.
			err = att.s.RecvMsg(&emptypb.Empty{})
			if err == io.EOF {
				rs.commit(att) // a success without headers or messages
				rs.end()
				return nil, nil
			}
		}
		if rs.failed(att, err) != nil {
			return nil, nil
		}
	}
}

// Trailer returns the current attempt's trailer.
func (rs *retryStream) Trailer() metadata.MD {
	rs.mu.Lock()
	att := rs.cur
	rs.mu.Unlock()
	return att.s.Trailer()
}

// CloseSend closes the sending side; a retry replays it.
func (rs *retryStream) CloseSend() error {
	rs.mu.Lock()
	rs.closedSend = true
	att := rs.cur
	rs.mu.Unlock()
	return att.s.CloseSend()
}

// Context commits the stream, as grpc-go's does, and returns its
// attempt's context.
func (rs *retryStream) Context() context.Context {
	rs.mu.Lock()
	att := rs.cur
	rs.commitLocked(att)
	rs.mu.Unlock()
	return att.s.Context()
}

// SendMsg sends m on the current attempt and keeps a copy to replay until
// the stream commits.
func (rs *retryStream) SendMsg(m any) error {
	rs.mu.Lock()
	att := rs.cur
	if !rs.committed {
		pm, ok := m.(proto.Message)
		n := rs.c.replay + 1
		if ok {
			n = proto.Size(pm)
		}
		if rs.size+n > rs.c.replay {
			rs.commitLocked(att) // the buffer overflows: this attempt it is
		} else {
			rs.buf = append(rs.buf, proto.Clone(pm))
			rs.size += n
		}
	}
	committed := rs.committed
	rs.mu.Unlock()
	err := att.s.SendMsg(m)
	if err == io.EOF && !committed {
		return nil // the attempt ended: RecvMsg will say how, and a retry replays m
	}
	return err
}
