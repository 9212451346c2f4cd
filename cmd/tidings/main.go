// Command tidings is the command-line client of the Tidings API
// (internal/cli): tidings import FILE streams a CSV or NDJSON file to
// POST /api/contacts/import and follows the import to its end.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"tidings/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
