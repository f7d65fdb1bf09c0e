// Package full holds the commands of retrystorm whose dependencies the
// light cmd/retrystorm leaves out (the lab's Prometheus and protobuf, the
// importers' Envoy and Istio protobufs), for
// the companion binary cmd/retrystorm-full. Their entries, names, flags
// and help are in the command table of package cli, like every other
// command's; only the run functions are here.
package full

import "github.com/retrystorm/retrystorm/internal/cli"

// Heavy is every heavy command's run function, for cli.Main.
var Heavy = cli.Heavy{
	Lab:    runLab,
	Import: runImport,
	Check:  runCheck,
	Advise: runAdvise,
	Merge:  runMerge,
}
