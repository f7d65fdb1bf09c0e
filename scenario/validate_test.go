package scenario

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
)

// TestValidateInCode checks scenarios built or changed in code: the error
// names the field as the file would, with no file or line.
func TestValidateInCode(t *testing.T) {
	if err := storm.Validate(); err != nil {
		t.Fatalf("storm: %v", err)
	}
	for _, tt := range []struct {
		name   string
		change func(*Scenario)
		field  string
		msg    string
	}{
		{"no tick", func(s *Scenario) { s.Tick = 0 }, "tick", "must be more than 0"},
		{"unknown model", func(s *Scenario) { s.Origin.Model = "" }, "origin.model", `must be capacity, queue or concurrency, got ""`},
		{"setting of another model", func(s *Scenario) { s.Origin.Latency = time.Second }, "origin.latency", "latency does not apply to the queue model; it is a setting of the capacity model"},
		{"no budget", func(s *Scenario) { s.Fleets[0].Budget.Use = "" }, "fleets[0].budget.use", "must be none, token_bucket, window, grpc, aws, concurrency or aws_adaptive"},
		{"setting of another budget", func(s *Scenario) { s.Fleets[1].Budget.Window.TTL = time.Second }, "fleets[1].budget.settings.ttl", "ttl does not apply to token_bucket; it is a setting of window"},
		{"setting of no breaker", func(s *Scenario) { s.Fleets[0].Breaker.Cooldown = time.Second }, "fleets[0].breaker.settings.cooldown", "use: none takes no settings"},
		{"funding unset", func(s *Scenario) { s.Fleets[1].Budget.TokenBucket.Funding = budget.FundingUnset }, "fleets[1].budget.settings.funded_by", "must be success or request, got unset"},
		{"jitter unset", func(s *Scenario) { s.Fleets[1].Retry.Backoff.Jitter = "" }, "fleets[1].retry.backoff.jitter", "must be none, full, equal, decorrelated or factor"},
		{"multiplier unset", func(s *Scenario) { s.Fleets[1].Retry.Backoff.Multiplier = 0 }, "fleets[1].retry.backoff.multiplier", "must be in [1, 1000], got 0"},
		{"NaN rate", func(s *Scenario) { s.Traffic.Rate = math.NaN() }, "traffic.rate", "got NaN"},
		{"trigger overflow", func(s *Scenario) { s.Triggers[0].At = 100 * time.Second; s.Triggers[0].For = 1<<63 - 1 }, "triggers[0].for", "must be in (0s, 720h]"},
		{"duplicate names", func(s *Scenario) { s.Fleets[1].Name = "naive" }, "fleets[1].name", `"naive" is the name of fleets[0] too`},
		{"no fleets", func(s *Scenario) { s.Fleets = nil }, "fleets", "at least one fleet is required"},
		{"invalid UTF-8 name", func(s *Scenario) { s.Name = "\xff" }, "name", "not valid UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := clone(storm)
			tt.change(&s)
			err := s.Validate()
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Validate() = %v, want an *Error", err)
			}
			if e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) || e.File != "" || e.Line != 0 {
				t.Errorf("Validate() = %#v, want field %q and %q, no place", e, tt.field, tt.msg)
			}
		})
	}
}

// clone copies s deeply enough for a test to change it.
func clone(s Scenario) Scenario {
	s.Triggers = append([]Trigger(nil), s.Triggers...)
	s.Fleets = append([]Fleet(nil), s.Fleets...)
	return s
}
