package sim

import (
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// inbound is the proxy beside each of the origin's replicas (an Istio
// server-side sidecar, scenario.Inbound), as the hop that calls the origin
// has it: a connection its replica's application refuses, it retries on
// the same replica, never another, and then answers as its product does.
type inbound struct {
	on      bool
	retries int
	aux     uint8 // its answer once the refusals are spent
}

// newInbound is the inbound proxy of calls c, or none.
func newInbound(c scenario.Calls) inbound {
	if c.Inbound.Product == "" {
		return inbound{}
	}
	k := giveup.Of(giveup.Product(c.Inbound.Product), giveup.Refused, c.GRPC()).Kind
	return inbound{on: true, retries: c.Inbound.Retries, aux: answerOf(k)}
}

// The back-off of Istio's inbound retries, which its policy leaves to
// Envoy's defaults: 25ms, doubling up to ten times that, each wait drawn
// from [0, interval) (source/common/common/backoff_strategy.cc,
// JitteredBackOffStrategy; the base and cap in retry_state_impl.cc).
const (
	inboundBase = int64(25 * time.Millisecond)
	inboundCap  = 10 * inboundBase
)

// refuseBehind answers request r, refused by its replica's application at
// now, as the inbound proxy does: it retries the connection on the same
// replica, after Envoy's back-off, and answers once the retries are spent.
// The application refuses each of them, as it did the first: the refusal
// is judged once, when the request arrives.
func (f *fleet) refuseBehind(r int32, now int64) {
	x := f.reqs.at(r)
	at := now + rejectDelay
	for k := range f.inbound.retries {
		interval := min(inboundBase<<k, inboundCap)
		at += int64(draw(f.seed, x.id, int(x.n)<<8|k, drawInbound) * float64(interval))
	}
	if x.tick >= 0 {
		f.osum.InboundRetries += int64(f.inbound.retries)
	}
	f.known(x, at)
	f.q.push(mkEvent(at, r, x.gen, evAnswer, f.inbound.aux), laneHeap)
}
