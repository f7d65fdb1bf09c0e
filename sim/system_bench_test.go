package sim

import (
	"testing"

	"github.com/retrystorm/retrystorm/scenario"
)

// BenchmarkSystem is the system engine on the storm (the same run as
// BenchmarkStorm, by the other engine: TestSystemEngineAgrees), on the
// cache experiment's flush, and on the shared scenario of every new key.
// BENCHMARKS.md (issue 39) has the figures.
func BenchmarkSystem(b *testing.B) {
	storm := loadScenario(b, "testdata/storm.yaml")
	sys := *storm
	sys.Fleets = append([]scenario.Fleet(nil), storm.Fleets...)
	for i := range sys.Fleets {
		sys.Fleets[i].Callee = scenario.OriginLayer
	}
	b.Run("storm", func(b *testing.B) { benchRun(b, &sys) })
	b.Run("cache-flush", func(b *testing.B) { benchRun(b, loadScenario(b, "../experiment/scenarios/cache.yaml")) })
	b.Run("shared", func(b *testing.B) { benchRun(b, loadScenario(b, "../scenario/testdata/system.yaml")) })
}
