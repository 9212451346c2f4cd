// Package apptest builds the services of internal/app for a test on its own
// database and Redis namespace (internal/testenv), filling in whatever the
// test leaves out, so tests assemble the service exactly as the binaries
// do.
package apptest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/internal/render"
	"tidings/internal/testenv"
)

// Config is the configuration of an empty environment (every default;
// EMAIL_PROVIDER outbox with its development tracking secret).
func Config(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.ArchiveDir = t.TempDir() // never ./var/archive beside the test
	return cfg
}

// Renderer is a renderer whose time budget does not trip on a loaded test
// machine.
var Renderer = render.NewRenderer(render.RendererOptions{MaxRenderTime: time.Minute})

// Services builds app.New(in) with defaults for what in leaves nil: the
// configuration (Config), a database and a Redis namespace of the test's
// own, a quiet logger and Renderer. Provider, Tasks and MJML stay as given
// (nil: no provider, no queue, no compiler).
func Services(t testing.TB, in app.Infra) *app.Services {
	t.Helper()
	if in.Config == nil {
		in.Config = Config(t)
	}
	if in.DB == nil {
		in.DB = testenv.DB(t)
	}
	if in.ImportDB == nil {
		// Imports on a pool of their own, as app.Open gives them.
		share, err := in.DB.Share(context.Background(), in.Config.ImportDBConns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(share.Close)
		in.ImportDB = share
	}
	if in.Redis == nil {
		in.Redis, in.RedisPrefix = testenv.Redis(t)
	}
	if in.Log == nil {
		in.Log = slog.New(slog.DiscardHandler)
	}
	if in.Renderer == nil {
		in.Renderer = Renderer
	}
	s, err := app.New(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
