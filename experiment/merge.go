package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Merged is the shards of one sweep, check or advise put together:
// exactly one field is set, the same result one run on one machine gives.
type Merged struct {
	Sweep  *Outcome
	Check  *CheckResult
	Advise *AdviseResult
	Lab    *Outcome // the shards of a lab run (see MergeLab)
}

// Merge reads the JSON results of every shard of one sweep, check or
// advise (as --shard i/n --json writes them) and puts them together.
func Merge(parts [][]byte) (*Merged, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge: no shard results given")
	}
	kind := ""
	for i, p := range parts {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(p, &keys); err != nil {
			return nil, fmt.Errorf("merge: result %d is not a shard's JSON: %v", i+1, err)
		}
		k := ""
		switch {
		case keys["lab_shard"] != nil:
			k = "lab"
		case keys["candidates"] != nil:
			k = "advise"
		case keys["faults"] != nil && keys["fleets"] != nil:
			k = "check"
		case keys["policies"] != nil && keys["shard"] != nil:
			k = "sweep"
		default:
			return nil, fmt.Errorf("merge: result %d is not the JSON of a sweep, check or advise shard", i+1)
		}
		if kind != "" && k != kind {
			return nil, fmt.Errorf("merge: result %d is a %s, the first a %s", i+1, k, kind)
		}
		kind = k
	}
	switch kind {
	case "lab":
		o, err := MergeLab(parts)
		return &Merged{Lab: o}, err
	case "sweep":
		var ps []sweepJSON
		for _, p := range parts {
			var js sweepJSON
			if err := json.Unmarshal(p, &js); err != nil {
				return nil, fmt.Errorf("merge: %v", err)
			}
			ps = append(ps, js)
		}
		o, err := mergeSweep(ps)
		return &Merged{Sweep: o}, err
	case "check":
		var ps []*CheckResult
		for _, p := range parts {
			var r CheckResult
			if err := json.Unmarshal(p, &r); err != nil {
				return nil, fmt.Errorf("merge: %v", err)
			}
			ps = append(ps, &r)
		}
		r, err := MergeCheck(ps)
		return &Merged{Check: r}, err
	}
	var ps []*AdviseResult
	for _, p := range parts {
		var r AdviseResult
		if err := json.Unmarshal(p, &r); err != nil {
			return nil, fmt.Errorf("merge: %v", err)
		}
		ps = append(ps, &r)
	}
	r, err := MergeAdvise(ps)
	return &Merged{Advise: r}, err
}
