package kube

import "slices"

// chainIndex is what the chainer looks up, by key, so that finding the
// chains of n services costs about n steps, not n²: each list keeps the
// order of the manifests' own lists, so the chains are found in the order
// a scan of those lists finds them.
type chainIndex struct {
	layersByCM map[string][]int // client config layers by their ConfigMap
	meshInto   map[string][]int // mesh routes by each Service they apply to
	svcByName  map[string][]int
	svcByNS    map[string][]int
	loadsByNS  map[string][]int
	mounted    map[string]bool // ConfigMaps some workload mounts
	hosts      map[string]bool // hosts some route routes into
}

func newChainIndex(layers []manifestLayer, loads []workload, services []service) *chainIndex {
	x := &chainIndex{layersByCM: map[string][]int{}, meshInto: map[string][]int{}, svcByName: map[string][]int{},
		svcByNS: map[string][]int{}, loadsByNS: map[string][]int{}, mounted: map[string]bool{}, hosts: map[string]bool{}}
	for i, l := range layers {
		if l.cm != "" {
			x.layersByCM[l.cm] = append(x.layersByCM[l.cm], i)
		}
		x.hosts[l.host] = true
		if l.host != "" && l.mesh {
			for _, into := range l.into {
				if is := x.meshInto[into]; len(is) == 0 || is[len(is)-1] != i {
					x.meshInto[into] = append(is, i)
				}
			}
		}
	}
	for i, s := range services {
		x.svcByName[s.name] = append(x.svcByName[s.name], i)
		x.svcByNS[s.ns] = append(x.svcByNS[s.ns], i)
	}
	for i, w := range loads {
		x.loadsByNS[w.ns] = append(x.loadsByNS[w.ns], i)
		for _, cm := range w.configMaps {
			x.mounted[cm] = true
		}
	}
	return x
}

// configsOf are the layers of the client configs w mounts, in order.
func (x *chainIndex) configsOf(w workload) []int {
	var out []int
	for _, cm := range w.configMaps {
		out = append(out, x.layersByCM[cm]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
