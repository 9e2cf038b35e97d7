/*-------------------------------------------------------------------------
 *
 * partition_offsets.c
 *		What readers may see of a partition (MqPartitionOffsets): its log
 *		end and last stable offset, and for a replicated partition the high
 *		watermark, computed on the leader from its followers' progress and
 *		the ISR; the fences a leader move puts on this node's appends.
 *
 * The LSO is the lowest in-flight offset (partition.c).  For a replicated
 * topic the high watermark is Kafka's, and the LSO is never above it, so
 * that no reader sees what a failover could lose.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/timestamp.h"

#include "store/segment.h"
#include "log/partition_internal.h"
#include "log/partition_offsets.h"
#include "log/topic.h"

static MqPartitionFirstUseHook first_use_hook = NULL;

/*
 * One module sets it, once, when mqlog is loaded: log/kafka_holds.c, which
 * puts back the holds of the Kafka transactions open at the start, so
 * that the partition does not call into it.
 */
void
MqPartitionSetFirstUseHook(MqPartitionFirstUseHook hook)
{
	Assert(first_use_hook == NULL || first_use_hook == hook);
	first_use_hook = hook;
}

/*
 * Before every read of the partition's LSO and every append: the hook,
 * until it has put the holds back in this partition's entry (the flag
 * only ever turns true, so it is read without the lock; a stale false
 * only calls the hook, which looks again under it).
 */
void
MqPartitionFirstUse(MqTopic *topic, int32 partition)
{
	MqPartition *part;

	if (first_use_hook == NULL)
		return;
	part = MqTopicPartition(topic, partition);
	if (((volatile MqPartition *) part)->kafka_holds_checked)
		return;
	first_use_hook(topic, partition);
}

/*
 * The partition's last stable offset and high watermark.  On a standby the
 * tail is read from disk each time (replay moves it) and the LSO is -1:
 * readers then find it batch by batch.
 */
void
MqPartitionLogEnd(MqTopic *topic, int32 partition, int64 *lso, int64 *hw)
{
	const MqSegmentRef *seg;
	MqPartition *part;
	Relation	rel;

	/* no segment yet (made after its topic, see topic.c): nothing was written */
	if (MqTopicPartitionPending(topic, partition))
	{
		*hw = 0;
		*lso = RecoveryInProgress() ? -1 : 0;
		return;
	}
	/* open Kafka transactions' holds back before the first reader */
	MqPartitionFirstUse(topic, partition);
	seg = MqTopicActiveSegment(topic, partition);
	part = MqTopicPartition(topic, partition);

	rel = try_table_open(seg->relid, AccessShareLock);
	if (rel == NULL)
	{
		/*
		 * The caller's chain is older than a roll and the retention that
		 * followed it; the current chain names the active segment.  (The
		 * caller's MqTopic stays valid to the end of the transaction.)
		 */
		MqTopic    *fresh = MqTopicRefresh(topic->name);

		seg = MqTopicActiveSegment(fresh, partition);
		rel = try_table_open(seg->relid, AccessShareLock);
		if (rel == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("topic \"%s\" was dropped", topic->name)));
	}
	if (RecoveryInProgress())
	{
		MqSegmentTail tail;

		MqSegmentReadTail(rel, seg->base_offset, &tail);
		*hw = tail.next_offset;
		*lso = -1;
	}
	else
	{
		LWLockAcquire(&part->lock, LW_SHARED);
		if (!part->loaded || part->dirty)
		{
			LWLockRelease(&part->lock);
			LWLockAcquire(&part->lock, LW_EXCLUSIVE);
			MqPartitionEnsureLoaded(part, rel, seg->base_offset);
		}
		*lso = MqPartitionLso(part, hw);
		LWLockRelease(&part->lock);
	}
	table_close(rel, AccessShareLock);
}

/*
 * The partition's append position in relid, if that is its active segment
 * as this server's shared state knows it, else 0: a position within the
 * log for a reader to start looking for its end from (MqReaderInit).
 * Stale by the time it is used, which only makes it a lower bound.
 */
uint64
MqPartitionKnownEnd(MqPartition *part, Oid relid)
{
	uint64		end = 0;

	LWLockAcquire(&part->lock, LW_SHARED);
	if (part->loaded && !part->dirty && part->active_relid == relid)
		end = part->end_lpos;
	LWLockRelease(&part->lock);
	return end;
}

/*
 * What readers may see of a partition: its LSO and high watermark.  For a
 * single-node topic the high watermark is the log end offset.  For a
 * replicated one it is Kafka's: on the leader the lowest log end offset
 * among the in-sync replicas, moving only while they are at least
 * min.insync.replicas; on a follower what the leader last told it.  The
 * LSO is never above it, so no reader sees what a failover could lose.
 */
void
MqPartitionOffsets(MqTopic *topic, int32 partition, int64 *lso, int64 *hw)
{
	MqPartition *part;
	int64		leo;
	int64		replicated;

	MqPartitionLogEnd(topic, partition, lso, &leo);
	*hw = leo;
	if (topic->replicas == NULL)
		return;
	if (*lso < 0)
	{
		/* a hot standby: what the primary last checkpointed (see logiter.c) */
		*hw = Min(leo, topic->replicas[partition].hw_checkpoint);
		return;
	}
	part = MqTopicPartition(topic, partition);
	/* after a restart, from where it was last checkpointed */
	if ((int64) pg_atomic_read_u64(&part->high_watermark) < topic->replicas[partition].hw_checkpoint)
		(void) MqPartitionAdvanceHighWatermark(part, topic->replicas[partition].hw_checkpoint);
	if (MqTopicLeadsHere(topic, partition))
		replicated = MqPartitionUpdateHighWatermark(part, &topic->replicas[partition],
													topic->min_insync_replicas);
	else
		replicated = (int64) pg_atomic_read_u64(&part->high_watermark);
	*hw = Min(replicated, leo);
	*lso = Min(*lso, *hw);
}

/* ------------------------------------------------------------------------
 * Replicated partitions: the high watermark, the followers' progress it is
 * computed from, the ISR, and the fences of a leader move
 * ------------------------------------------------------------------------ */

/*
 * On the leader: the lowest log end offset among the in-sync replicas, if
 * each has reported and they are at least min_isr; the high watermark
 * moves up to it.  Reads shared memory only (a committing transaction
 * waiting for acks=all calls it).  Returns the high watermark.
 */
int64
MqPartitionUpdateHighWatermark(MqPartition *part, const MqReplicaInfo *ri, int min_isr)
{
	int64		candidate;
	bool		known;
	bool		shared;
	int			nisr;

	LWLockAcquire(&part->lock, LW_SHARED);
	/* the ISR round's own view, when it is of this leadership (see above) */
	shared = part->nisr > 0 && part->isr_epoch == ri->leader_epoch;
	nisr = shared ? part->nisr : ri->nisr;
	known = nisr >= min_isr && ri->leader != NULL;
	candidate = part->next_offset;
	for (int i = 0; known && i < nisr; i++)
	{
		const char *member = shared ? part->isr[i] : ri->isr[i];
		bool		found = strcmp(member, ri->leader) == 0;

		for (int f = 0; !found && f < part->nfollowers; f++)
			if (strcmp(part->followers[f].node, member) == 0 &&
				part->followers[f].epoch == ri->leader_epoch)
			{
				candidate = Min(candidate, part->followers[f].leo);
				found = true;
			}
		known = found;			/* an in-sync replica that has not reported */
	}
	LWLockRelease(&part->lock);
	if (known)
		return MqPartitionAdvanceHighWatermark(part, candidate);
	return (int64) pg_atomic_read_u64(&part->high_watermark);
}

/*
 * The leader's ISR round: the in-sync replicas (char *) of the partition at
 * leader epoch epoch, as the high watermark is to count them from now on.
 */
void
MqPartitionSetIsr(MqPartition *part, int32 epoch, List *names)
{
	ListCell   *lc;

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	part->isr_epoch = epoch;
	part->nisr = 0;
	foreach(lc, names)
		if (part->nisr < MQ_MAX_REPLICATION_FACTOR)
			strlcpy(part->isr[part->nisr++], lfirst(lc), NAMEDATALEN);
	LWLockRelease(&part->lock);
	/* acks=all waiters look again: a shrink may end their wait */
	ConditionVariableBroadcast(&part->cv);
}

/*
 * Whether this leadership's own ISR round (MqPartitionSetIsr) has left
 * fewer than min_isr in-sync replicas: an acks=all wait can no longer be
 * met, as Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND says.  False while the
 * round has not spoken for leader epoch epoch.
 */
bool
MqPartitionIsrBelow(MqPartition *part, int32 epoch, int min_isr)
{
	bool		below;

	LWLockAcquire(&part->lock, LW_SHARED);
	below = part->nisr > 0 && part->isr_epoch == epoch && part->nisr < min_isr;
	LWLockRelease(&part->lock);
	return below;
}

/*
 * Move the high watermark up to hw (never down); waiters on the partition
 * and polls are woken when it moves.  Returns the high watermark.
 */
int64
MqPartitionAdvanceHighWatermark(MqPartition *part, int64 hw)
{
	uint64		cur = pg_atomic_read_u64(&part->high_watermark);

	while ((int64) cur < hw)
	{
		if (pg_atomic_compare_exchange_u64(&part->high_watermark, &cur, (uint64) hw))
		{
			note_change(part);
			ConditionVariableBroadcast(&part->cv);
			ConditionVariableBroadcast(&mqlog_partition_shmem->data_cv);
			return hw;
		}
	}
	return (int64) cur;
}

/*
 * A follower's log end offset, as it reported it.  It is caught up (Kafka's
 * lastCaughtUpTime) when it has reached the leader's last stable offset as
 * of now, or as of its previous report.
 */
void
MqPartitionReportFollower(MqPartition *part, const char *node, int64 leo, int32 epoch)
{
	TimestampTz now = GetCurrentTimestamp();
	MqFollowerProgress *f = NULL;

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	for (int i = 0; i < part->nfollowers; i++)
		if (strcmp(part->followers[i].node, node) == 0)
			f = &part->followers[i];
	if (f == NULL && part->nfollowers < MQ_MAX_FOLLOWERS)
	{
		f = &part->followers[part->nfollowers++];
		memset(f, 0, sizeof(*f));
		strlcpy(f->node, node, sizeof(f->node));
	}
	if (f != NULL && f->epoch != epoch)
	{
		/* reported to an earlier leadership of this node: start afresh */
		memset(f, 0, sizeof(*f));
		strlcpy(f->node, node, sizeof(f->node));
		f->epoch = epoch;
	}
	if (f != NULL)
	{
		/*
		 * Against the decided end (the LSO), not the log end: a follower
		 * writes a batch only once its transaction has ended, so an open
		 * transaction here must not push every follower out of the ISR.
		 */
		int64		decided = MqPartitionLso(part, NULL);

		if (leo >= decided)
			f->caught_up = now;
		else if (f->last_report != 0 && leo >= f->leader_leo)
			f->caught_up = Max(f->caught_up, f->last_report);
		/* the latest report, even if lower: the follower truncated */
		f->leo = leo;
		f->last_report = now;
		f->leader_leo = decided;
	}
	LWLockRelease(&part->lock);
	note_change(part);
	ConditionVariableBroadcast(&part->cv);
}

/* what the follower reported last; false if it never did */
bool
MqPartitionFollowerProgress(MqPartition *part, const char *node, MqFollowerProgress *out)
{
	bool		found = false;

	LWLockAcquire(&part->lock, LW_SHARED);
	for (int i = 0; i < part->nfollowers; i++)
		if (strcmp(part->followers[i].node, node) == 0)
		{
			*out = part->followers[i];
			found = true;
		}
	LWLockRelease(&part->lock);
	return found;
}

ConditionVariable *
MqPartitionCV(MqPartition *part)
{
	return &part->cv;
}

/*
 * A leader move (sql/elect.c) from epoch from to epoch to: refuse this
 * node's own appends under epochs below to.  False if another live backend
 * is moving the partition.  A fence left by a move whose outcome was never
 * known is replaced: the caller has just seen in etcd that the leader is
 * unchanged.
 */
bool
MqPartitionFence(MqPartition *part, int32 from, int32 to)
{
	bool		ok = true;

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	if (part->mover_pid != 0 && part->mover_pid != MyProcPid && kill(part->mover_pid, 0) == 0)
		ok = false;
	else
	{
		part->min_leader_epoch = to;
		part->mover_pid = MyProcPid;
	}
	LWLockRelease(&part->lock);
	(void) from;
	return ok;
}

/* the move is over; lift: appends under epoch are welcome again */
void
MqPartitionUnfence(MqPartition *part, int32 epoch, bool lift)
{
	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	if (part->mover_pid == MyProcPid)
	{
		part->mover_pid = 0;
		if (lift)
			part->min_leader_epoch = epoch;
	}
	LWLockRelease(&part->lock);
}
