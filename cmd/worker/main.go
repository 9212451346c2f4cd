// Command worker runs Tidings' background work: the roles WORKER_ROLES
// names (default all; ADDENDUM 26), each role's asynq queues, the periodic
// scheduler with the maintenance role, and the admin listener (asynqmon,
// health, metrics). It only wires: worker.Main is the process every worker
// binary runs.
package main

import "tidings/worker"

func main() { worker.Main("worker") }
