package worker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"tidings/internal/tasks"
)

// Role is one kind of background work with asynq queues of its own
// (ADDENDUM 26). A process serves the queues of its roles and no others,
// so a role without a process leaves its tasks waiting in its queues
// (asynqmon and the queue gauges show them) and touches nothing else.
type Role string

// The roles, and what each runs.
const (
	// RoleSends: due sequence steps and scheduled sends (the dispatch),
	// broadcast starts and their recipients.
	RoleSends Role = "sends"
	// RoleSegments: segment computes, and live segments' queue, ticks and
	// reconciles (RunLive).
	RoleSegments Role = "segments"
	// RoleDomains: domain checks.
	RoleDomains Role = "domains"
	// RoleWebhooks: provider webhook ingestion (and parked events), outbound
	// webhook delivery (and the LISTEN that wakes it).
	RoleWebhooks Role = "webhooks"
	// RoleImports: contact imports.
	RoleImports Role = "imports"
	// RoleMaintenance: the periodic scheduler, every sweep (each only
	// enqueues into the queues of the role it re-feeds, so the work of a
	// role with no process waits in that role's queues), event retention,
	// pruning, and the drain of the queues of earlier versions.
	RoleMaintenance Role = tasks.RoleMaintenance
)

// AllRoles are every role, in the order logs and /healthz name them.
var AllRoles = []Role{RoleSends, RoleSegments, RoleDomains, RoleWebhooks, RoleImports, RoleMaintenance}

// roleQueues are each role's queues with their asynq weights. The weights
// only matter where one process serves several roles (WORKER_ROLES=all):
// a free slot takes the sends' queue six times as often as the
// segments', so a long compute queue does not hold back due sends.
var roleQueues = map[Role]map[string]int{
	RoleSends:    {tasks.QueueSends: 6},
	RoleSegments: {tasks.QueueSegments: 1},
	RoleDomains:  {tasks.QueueDomains: 1},
	RoleWebhooks: {tasks.QueueWebhooks: 3, tasks.QueueWebhooksOutbound: 3},
	RoleImports:  {tasks.QueueImports: 2},
	// The sweeps are short and keep every other role fed: their queue
	// weighs as the webhooks'. The legacy queues keep their old weights
	// (the ".sweep" ones as the sweeps): what an upgrade left there (or a
	// process of the old version writes during a rolling upgrade) runs
	// here, with the handler of its type, until they are empty.
	RoleMaintenance: {tasks.QueueMaintenance: 3, tasks.QueueCritical: 6, tasks.QueueDefault: 3, tasks.QueueLow: 1,
		tasks.QueueSendsSweepLegacy: 3, tasks.QueueWebhooksSweepLegacy: 3, tasks.QueueImportsSweepLegacy: 3},
}

// ParseRoles reads WORKER_ROLES: "all" (or nothing) for every role, or a
// comma-separated list of role names. An unknown name is an error, so a
// typo refuses to start rather than leaving a role without a process.
func ParseRoles(s string) ([]Role, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return AllRoles, nil
	}
	seen := map[Role]bool{}
	for name := range strings.SplitSeq(s, ",") {
		r := Role(strings.TrimSpace(name))
		if !slices.Contains(AllRoles, r) {
			return nil, fmt.Errorf("WORKER_ROLES: unknown role %q (want all, or a comma-separated list of %s)",
				r, joinRoles(AllRoles))
		}
		seen[r] = true
	}
	var out []Role
	for _, r := range AllRoles {
		if seen[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

// Queues are the asynq queues, with their weights, that a process of
// roles serves.
func Queues(roles []Role) map[string]int {
	out := map[string]int{}
	for _, r := range roles {
		maps.Copy(out, roleQueues[r])
	}
	return out
}

// Has reports whether roles include r.
func Has(roles []Role, r Role) bool { return slices.Contains(roles, r) }

func joinRoles(roles []Role) string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return strings.Join(names, ",")
}
