package mjml

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stats describes the pool's processes at one moment.
type Stats struct {
	// Running is the number of live worker processes; less than the pool size
	// while a dead one is being replaced.
	Running int
	// Restarts counts processes started to replace dead ones.
	Restarts uint64
	// RSSBytes is the resident memory of all running workers.
	RSSBytes int64
	// Processes lists the running workers.
	Processes []ProcessStats
	// Version is the mjml npm package version the workers loaded.
	Version string
}

// ProcessStats describes one worker process.
type ProcessStats struct {
	PID int
	// RSSBytes is VmRSS from /proc/<pid>/status; 0 where that is unavailable
	// (not Linux, or the process just exited).
	RSSBytes int64
}

// Stats reports the running processes and their memory.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	procs := make([]*process, 0, len(p.procs))
	for _, proc := range p.procs {
		if proc != nil {
			procs = append(procs, proc)
		}
	}
	p.mu.Unlock()

	s := Stats{Running: len(procs), Restarts: p.restarts.Load()}
	for _, proc := range procs {
		rss, _ := readRSS(proc.pid)
		s.Processes = append(s.Processes, ProcessStats{PID: proc.pid, RSSBytes: rss})
		s.RSSBytes += rss
		s.Version = proc.version
	}
	return s
}

// readRSS reads VmRSS (reported in kB) from /proc/<pid>/status.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
