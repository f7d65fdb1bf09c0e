package grid

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Decode reads one shard's JSON into v and checks it with check: the first
// mistake is an error that names the file and the field, never a panic.
func Decode(data []byte, v any, file string, check func(*Checker)) error {
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("merge: %s: %s: want a JSON %s, got %s", file, te.Field, te.Type, te.Value)
		}
		return fmt.Errorf("merge: %s: %v", file, err)
	}
	c := &Checker{file: file}
	check(c)
	return c.Err()
}

// Checker checks one shard, field by field, and keeps the first mistake.
type Checker struct {
	file string
	err  error
}

// Err is the first mistake found, or nil.
func (c *Checker) Err() error { return c.err }

// Failf records a mistake in field, unless one was recorded before.
func (c *Checker) Failf(field, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("merge: %s: %s: %s", c.file, field, fmt.Sprintf(format, args...))
	}
}

// Count checks that a list has from lo to hi entries.
func (c *Checker) Count(field string, n, lo, hi int) bool {
	if n < lo || n > hi {
		c.Failf(field, "%d entries: want %d to %d", n, lo, hi)
		return false
	}
	return true
}

// Number checks a number in [lo, hi].
func (c *Checker) Number(field string, v, lo, hi float64) {
	if math.IsNaN(v) || v < lo || v > hi {
		c.Failf(field, "%g: want %g to %g", v, lo, hi)
	}
}

// Shard checks a shard's "i/n" against the first shard's n.
func (c *Checker) Shard(field, v, first string) {
	sh, err := ParseShard(v)
	if err != nil {
		c.Failf(field, "%q: want i/n, as --shard takes it", v)
		return
	}
	if f, err := ParseShard(first); err == nil && f.Count != sh.Count {
		c.Failf(field, "%q is a shard of %d, the first result's of %d", v, sh.Count, f.Count)
	}
}

// Same checks that a shard was of the same run as the first one.
func (c *Checker) Same(field string, equal bool) {
	if !equal {
		c.Failf(field, "differs from the first result's: the shards are of different runs")
	}
}
