/*-------------------------------------------------------------------------
 *
 * partition_roll.c
 *		Segment rolling, in one place: the appender's wait for a spare, the
 *		switch into a spare that appender and worker share, the spares'
 *		shared state (which partitions want one, where one began), the
 *		worker's rolls (an idle partition into its spare, and its own roll
 *		into a new segment), and the segment switches a transaction applies
 *		when it commits.  The roll decision, which the appender makes for
 *		every batch, is inline in partition_internal.h.
 *
 * Rolling at segment.bytes and segment.ms.  The maintenance worker
 * prepares the next segment of a partition ahead (when the active one is
 * half full, and right after every roll): it creates the relation, lists
 * it in the catalog with base offset MQ_SPARE_BASE and, when that commits,
 * publishes it here as the spare (MqPartitionPublishSpareAtCommit).  The
 * appender whose batch is due to roll (roll_due) takes the spare under the
 * partition lock, which is all a roll is: shared state
 * (MqPartitionTakeSpare, called from MqPartitionAppend in partition.c).
 * The worker then records in the catalog where the spare began and seals
 * the old segment (its next pass, which the roll asks for at once); until
 * then the topic cache places the spare from shared memory, or after a
 * restart from its first page (MqPartitionSpareBase).
 *
 * If no spare is ready when a roll is due, the appender waits for one up
 * to MQ_SPARE_WAIT_MS (once per roll, not per batch), then appends to the
 * active segment after all: a segment outgrows segment.bytes only when the
 * worker cannot keep up.
 *
 * The worker rolls too, where no appender does: an idle partition that
 * segment.ms made due goes into its spare as an appender's would
 * (MqPartitionRollToSpare), and with no spare (mqlog.roll_ahead off) the
 * worker's own roll seals the active segment and starts a new one at the
 * partition's next offset (MqPartitionRollLock, MqPartitionRollBegin, then
 * MqPartitionSwitchAtCommit), so producers never wait on DDL of their own.
 * To seal a segment no append may be in flight in it: the worker takes an
 * ExclusiveLock on the segment only if it is free at once (a producer
 * transaction holds RowExclusiveLock until it ends, so a busy segment is
 * simply tried again on the next pass), and that lock keeps new producers
 * out until the rolling transaction commits.  At commit the partition's
 * shared state switches to the new segment; producers then notice that
 * their cached chain is stale and reload it.
 *
 * The order of a maintenance pass (which partitions to roll, prepare,
 * record) is the install script's PL/pgSQL (mq_run_maintenance,
 * mqlog._roll_ahead), through the SQL entry points of sql/segments.c,
 * which call here.  The functions take a partition and relations, not a
 * topic: the topic cache (topic.c) places spares through this file, so it
 * lies below the cache, and its callers resolve topic ids.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "store/segment.h"
#include "log/partition_internal.h"
#include "log/partition_roll.h"
#include "log/partition_signal.h"

/* ------------------------------------------------------------------------
 * The appender's roll (the decision: roll_due in partition_internal.h)
 * ------------------------------------------------------------------------ */

#define MQ_SPARE_WAIT_MS	1000

/*
 * No spare for a due roll: ask the worker and wait a little, with the
 * partition lock released (returns true: try again), unless this roll has
 * waited long enough already (false: append where we are).
 */
bool
MqPartitionWaitForSpare(MqPartition *part)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!mqlog_roll_ahead)
		return false;
	if (part->spare_wanted == 0)
		part->spare_wanted = now;
	if (TimestampDifferenceExceeds(part->spare_wanted, now, MQ_SPARE_WAIT_MS))
		return false;
	LWLockRelease(&part->lock);
	MqRequestMaintenance();
	(void) ConditionVariableTimedSleep(&part->cv, 50, PG_WAIT_EXTENSION);
	ConditionVariableCancelSleep();
	return true;
}

/* ------------------------------------------------------------------------
 * Spare segments
 * ------------------------------------------------------------------------ */
/*
 * May a roll go into this spare: has nothing ever been written to it?
 * Not "has it no pages": a roll whose first batch never reached the WAL
 * leaves the spare with a page and no batch.  The append extends the
 * relation by an all-zero page at once (extend_for_append writes it to
 * the file), while the APPEND record that initializes the page waits in
 * the WAL buffers for the producer's commit; a crash in between keeps the
 * page and loses the record, and pages the worker extended ahead of the
 * appender (MqSegmentExtend) stay as well.  Such pages are not part of the
 * log (segment.c: initialized pages form a prefix, and none is), the spare
 * is still the partition's spare after the restart (its first page names
 * no offset, see MqPartitionSpareBase), and a roll takes it as an append
 * takes pages extended ahead.  Refused instead, as they once were, such a
 * spare was never written again: its partition never rolled into a spare
 * again, nor was another prepared for it, since it had one.  The caller
 * holds the partition lock and a lock on the spare: nobody else writes it.
 */
static bool
spare_empty(Relation spare)
{
	return RelationGetNumberOfBlocks(spare) == 0 || MqSegmentUsedBlocks(spare) == 0;
}

/* Caller holds part->lock exclusively. */
static void
switch_to_spare(MqPartition *part, Oid spare)
{
	part->active_relid = spare;
	part->active_base = part->next_offset;
	part->end_lpos = 0;
	part->torn_lpos = 0;
	part->active_since = NO_ACTIVE_SINCE;
	part->spare_relid = InvalidOid;
	part->roll_unrecorded = true;
	part->dirty = false;
}

/*
 * The appender's roll (its batch is due: roll_due), holding part->lock
 * exclusively and a RowExclusiveLock on the partition's spare: take the
 * spare if it is empty (true: append there).  One that is not empty is
 * forgotten: never write there.
 */
bool
MqPartitionTakeSpare(MqPartition *part, Relation spare)
{
	Assert(RelationGetRelid(spare) == part->spare_relid);
	if (spare_empty(spare))
	{
		switch_to_spare(part, RelationGetRelid(spare));
		return true;
	}
	part->spare_relid = InvalidOid;
	return false;
}

/*
 * Where the spare relid began, if the partition has rolled into it: shared
 * memory knows while the server runs; after a restart its first page does.
 * -1 if it is still unused.
 */
int64
MqPartitionSpareBase(MqPartition *part, Oid relid)
{
	int64		base = -1;
	bool		known;
	Relation	rel;

	LWLockAcquire(&part->lock, LW_SHARED);
	known = part->loaded;
	if (known && part->active_relid == relid)
		base = part->active_base;
	LWLockRelease(&part->lock);
	if (known)
		return base;
	rel = try_table_open(relid, AccessShareLock);
	if (rel == NULL)
		return -1;
	base = MqSegmentFirstOffset(rel);
	table_close(rel, AccessShareLock);
	return base;
}


/*
 * The partitions of this database's topics (catalog catalog_relid) whose
 * appenders asked for a spare or rolled into one unrecorded: what a
 * roll-ahead pass works on (mqlog._roll_ahead()).
 */
List *
MqPartitionsWantingSpares(Oid catalog_relid)
{
	List	   *result = NIL;
	HASH_SEQ_STATUS seq;
	MqPartition *part;

	LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_SHARED);
	hash_seq_init(&seq, mqlog_partition_hash);
	while ((part = hash_seq_search(&seq)) != NULL)
	{
		bool		wants;

		if (part->key.dboid != MyDatabaseId || part->key.catalog_relid != catalog_relid)
			continue;
		LWLockAcquire(&part->lock, LW_SHARED);
		wants = part->roll_unrecorded ||
			(part->spare_wanted != 0 && !OidIsValid(part->spare_relid));
		LWLockRelease(&part->lock);
		if (wants)
			result = lappend(result, list_make2_int(part->key.topic_id, part->key.partition));
	}
	LWLockRelease(mqlog_partition_shmem->hash_lock);
	return result;
}

/* ------------------------------------------------------------------------
 * The worker's rolls, where no appender rolls
 * ------------------------------------------------------------------------ */

/*
 * The worker's roll of a partition that segment.ms made due while nobody
 * appends (retention needs its segments sealed): take the spare spare_relid
 * as an appender would, out of the active segment active_relid that starts
 * at active_base (the caller's chain, freshly loaded so that its spare is
 * the catalog's latest).  Returns the new base offset, or -1 if there is
 * nothing to roll, no usable spare, or the caller's chain is stale.
 */
int64
MqPartitionRollToSpare(MqPartition *part, Oid active_relid, int64 active_base, Oid spare_relid)
{
	Relation	active,
				spare;
	int64		base = -1;

	if (!OidIsValid(spare_relid))
		return -1;
	active = try_table_open(active_relid, RowExclusiveLock);
	if (active == NULL)
		return -1;
	spare = try_table_open(spare_relid, RowExclusiveLock);
	if (spare == NULL)
	{
		table_close(active, NoLock);
		return -1;
	}

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	MqPartitionEnsureLoaded(part, active, active_base);
	if (part->active_relid == active_relid && part->end_lpos > 0 &&
		spare_empty(spare))
	{
		switch_to_spare(part, spare_relid);
		base = part->active_base;
	}
	LWLockRelease(&part->lock);
	if (base >= 0)
		MqlogCatalogChanged();

	table_close(spare, NoLock);
	table_close(active, NoLock);
	return base;
}

/*
 * The worker's own roll, first step: lock the segment relid against
 * appends if no producer is inside it (false: one is, try again on the
 * next pass).  Held to the end of the rolling transaction.  The caller
 * looks the topic up only once this is held, so that the chain it reads
 * is the latest.
 */
bool
MqPartitionRollLock(Oid relid)
{
	return ConditionalLockRelationOid(relid, ExclusiveLock);
}

/*
 * The worker's own roll, second step (the caller holds MqPartitionRollLock
 * and found relid, starting at base_offset, the partition's active segment
 * in its chain): where the next segment starts, the partition's next
 * offset, or -1 if the roll must wait (a transaction has appended there and
 * not finished, or the segment is no longer active).  The new segment is
 * switched to when the rolling transaction commits
 * (MqPartitionSwitchAtCommit).
 */
int64
MqPartitionRollBegin(MqPartition *part, Oid relid, int64 base_offset)
{
	Relation	rel = table_open(relid, NoLock);
	int64		next = -1;

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	MqPartitionEnsureLoaded(part, rel, base_offset);
	if (part->active_relid == relid && dlist_is_empty(&part->inflight))
		next = part->next_offset;
	LWLockRelease(&part->lock);
	table_close(rel, NoLock);
	return next;
}

/* ------------------------------------------------------------------------
 * Segment switches applied when the transaction that made them commits:
 * the worker's own roll, a spare it prepared, a follower's truncation
 * ------------------------------------------------------------------------ */

/*
 * Segment switches made by this transaction (the worker's roll), and spare
 * segments it prepared (base_offset MQ_SPARE_BASE), applied when it commits.
 */
typedef struct PendingSwitch
{
	MqPartition *part;
	Oid			relid;
	int64		base_offset;
	bool		truncate;		/* the log ends at base_offset, not after */
} PendingSwitch;

static List *pending_switches = NIL;

static void
queue_switch(MqPartition *part, Oid relid, int64 base_offset, bool truncate)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	PendingSwitch *ps = palloc(sizeof(PendingSwitch));

	ps->part = part;
	ps->relid = relid;
	ps->base_offset = base_offset;
	ps->truncate = truncate;
	pending_switches = lappend(pending_switches, ps);
	MemoryContextSwitchTo(old);
}

void
MqPartitionSwitchAtCommit(MqPartition *part, Oid relid, int64 base_offset)
{
	queue_switch(part, relid, base_offset, false);
}

/*
 * A follower's log truncated to base_offset, where relid starts: when the
 * transaction commits, the log ends there, and the high watermark is no
 * higher (records above it are gone from this node).
 */
void
MqPartitionTruncateAtCommit(MqPartition *part, Oid relid, int64 base_offset)
{
	queue_switch(part, relid, base_offset, true);
}

/* Publish a spare segment when this transaction (which made it) commits. */
void
MqPartitionPublishSpareAtCommit(MqPartition *part, Oid relid)
{
	MqPartitionSwitchAtCommit(part, relid, MQ_SPARE_BASE);
}

/*
 * At the end of the transaction (the partition's transaction callback,
 * partition.c): apply the queued switches if it committed, forget them
 * either way.
 */
void
MqPartitionSwitchesAtXactEnd(bool commit)
{
	ListCell   *lc;

	foreach(lc, pending_switches)
	{
		PendingSwitch *ps = lfirst(lc);

		/* a segment prepared ahead: appenders may roll into it from now on */
		if (commit && ps->base_offset == MQ_SPARE_BASE)
		{
			LWLockAcquire(&ps->part->lock, LW_EXCLUSIVE);
			if (ps->part->active_relid != ps->relid)
			{
				ps->part->spare_relid = ps->relid;
				ps->part->spare_wanted = 0;
				ps->part->roll_unrecorded = false;
			}
			LWLockRelease(&ps->part->lock);
			ConditionVariableBroadcast(&ps->part->cv);
		}

		/*
		 * The worker's own roll.  A producer that saw the new segment in
		 * the catalog before this callback ran may have switched already
		 * (and appended): then there is nothing to do.
		 */
		else if (commit)
		{
			LWLockAcquire(&ps->part->lock, LW_EXCLUSIVE);
			if (ps->part->active_relid == ps->relid)
			{
				LWLockRelease(&ps->part->lock);
				pfree(ps);
				continue;
			}
			ps->part->active_relid = ps->relid;
			ps->part->active_base = ps->base_offset;
			ps->part->end_lpos = 0;
			ps->part->torn_lpos = 0;
			ps->part->active_since = NO_ACTIVE_SINCE;
			ps->part->next_offset = ps->truncate ? ps->base_offset :
				Max(ps->part->next_offset, ps->base_offset);
			ps->part->dirty = false;
			ps->part->loaded = true;
			if (ps->truncate &&
				(int64) pg_atomic_read_u64(&ps->part->high_watermark) > ps->base_offset)
				pg_atomic_write_u64(&ps->part->high_watermark, (uint64) ps->base_offset);
			LWLockRelease(&ps->part->lock);
			note_change(ps->part);
		}
		pfree(ps);
	}
	list_free(pending_switches);
	pending_switches = NIL;
}
