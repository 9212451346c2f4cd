package provider_test

import (
	"net"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tidings/internal/config"
	"tidings/internal/provider"
	"tidings/internal/provider/conformance"
	"tidings/internal/provider/providertest"
)

func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func build(t *testing.T, name string, edit func(*config.Config)) provider.Provider {
	t.Helper()
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	p, err := provider.NewNamed(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Every provider in this package passes the shared conformance test (SES
// runs it in its own package).
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Subject{Name: provider.NameSendGrid,
		Accepting: func(t *testing.T) provider.Provider {
			sg := providertest.NewSendGrid(t)
			return build(t, provider.NameSendGrid, sg.Configure)
		},
		Unreachable: func(t *testing.T) provider.Provider {
			return build(t, provider.NameSendGrid, func(c *config.Config) {
				c.SendgridAPIKey, c.SendgridAPIURL = providertest.FakeAPIKey, "http://"+closedAddr(t)
			})
		}})
	conformance.Run(t, conformance.Subject{Name: provider.NameOutbox,
		Accepting: func(t *testing.T) provider.Provider {
			return build(t, provider.NameOutbox, func(c *config.Config) { c.OutboxDir = t.TempDir() })
		},
		Unreachable: func(t *testing.T) provider.Provider {
			dir := filepath.Join(t.TempDir(), "outbox")
			p := build(t, provider.NameOutbox, func(c *config.Config) { c.OutboxDir = dir })
			if err := os.RemoveAll(dir); err != nil { // the directory is gone: nothing can be written
				t.Fatal(err)
			}
			return p
		}})
	conformance.Run(t, conformance.Subject{Name: provider.NameSMTP,
		Accepting: func(t *testing.T) provider.Provider {
			return build(t, provider.NameSMTP, func(c *config.Config) { c.SMTPURL = "smtp://" + acceptingSMTP(t) + "?tls=none" })
		},
		Unreachable: func(t *testing.T) provider.Provider {
			return build(t, provider.NameSMTP, func(c *config.Config) { c.SMTPURL = "smtp://" + closedAddr(t) + "?tls=none" })
		}})
}

// acceptingSMTP is a relay that takes every message, scripted on a bare
// listener (the internal tests have a full go-smtp server).
func acceptingSMTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSMTP(c)
		}
	}()
	return ln.Addr().String()
}

func serveSMTP(c net.Conn) {
	defer c.Close()
	r := textproto.NewConn(c)
	_ = r.PrintfLine("220 fake ESMTP")
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		switch cmd := strings.ToUpper(strings.SplitN(line, " ", 2)[0]); cmd {
		case "EHLO", "HELO":
			_ = r.PrintfLine("250 fake")
		case "DATA":
			_ = r.PrintfLine("354 go on")
			if _, err := r.ReadDotBytes(); err != nil {
				return
			}
			_ = r.PrintfLine("250 2.0.0 queued")
		case "QUIT":
			_ = r.PrintfLine("221 bye")
			return
		default:
			_ = r.PrintfLine("250 ok")
		}
	}
}
