// Command worker-sends runs the sends role of Tidings' background work alone
// (ADDENDUM 26): the same process as cmd/worker with WORKER_ROLES=sends.
package main

import "tidings/worker"

func main() { worker.Main("worker-sends", worker.RoleSends) }
