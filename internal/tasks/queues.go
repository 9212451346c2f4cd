package tasks

import (
	"context"
	"errors"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// allQueuesKey is asynq's set of queue names (its internal base.AllQueues).
// The Inspector and asynqmon know a queue only through it.
const allQueuesKey = "asynq:queues"

// TaskInfo is Inspector.GetTaskInfo that survives a Redis flush.
//
// An asynq client adds a queue to asynq's set of queues only at its first
// enqueue to that queue (rdb.queuesPublished), so after a flush the queues
// a running process already knew stay missing from the set: the tasks are
// written and served, but the Inspector answers ErrQueueNotFound for every
// one of them until the process restarts. The sweeps and the periodic
// scheduler free a dead task's id through the Inspector, so without this a
// flush stopped every sweep for good (a fault run found rows claimed for
// minutes after the flush, their reclaim never enqueued). A queue we ask
// about is one of ours and exists: put it back in the set and ask again.
// rdb may be nil (no repair).
func TaskInfo(ctx context.Context, ins *asynq.Inspector, rdb redis.UniversalClient, queue, id string) (*asynq.TaskInfo, error) {
	info, err := ins.GetTaskInfo(queue, id)
	if !errors.Is(err, asynq.ErrQueueNotFound) || rdb == nil {
		return info, err
	}
	if err := rdb.SAdd(ctx, allQueuesKey, queue).Err(); err != nil {
		return nil, err
	}
	return ins.GetTaskInfo(queue, id)
}

// PublishQueues puts queues in asynq's set of queues, where asynqmon and
// the queue gauges find them; after a Redis flush, nothing else does until
// each process restarts (see TaskInfo). It is one SADD.
func PublishQueues(ctx context.Context, rdb redis.UniversalClient, queues []string) error {
	if rdb == nil || len(queues) == 0 {
		return nil
	}
	members := make([]any, len(queues))
	for i, q := range queues {
		members[i] = q
	}
	return rdb.SAdd(ctx, allQueuesKey, members...).Err()
}
