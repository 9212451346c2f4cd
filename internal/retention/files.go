package retention

import (
	"bufio"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Files is where archives are kept: one object per tenant and month, that
// grows by appends. The database records each object's committed size;
// anything past it is what an interrupted run wrote, and is cut off by the
// next append. An S3-compatible store would keep each append as an object
// of its own under the month's prefix (docs/operations.md).
type Files interface {
	// Append cuts the month's object to size, appends what write writes,
	// makes it durable, and returns the new size.
	Append(tenantID, month string, size int64, write func(io.Writer) error) (int64, error)
	// Open reads the first size bytes of the month's object.
	Open(tenantID, month string, size int64) (io.ReadCloser, error)
}

// Dir keeps archives as files under a directory:
// <dir>/<tenant, hex>/<YYYY-MM>.ndjson.gz. The tenant id is the identity
// provider's organisation id, any string: hex keeps it a single safe path
// element.
type Dir string

func (d Dir) path(tenantID, month string) string {
	return filepath.Join(string(d), hex.EncodeToString([]byte(tenantID)), month+".ndjson.gz")
}

// Append implements Files: the data and, for a new file, its directory
// entry are synced before it returns.
func (d Dir) Append(tenantID, month string, size int64, write func(io.Writer) error) (int64, error) {
	p := d.path(tenantID, month)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return 0, err
	}
	_, statErr := os.Stat(p)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return 0, err
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	if err := write(w); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if created { // the file's entry, and the tenant directory's
		for _, dir := range []string{filepath.Dir(p), string(d)} {
			if err := syncDir(dir); err != nil {
				return 0, err
			}
		}
	}
	return f.Seek(0, io.SeekCurrent)
}

// Open implements Files.
func (d Dir) Open(tenantID, month string, size int64) (io.ReadCloser, error) {
	f, err := os.Open(d.path(tenantID, month))
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, size), f}, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
