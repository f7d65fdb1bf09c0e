// Command retrystorm-full is retrystorm with every command linked in,
// those with heavy dependencies too (lab). The light retrystorm runs it
// for those commands; it can also be run directly, as retrystorm.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/retrystorm/retrystorm/internal/cli"
	"github.com/retrystorm/retrystorm/internal/cli/full"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, full.Heavy)
	stop()
	os.Exit(code)
}
