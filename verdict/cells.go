package verdict

import "errors"

// worstOfSeeds is a map of the worst seed per cell: never recovered if
// any seed never recovered, else the slowest recovery; and how many seeds
// never recovered. Check's maps and advise's evidence both use it.
func worstOfSeeds(seeds [][][]CheckCell) ([][]CheckCell, [][]int) {
	cells := make([][]CheckCell, len(seeds[0]))
	never := make([][]int, len(seeds[0]))
	for f := range cells {
		cells[f] = make([]CheckCell, len(seeds[0][f]))
		never[f] = make([]int, len(seeds[0][f]))
		for l := range cells[f] {
			w := seeds[0][f][l]
			for s, seed := range seeds {
				x := seed[f][l]
				if x.Ran && !x.Recovered {
					never[f][l]++
				}
				if s > 0 && (!x.Recovered && w.Recovered || x.Recovered == w.Recovered && x.RecoveryTicks > w.RecoveryTicks) {
					w = x
				}
			}
			cells[f][l] = w
		}
	}
	return cells, never
}

// newCells makes an empty map of faults × loads.
func newCells(faults, loads int) [][]CheckCell {
	c := make([][]CheckCell, faults)
	for i := range c {
		c[i] = make([]CheckCell, loads)
	}
	return c
}

var errTwice = errors.New("was run by two shards")

// mergeCells copies the cells src ran into dst.
func mergeCells(dst, src [][]CheckCell) error {
	if len(src) != len(dst) {
		return errors.New("has another envelope")
	}
	for f, row := range src {
		if len(row) != len(dst[f]) {
			return errors.New("has another envelope")
		}
		for l, c := range row {
			if !c.Ran {
				continue
			}
			if dst[f][l].Ran {
				return errTwice
			}
			dst[f][l] = c
		}
	}
	return nil
}

// complete reports whether every cell of the faults judged ran.
func complete(cells [][]CheckCell, judged []bool) bool {
	for fi, row := range cells {
		if fi < len(judged) && !judged[fi] {
			continue
		}
		for _, c := range row {
			if !c.Ran {
				return false
			}
		}
	}
	return true
}

// newSeedCells makes an empty set of maps: seeds × faults × loads.
func newSeedCells(seeds, faults, loads int) [][][]CheckCell {
	c := make([][][]CheckCell, seeds)
	for s := range c {
		c[s] = newCells(faults, loads)
	}
	return c
}
