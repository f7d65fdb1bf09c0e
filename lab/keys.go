package lab

import (
	"sync"
)

// execution is the side effect of a non-idempotent request (a POST): the
// origin counts how many times each intent's effect happened, so that a
// retried POST without an idempotency key shows as a duplicate, and
// answers a retried POST with a key it has already executed from memory.
type execution struct {
	intent string // the intent it belongs to, from IntentHeader
	key    string // its idempotency key; empty: none
	claim  *keyClaim
}

// keyClaim is one idempotency key's state: executing, or executed.
type keyClaim struct {
	done     chan struct{} // closed when the execution that holds it ends
	executed bool          // set before done closes: the effect happened
}

// ledger remembers the executed intents and the claimed keys, each in a
// bounded ring: the oldest are forgotten first, so its memory stays fixed
// however long the run. remember must exceed the keys alive at once (the
// intents in flight); a forgotten key would execute again, and show as a
// duplicate.
type ledger struct {
	mu       sync.Mutex
	keys     map[string]*keyClaim
	keyRing  []string
	keyNext  int
	intents  map[string]struct{}
	seenRing []string
	seenNext int

	executions, duplicates, replayed int64
}

func newLedger(remember int) *ledger {
	return &ledger{
		keys:     make(map[string]*keyClaim),
		keyRing:  make([]string, remember),
		intents:  make(map[string]struct{}),
		seenRing: make([]string, remember),
	}
}

// claim asks to execute the request with key. It returns the key's claim
// and whether the caller holds it (and must execute, then call release);
// otherwise the claim is another request's: wait for its done, then look
// at executed.
func (l *ledger) claim(key string) (*keyClaim, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.keys[key]; ok {
		return c, false
	}
	c := &keyClaim{done: make(chan struct{})}
	l.keys[key] = c
	if old := l.keyRing[l.keyNext]; old != "" && l.keys[old] != nil && l.keys[old] != c {
		delete(l.keys, old)
	}
	l.keyRing[l.keyNext] = key
	l.keyNext = (l.keyNext + 1) % len(l.keyRing)
	return c, true
}

// release ends the execution holding c: when it did not execute (an
// error, a rejection, a drop), the key is freed for a retry to execute.
func (l *ledger) release(key string, c *keyClaim, executed bool) {
	l.mu.Lock()
	c.executed = executed
	if !executed && l.keys[key] == c {
		delete(l.keys, key)
	}
	l.mu.Unlock()
	close(c.done)
}

// replay counts an answer given from memory.
func (l *ledger) replay() {
	l.mu.Lock()
	l.replayed++
	l.mu.Unlock()
}

// executed counts the side effect of intent, and reports whether it had
// already happened: a duplicate execution.
func (l *ledger) executed(intent string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.executions++
	if intent == "" {
		return false
	}
	if _, dup := l.intents[intent]; dup {
		l.duplicates++
		return true
	}
	l.intents[intent] = struct{}{}
	if old := l.seenRing[l.seenNext]; old != "" {
		delete(l.intents, old)
	}
	l.seenRing[l.seenNext] = intent
	l.seenNext = (l.seenNext + 1) % len(l.seenRing)
	return false
}

// counts returns executions, duplicate executions and answers replayed.
func (l *ledger) counts() (executions, duplicates, replayed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.executions, l.duplicates, l.replayed
}
