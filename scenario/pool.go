package scenario

import "time"

// Pool is a connection pool on the calling side of a hop, as a client
// library keeps one per process: database/sql's MaxOpenConns, HikariCP's
// maximumPoolSize and connectionTimeout, an HTTP client's
// MaxConnsPerHost. Every client of a fleet, and every replica of a tier
// (or a cache's fills), has a pool of its own. An attempt takes a
// connection before it goes and holds it until its client is done with
// it: answered, timed out, or cancelled. When none is free the attempt
// waits, first come first served: while it waits, its own timeout runs;
// after WaitTimeout the pool gives up on it, and a full wait queue
// refuses it at once. A pool that gives up answers with an overload
// rejection (retried when the policy retries rejections), heard at once,
// and the attempt never reaches the layer. The zero value (Size 0) is no
// pool.
type Pool struct {
	// Size is how many connections the pool holds; [1, 1000000].
	Size int
	// QueueLimit is how many attempts may wait for a connection; 0 is no
	// limit.
	QueueLimit int
	// WaitTimeout is how long an attempt waits for a connection before
	// the pool gives up on it; 0 waits as long as the attempt does.
	WaitTimeout time.Duration
}

// On reports whether there is a pool.
func (p Pool) On() bool { return p.Size > 0 }

func poolValue(p *Pool) value {
	return given{unlessUnset{o: poolObject(p), set: func() bool { return *p != Pool{} }},
		"size", "must be in [1, 1000000], got 0 (leave pool out for none)"}
}

func poolObject(p *Pool) *object {
	return &object{
		fields: []field{
			{key: "size", need: true, v: integer{&p.Size}},
			{key: "queue_limit", v: integer{&p.QueueLimit}},
			{key: "wait_timeout", v: duration{&p.WaitTimeout}},
		},
		check: p.check,
	}
}

func (p *Pool) check(c *checker, path string) {
	if *p == (Pool{}) {
		return // no pool
	}
	at := func(key string) string { return join(path, key) }
	in(c, at("size"), p.Size, 1, maxCount)
	in(c, at("queue_limit"), p.QueueLimit, 0, maxCount)
	in(c, at("wait_timeout"), p.WaitTimeout, 0, maxWait)
}
