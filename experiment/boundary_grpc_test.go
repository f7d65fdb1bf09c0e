package experiment

import (
	"context"
	"testing"

	"github.com/retrystorm/retrystorm/internal/race"
	"github.com/retrystorm/retrystorm/model"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// TestModelAgreesOnGRPC: the sweep's naive fleet under gRPC's retry
// throttle (grpc-go's example values, max_tokens 10 and token_ratio 0.1,
// and a looser 100 and 1), on a 10 × 10 grid of the sweep's, in both
// engines: the verdicts must agree in 95% of cells (200 runs of each).
func TestModelAgreesOnGRPC(t *testing.T) {
	if race.Enabled {
		t.Skip("simulator runs compared: numbers, not concurrency; the plain pass runs it")
	}
	base, err := scenarioFor("sweep", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []scenario.Budget{
		{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 10, TokenRatio: 0.1}},
		{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: 100, TokenRatio: 1}},
	} {
		f := base.Fleets[0]
		f.Budget = b
		p := sweepPolicy{name: "grpc", fleet: f}
		const n = 10
		load, dip := linspace(sweepLoadLo, sweepLoadHi, n), linspace(sweepDipLo, sweepDipHi, n)
		agree := 0
		for y := range dip {
			row := ""
			for x := range load {
				sc := sweepCell(base, p, load[x], dip[y])
				m, err := model.New(sc, sc.Fleets[0])
				if err != nil {
					t.Fatal(err)
				}
				got := m.Verdict()
				res, err := sim.Run(context.Background(), sc)
				if err != nil {
					t.Fatal(err)
				}
				want := res.Fleets[0].Summary.Recovered
				switch {
				case got.Recovered == want:
					agree++
					row += map[bool]string{true: " .", false: " #"}[want]
				default:
					row += map[bool]string{true: " m", false: " s"}[got.Recovered]
				}
			}
			t.Logf("max %g ratio %g, dip %.2f:%s", b.GRPC.MaxTokens, b.GRPC.TokenRatio, dip[y], row)
		}
		t.Logf("max %g ratio %g: verdicts agree in %d of %d cells ('m': only the model recovers, 's': only the simulator)", b.GRPC.MaxTokens, b.GRPC.TokenRatio, agree, n*n)
		if agree < 95 {
			t.Errorf("max %g ratio %g: the verdicts agree in %d of %d cells", b.GRPC.MaxTokens, b.GRPC.TokenRatio, agree, n*n)
		}
	}
}
