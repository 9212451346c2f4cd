// Command worker-segments runs the segments role of Tidings' background work alone
// (ADDENDUM 26): the same process as cmd/worker with WORKER_ROLES=segments.
package main

import "tidings/worker"

func main() { worker.Main("worker-segments", worker.RoleSegments) }
