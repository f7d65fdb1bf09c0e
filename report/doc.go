// Package report turns experiment results into things people look at:
// terminal tables that fit 80 columns, SVG charts, and an HTML report that
// needs nothing but itself (no script, font or style sheet from elsewhere).
//
// It knows nothing of the simulator: experiments hand it tables, charts,
// claims and notes.
package report
