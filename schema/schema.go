// Package schema holds the numbered SQL migrations. They are embedded in the
// binaries, applied by cmd/api at start, and are sqlc's schema source.
package schema

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
