package config

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// NewLogger returns the structured logger of a process: JSON on stderr, or
// text for humans with LOG_FORMAT=text. LOG_LEVEL (debug, info, warn, error;
// default info) sets the level; any other value is an error, so a typo
// stops the process instead of silently logging at the wrong level.
func NewLogger(service string) (*slog.Logger, error) {
	var level slog.Level
	if v := os.Getenv("LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("LOG_LEVEL: %q is not one of debug, info, warn, error", v)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch f := os.Getenv("LOG_FORMAT"); strings.ToLower(f) {
	case "", "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	default:
		return nil, fmt.Errorf("LOG_FORMAT: %q is not json or text", f)
	}
	return slog.New(h).With("service", service), nil
}
