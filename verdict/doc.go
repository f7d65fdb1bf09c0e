// Package verdict is retrystorm's verdict engine: it judges a user's retry
// policies and proposes better ones.
//
//   - [Check] runs each fleet through an envelope of faults (capacity
//     dips, error bursts, stalls, outages, one bad replica) at several base
//     loads and seeds, and says whether it stays collapsed or amplifies the
//     load in the region the user calls realistic.
//   - [CheckStack] judges layers as one call chain, with the closed form of
//     their amplification beside the simulator's.
//   - [Advise] searches policies around the user's for the one that does
//     best over the same envelope; check and advise build every cell the
//     same way, so they agree on every cell they share.
//   - Shards of all three, for several machines, and their merge
//     ([MergeFiles]); the outputs a CI reads ([WriteSARIF], [WriteJUnit])
//     and a baseline to compare with ([ReadBaseline]).
//
// Every run is the simulator's (package sim, through package grid); where
// the analytic model (package model) answers a cell instead, the result
// says so.
package verdict
