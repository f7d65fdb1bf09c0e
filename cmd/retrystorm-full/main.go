// Command retrystorm-full is retrystorm with every command linked in,
// those with heavy dependencies too (lab). The light retrystorm runs it
// for those commands; it can also be run directly, as retrystorm.
package main

import (
	"os"

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/cmd/internal/cli/full"
)

func main() {
	os.Exit(cli.Launch(full.Heavy))
}
