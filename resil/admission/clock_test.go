package admission

import (
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/internal/fakeclock"
)

// fakeClock is a resil.Clock that moves only when the test says so.
type fakeClock struct{ *fakeclock.Clock }

func newFakeClock(now time.Time) *fakeClock { return &fakeClock{fakeclock.New(now)} }

func (c *fakeClock) NewTimer(d time.Duration) resil.Timer            { return c.Clock.NewTimer(d) }
func (c *fakeClock) AfterFunc(d time.Duration, f func()) resil.Timer { return c.Clock.AfterFunc(d, f) }
