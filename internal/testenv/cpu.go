package testenv

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// CPU is the CPU time (user and system) of this process, and the sum over
// every PostgreSQL process of the machine (/proc/<pid>/stat of each process
// named postgres: the backends of the pool and the server's own; other
// databases' too, on a shared machine). Benchmarks report the difference
// over a run per operation.
func CPU(b testing.TB) (self, pg time.Duration) {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		raw, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(raw)
		open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || end < open || st[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(st[end+1:])
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		pg += time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
	}
	return self, pg
}
