// Package logging builds the structured logger both binaries use.
package logging

import (
	"log/slog"
	"os"
	"strings"
)

// New returns a JSON slog logger writing to stderr; LOG_LEVEL (debug, info,
// warn, error) sets the level, LOG_FORMAT=text switches to text for humans.
func New(service string) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(os.Getenv("LOG_LEVEL")))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, opts)
	if strings.EqualFold(os.Getenv("LOG_FORMAT"), "text") {
		h = slog.NewTextHandler(os.Stderr, opts)
	}
	return slog.New(h).With("service", service)
}
