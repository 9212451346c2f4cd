// Command worker-webhooks runs the webhooks role of Tidings' background work alone
// (ADDENDUM 26): the same process as cmd/worker with WORKER_ROLES=webhooks.
package main

import "tidings/worker"

func main() { worker.Main("worker-webhooks", worker.RoleWebhooks) }
