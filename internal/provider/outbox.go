package provider

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// outbox writes each message as an RFC 5322 .eml file: the development
// provider (`make run`), which never counts as connected. Any mail client
// opens the files, and net/mail parses them.
type outbox struct {
	dir string
	now func() time.Time
}

// outboxTimeFormat starts every file name, so that a plain `ls` sorts the
// files by time and the newest is last: 20261123T203012.123Z-snd_xxx.eml.
const outboxTimeFormat = "20060102T150405.000Z"

func newOutbox(dir string, o options) (*outbox, error) {
	if dir == "" {
		return nil, fmt.Errorf("OUTBOX_DIR is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("OUTBOX_DIR: %w", err)
	}
	return &outbox{dir: dir, now: o.now}, nil
}

// Name implements Provider.
func (p *outbox) Name() string { return NameOutbox }

// Send writes msg to a temporary file and renames it into place, so a
// reader polling the directory never sees a half-written message. Files
// are private to the user (0600, os.CreateTemp's mode): they hold other
// people's mail. It returns the Message-ID (without angle brackets).
func (p *outbox) Send(ctx context.Context, msg Message) (string, error) {
	msg, err := validate(msg)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", &Error{Provider: NameOutbox, Transient: true, Err: err}
	}
	now := p.now().UTC()
	id := messageIDFor(msg)
	m := buildMIME(msg, id, now)

	// The temporary name ends in .tmp, so globs for *.eml skip it.
	tmp, err := os.CreateTemp(p.dir, "."+msg.SendID+"-*.tmp")
	if err != nil {
		return "", p.fail(err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	w := bufio.NewWriter(tmp)
	if _, err := m.WriteTo(w); err != nil {
		tmp.Close()
		return "", p.fail(err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return "", p.fail(err)
	}
	if err := tmp.Close(); err != nil {
		return "", p.fail(err)
	}
	name := filepath.Join(p.dir, now.Format(outboxTimeFormat)+"-"+msg.SendID+".eml")
	if err := os.Rename(tmp.Name(), name); err != nil {
		return "", p.fail(err)
	}
	return id, nil
}

// fail reports a file system error as temporary: a full disk or a missing
// directory may be fixed while the task waits.
func (p *outbox) fail(err error) error {
	return &Error{Provider: NameOutbox, Transient: true, Err: err, Down: true}
}
