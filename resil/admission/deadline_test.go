package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
)

// TestDeadlineDecide: the shedder's three decisions on a fixed grid.
func TestDeadlineDecide(t *testing.T) {
	d, err := NewDeadlineShedder(DeadlineSettings{ServiceTime: 100 * time.Millisecond, Reserve: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	now := ts(5)
	ms := func(n int) time.Time { return now.Add(time.Duration(n) * time.Millisecond) }
	for _, c := range []struct {
		name     string
		deadline time.Time
		want     ShedReason
	}{
		{"no deadline", time.Time{}, ShedNone},
		{"passed", ms(-1), ShedExpired},
		{"now", ms(0), ShedExpired},
		{"inside the reserve", ms(10), ShedExpired},
		{"not enough", ms(50), ShedTooLate},
		{"a nanosecond short", ms(110).Add(-1), ShedTooLate},
		{"just enough", ms(110), ShedNone},
		{"plenty", ms(5000), ShedNone},
	} {
		if got := d.Decide(now, c.deadline); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := d.Latest(ms(500)); !got.Equal(ms(390)) {
		t.Errorf("Latest = %v, want 390ms", got.Sub(now))
	}
	if got := d.Deadline(ms(500)); !got.Equal(ms(490)) {
		t.Errorf("Deadline = %v, want 490ms", got.Sub(now))
	}
	if !d.Latest(time.Time{}).IsZero() || !d.Deadline(time.Time{}).IsZero() {
		t.Error("no deadline must stay none")
	}
	// The zero and the nil shedder refuse only what has expired.
	for _, z := range []*DeadlineShedder{{}, nil} {
		if z.Decide(now, ms(1)) != ShedNone || z.Decide(now, ms(0)) != ShedExpired || z.Estimate() != 0 {
			t.Errorf("zero or nil shedder: %v", z)
		}
		z.Observe(time.Second)
	}
}

func TestDeadlineLearn(t *testing.T) {
	d, _ := NewDeadlineShedder(DeadlineSettings{Learn: true, ServiceTime: 50 * time.Millisecond})
	for i, c := range []struct {
		took, want time.Duration
	}{
		{0, 50 * time.Millisecond},                     // nothing learned: the floor
		{80 * time.Millisecond, 80 * time.Millisecond}, // the first observation
		{160 * time.Millisecond, 90 * time.Millisecond},
		{10 * time.Millisecond, 80 * time.Millisecond},
		{-time.Second, 80 * time.Millisecond}, // ignored
	} {
		d.Observe(c.took)
		if got := d.Estimate(); got != c.want {
			t.Errorf("step %d: estimate %v, want %v", i, got, c.want)
		}
	}
	fixed, _ := NewDeadlineShedder(DeadlineSettings{ServiceTime: 50 * time.Millisecond})
	fixed.Observe(time.Second)
	if fixed.Estimate() != 50*time.Millisecond {
		t.Error("a shedder that does not learn learned")
	}
	for _, c := range []struct {
		s     DeadlineSettings
		field string
	}{
		{DeadlineSettings{ServiceTime: -1}, "DeadlineSettings.ServiceTime"},
		{DeadlineSettings{ServiceTime: 25 * time.Hour}, "DeadlineSettings.ServiceTime"},
		{DeadlineSettings{Reserve: -1}, "DeadlineSettings.Reserve"},
		{DeadlineSettings{Reserve: 2 * time.Hour}, "DeadlineSettings.Reserve"},
	} {
		_, err := NewDeadlineShedder(c.s)
		wantSettingError(t, err, c.field)
	}
}

func TestShedReason(t *testing.T) {
	for r := ShedReason(0); r < NumShedReasons; r++ {
		if r.String() == "" || r.String()[0] == 'S' {
			t.Errorf("%d: %q", r, r)
		}
	}
	if ShedReason(99).String() != "ShedReason(99)" {
		t.Error(ShedReason(99).String())
	}
	e := &ShedError{Reason: ShedQueueFull, Wait: time.Second}
	var pb resil.Pushback = e
	if !errors.Is(e, ErrShed) || e.Error() != "resil: request shed: queue_full" || pb.RetryAfter() != time.Second {
		t.Errorf("ShedError: %v", e)
	}
	if !ShedLimit.Overload() || ShedTooLate.Overload() {
		t.Error("Overload")
	}
}
