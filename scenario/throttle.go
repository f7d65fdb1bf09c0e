package scenario

import (
	"fmt"
	"math/rand/v2"

	"github.com/retrystorm/retrystorm/resil"
)

// Throttle kinds.
const (
	ThrottleNone     = "none"
	ThrottleAdaptive = "adaptive"
)

// Throttle is adaptive client-side throttling: Use picks it ("none" or
// absent: no throttle), and its settings are resil's own
// (resil.ThrottlerSettings: K, Window, Padding, MaxProbability), with
// resil's defaults and ranges. Rand is left nil: NewPolicyRand gives each
// client a source of its own. Each client has its own throttler.
type Throttle struct {
	Use string
	resil.ThrottlerSettings
}

func throttleObject(t *Throttle) *object {
	adaptive := []string{ThrottleAdaptive}
	settings := &object{
		kind: &t.Use, absentKind: ThrottleNone, what: "%s",
		fields: []field{
			{key: "k", kinds: adaptive, v: number{&t.K}},
			{key: "window", kinds: adaptive, v: duration{&t.Window}},
			{key: "padding", kinds: adaptive, v: number{&t.Padding}},
			{key: "max_probability", kinds: adaptive, v: number{&t.MaxProbability}},
		},
		// resil's defaults, written out: the SRE book's K and two-minute
		// history.
		preset: func(use string) {
			if use == ThrottleAdaptive {
				t.ThrottlerSettings = resil.ThrottlerSettings{}.WithDefaults()
			}
		},
	}
	return &object{
		selector: "use", kind: &t.Use, kinds: throttles, absentKind: ThrottleNone, what: "%s",
		fields: []field{{key: "settings", v: settings}},
		check:  t.check,
	}
}

// check refuses what resil refuses, at the file's key.
func (t *Throttle) check(c *checker, path string) {
	if t.Use != ThrottleAdaptive {
		return
	}
	filled := Throttle{Use: t.Use, ThrottlerSettings: t.WithDefaults()}
	c.settings(join(path, "settings"), t.Use, throttleObject(t).fields[0].v.(*object), throttleObject(&filled).fields[0].v.(*object),
		&t.ThrottlerSettings, t.Validate())
}

// resil returns a new throttler drawing from src, or nil for none: a nil
// *Throttler is resil's "no throttle".
func (t Throttle) resil(src rand.Source) (*resil.Throttler, error) {
	switch t.Use {
	case ThrottleNone, "":
		return nil, nil
	case ThrottleAdaptive:
		s := t.ThrottlerSettings
		s.Rand = src
		return resil.NewThrottler(s)
	}
	return nil, fmt.Errorf("unknown throttle use %q", t.Use)
}
