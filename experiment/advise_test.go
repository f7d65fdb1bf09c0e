package experiment

import (
	"context"
	"errors"
	"testing"
)

func TestAdviseBound(t *testing.T) {
	sc := stormScenario(t)
	_, err := Advise(context.Background(), CheckInput{Fleet: sc.Fleets[0]}, AdviseOptions{Base: sc, MaxRuns: 100}, Options{})
	if !errors.Is(err, ErrTooBig) {
		t.Fatalf("err = %v, want ErrTooBig", err)
	}
	t.Log(err)
}
