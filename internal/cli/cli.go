// Package cli is the tidings command: a client of the Tidings API for the
// operations a person runs from a shell. Its first command is import,
// which streams a CSV or NDJSON file to POST /api/contacts/import and
// follows the import to its end. cmd/tidings wires it to the process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Environment variables the command reads; flags win over them.
const (
	EnvURL    = "TIDINGS_URL"
	EnvAPIKey = "TIDINGS_API_KEY"
)

// DefaultURL is the API's address when neither -url nor TIDINGS_URL says.
const DefaultURL = "http://localhost:8080"

const usage = `usage: tidings <command> [flags]

commands:
  import FILE   import contacts from FILE (.csv, .ndjson or .jsonl) and follow the import;
                every failed row is written beside FILE (FILE.errors.csv)

exit codes: 0 every row imported (duplicates are warnings), 1 the import or a
request failed, 2 usage, 3 the import completed but rows failed

environment:
  TIDINGS_URL       the API's base URL (default http://localhost:8080)
  TIDINGS_API_KEY   an API key of the tenant (tdk_...)
`

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the import failed, or a request did
	ExitUsage = 2
	// ExitRowsFailed: the import completed, but some rows were not
	// imported (duplicates alone are warnings: exit 0).
	ExitRowsFailed = 3
)

// Run runs the command in args (without the program name) and returns its
// exit code. getenv reads the environment; out gets the result, errOut the
// progress bars and errors.
func Run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(errOut, usage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	switch args[0] {
	case "import":
		return runImport(ctx, args[1:], getenv, out, errOut)
	}
	fmt.Fprintf(errOut, "tidings: unknown command %q\n\n%s", args[0], usage)
	return ExitUsage
}

func runImport(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: tidings import [flags] FILE\n\nflags:\n")
		fs.PrintDefaults()
	}
	baseURL := fs.String("url", "", "the API's base URL (default $"+EnvURL+", else "+DefaultURL+")")
	apiKey := fs.String("api-key", "", "an API key of the tenant (default $"+EnvAPIKey+")")
	contentType := fs.String("type", "", "the file's format: csv, ndjson or jsonl (default: from the file's extension)")
	interval := fs.Duration("interval", 2*time.Second, "how often to ask for the import's progress (each ask spends one request of the tenant's rate limit)")
	quiet := fs.Bool("quiet", false, "no progress bars")
	errorsFile := fs.String("errors", "", "where to write every failed row and warning as CSV when there are any (default: beside FILE, contacts.csv giving contacts.errors.csv; \"none\": not written)")
	// Flags may follow the file (tidings import contacts.csv -quiet).
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return ExitOK
			}
			return ExitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return ExitUsage
	}
	im := Importer{
		BaseURL:  strings.TrimRight(first(*baseURL, getenv(EnvURL), DefaultURL), "/"),
		APIKey:   first(*apiKey, getenv(EnvAPIKey)),
		HTTP:     &http.Client{},
		Interval: *interval,
		Progress: errOut,
	}
	if *quiet {
		im.Progress = nil
	}
	if im.APIKey == "" {
		fmt.Fprintf(errOut, "tidings: no API key: set %s or pass -api-key\n", EnvAPIKey)
		return ExitUsage
	}
	if *interval <= 0 {
		fmt.Fprintln(errOut, "tidings: -interval must be positive")
		return ExitUsage
	}
	ct, err := ContentType(files[0], *contentType)
	if err != nil {
		fmt.Fprintln(errOut, "tidings:", err)
		return ExitUsage
	}
	res, err := im.Import(ctx, files[0], ct)
	if err != nil {
		fmt.Fprintln(errOut, "tidings:", err)
		return ExitError
	}
	var failures *Failures
	if res.Failed+res.Duplicates > 0 {
		// The progress resource keeps the first 100 failed rows, which the
		// plan's limit may fill: the counts by kind and the first rows of
		// every other kind come from all of them.
		if failures, err = im.ReadFailures(ctx, res.ImportID); err != nil {
			fmt.Fprintln(errOut, "tidings: reading the failed rows:", err)
			failures = nil
		}
		path := *errorsFile
		if path == "" {
			path = FailuresPath(files[0])
		}
		if failures != nil && path != "none" {
			if err := im.SaveFailures(ctx, res.ImportID, path); err != nil {
				fmt.Fprintln(errOut, "tidings: writing the failed rows:", err)
			} else {
				failures.File = path
			}
		}
	}
	res.Print(out, failures)
	switch {
	case res.Status != "completed":
		return ExitError
	case res.Failed > 0:
		return ExitRowsFailed
	}
	return ExitOK
}

// first is the first non-empty string.
func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
