package verdict

// Manifests is check --manifests' result as --json prints it: every chain
// with its own names, verdict and blame, and the check of each distinct
// chain once. A directory of a thousand services built from a few
// templates has a few distinct chains: printing each chain's check in
// full would write each of those a few hundred times over (277 MB for
// BenchmarkManifests1000's thousand services, where this is a few
// megabytes).
type Manifests struct {
	Chains []ManifestChain `json:"chains"`
	// Distinct is each distinct chain's check, as simulated: its fleet
	// is named after the first chain of its kind (ManifestChain.Distinct
	// indexes it).
	Distinct  []*CheckResult `json:"distinct"`
	Unmatched []string       `json:"unmatched"`
	Simulated int            `json:"chains_simulated"`
}

// ManifestChain is one chain of a Manifests: a StackResult under this
// chain's names, its check in Manifests.Distinct.
type ManifestChain struct {
	Chain    string             `json:"chain"`
	Layers   []StackLayerResult `json:"layers"`
	Agree    bool               `json:"closed_form_agrees"`
	Level    Level              `json:"verdict"`
	Distinct int                `json:"distinct"`
	// FailingCells is the cells of the realistic region past a threshold
	// at the verdict's client count: what a baseline compares.
	FailingCells int `json:"failing_cells"`
}

// Manifests is m, whole or merged, as check --manifests --json prints it.
func (m *StackShard) Manifests() *Manifests {
	out := &Manifests{Unmatched: m.Unmatched, Simulated: len(m.Results)}
	for _, r := range m.Results {
		out.Distinct = append(out.Distinct, r.Check)
	}
	cells := make([]int, len(m.Results))
	for k, r := range m.Results {
		cells[k] = r.Check.FailingCells(0)
	}
	for i, ch := range m.Chains {
		own := m.StackRun(i)
		out.Chains = append(out.Chains, ManifestChain{Chain: own.Chain, Layers: own.Layers, Agree: own.Agree, Level: own.Level,
			Distinct: ch.Distinct, FailingCells: cells[ch.Distinct]})
	}
	return out
}
