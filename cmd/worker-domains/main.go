// Command worker-domains runs the domains role of Tidings' background work alone
// (ADDENDUM 26): the same process as cmd/worker with WORKER_ROLES=domains.
package main

import "tidings/worker"

func main() { worker.Main("worker-domains", worker.RoleDomains) }
