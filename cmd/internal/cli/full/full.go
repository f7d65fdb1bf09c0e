// Package full holds the commands of retrystorm whose dependencies the
// light cmd/retrystorm leaves out (the lab's Prometheus and protobuf, the
// importers' Envoy and Istio protobufs), for
// the companion binary cmd/retrystorm-full. Their entries, names, flags
// and help are in the command table of package cli, like every other
// command's; only the run functions are here: the lab's in this package,
// import's, check's, advise's and merge's in internal/configcmd (check's
// calibration of its base from --prometheus here, check.go).
package full

import (
	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/cmd/internal/configcmd"
)

// Heavy is every heavy command's run function, for cli.Main.
var Heavy = cli.Heavy{
	Lab:    runLab,
	Import: configcmd.Import,
	Check:  runCheck,
	Advise: configcmd.Advise,
	Merge:  configcmd.Merge,

	Calibrate: runCalibrate,
	Replay:    runReplay,
}
