package testenv

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/store"
)

// PGProxy stands between a test's pool and PostgreSQL and can lose the
// answer of a COMMIT: armed, it hands the "commit" of the next transaction
// that ran a statement containing a given text to the server and closes
// that client connection without the server's answer. The transaction commits and the client sees a broken
// connection, as when PostgreSQL restarts or a backend is terminated
// between the two: the one write whose outcome the client cannot know.
type PGProxy struct {
	addr  string
	armed atomic.Pointer[string] // the text the transaction must have run
	lost  atomic.Int32
}

// DBBehindProxy returns a fresh, migrated database reached through a
// PGProxy.
func DBBehindProxy(t testing.TB) (*store.DB, *PGProxy) {
	t.Helper()
	_, dbURL := NewDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &PGProxy{addr: ln.Addr().String()}
	target := u.Host
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	u.Host = p.addr
	db, err := store.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, p
}

// LoseCommitOf arms the proxy for one COMMIT: that of the next transaction
// that runs a statement containing text.
func (p *PGProxy) LoseCommitOf(text string) { p.armed.Store(&text) }

// Lost counts the COMMITs whose answers were lost.
func (p *PGProxy) Lost() int { return int(p.lost.Load()) }

// serve relays one client connection. The server's messages are relayed
// one by one, so that from the COMMIT to lose on, they can be dropped: the
// client is cut once the server has answered that COMMIT (ReadyForQuery),
// which makes the loss certain (the transaction has committed) and the
// client's next look, on a new connection, find its rows.
func (p *PGProxy) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	var dropping atomic.Bool
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		defer client.Close() // the server hung up, or answered the lost COMMIT
		for {
			var head [5]byte
			if _, err := io.ReadFull(server, head[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
			if _, err := io.ReadFull(server, body); err != nil {
				return
			}
			if dropping.Load() {
				if head[0] == 'Z' {
					return
				}
				continue
			}
			if _, err := client.Write(append(head[:], body...)); err != nil {
				return
			}
		}
	}()
	// The startup message has no type byte: a length, then the rest.
	var n [4]byte
	if _, err := io.ReadFull(client, n[:]); err != nil {
		return
	}
	start := make([]byte, binary.BigEndian.Uint32(n[:])-4)
	if _, err := io.ReadFull(client, start); err != nil {
		return
	}
	if _, err := server.Write(append(n[:], start...)); err != nil {
		return
	}
	stmts := map[string]string{} // prepared statements of this connection, by name
	var ran []string             // the statements of the open transaction
	for {
		var head [5]byte // type, length (counting itself)
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		fields := bytes.Split(body, []byte{0})
		var q string // the statement this message runs, if any
		switch head[0] {
		case 'P': // Parse: statement name, query
			if len(fields) > 1 {
				stmts[string(fields[0])] = string(fields[1])
			}
		case 'B': // Bind: portal, statement name
			if len(fields) > 1 {
				q = stmts[string(fields[1])]
			}
		case 'Q':
			q = string(bytes.TrimRight(body, "\x00"))
		}
		commit := q != "" && strings.EqualFold(strings.TrimSpace(q), "commit")
		if commit && !dropping.Load() {
			want := p.armed.Load()
			if want != nil && slices.ContainsFunc(ran, func(q string) bool { return strings.Contains(q, *want) }) &&
				p.armed.CompareAndSwap(want, nil) {
				// From here on the server's answers never reach the client.
				dropping.Store(true)
				p.lost.Add(1)
			}
		}
		if _, err := server.Write(append(head[:], body...)); err != nil {
			return
		}
		if dropping.Load() && (head[0] == 'Q' || head[0] == 'S') {
			// The COMMIT is with the server (a simple query, or a pipeline
			// up to its Sync): wait for its answer, then the client is cut.
			select {
			case <-answered:
			case <-time.After(30 * time.Second):
			}
			return
		}
		switch {
		case commit:
			ran = ran[:0]
		case q != "":
			ran = append(ran, q)
		}
	}
}
