package verdict

// The thresholds of check's verdict (docs/check.md, "The thresholds"),
// each with its reason. They were written down before the examples of
// issue 34 were run, and are not fitted to them.
//
// Amplification is judged by what it costs and over the fault, never in
// one tick: a one-tick peak of instant rejections is not a storm.
const (
	// maxWorkAmplification bounds the attempts per intent over a fault
	// and its recovery, for faults whose attempts take the origin's work
	// or queue (a capacity dip, a stall, a burst of error answers). The
	// products' own retry budgets allow 10% to 20% more attempts than
	// intents (Google's SRE book, "Handling Overload": a per-client
	// budget of 10%; Envoy's retry_budget and Linkerd's and Finagle's
	// budgets default to 20%), so 1.5 is two and a half times the most
	// generous default; and at the storm's 83% load, 1.5 times the load
	// is 125% of the origin's full capacity: past what any queue
	// absorbs.
	maxWorkAmplification = 1.5
	// maxWorkLoad bounds the mean offered load over a work fault's
	// length against the origin's full capacity: twice what it can serve
	// at its best, for the whole fault, is a flood that a longer fault
	// turns into a collapse whatever the queue does (the threshold check
	// used for one tick before, now over the fault).
	maxWorkLoad = 2.0
	// maxInstantAmplification bounds the attempts per intent over a fault
	// whose failures cost the origin little (refused connections, a
	// black-holed origin that does no work, rejections answered at once):
	// they still cost every proxy and client on the way, and the SRE
	// book's per-request limit of three retries (four attempts) is the
	// most its authors let one request send.
	maxInstantAmplification = 4.0
	// maxHerd bounds the herd at recovery: the most attempts in one tick
	// of the herdTicks after a fault ends, against the origin's full
	// capacity in a tick. A service coming back (a restart, a failover)
	// has cold caches and connection pools and serves less than its
	// steady capacity; the retries that waited out the fault arriving at
	// twice that capacity at once is the thundering herd of the Amazon
	// Builders' Library's "Timeouts, retries, and backoff with jitter".
	maxHerd = 2.0
	// herdTicks is how long after a fault the herd is looked for.
	herdTicks = 3
)
