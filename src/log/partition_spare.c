/*-------------------------------------------------------------------------
 *
 * partition_spare.c
 *		The maintenance worker's side of rolling (the appender's is
 *		partition.c's, whose "Rolling at segment.bytes and segment.ms" tells
 *		the whole story): the partitions that want a spare segment, where a
 *		spare began, the worker's roll into a spare; and the switch into a
 *		spare that appender and worker share.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "store/segment.h"
#include "log/partition_internal.h"
#include "log/partition_signal.h"
#include "log/partition_spare.h"

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
bool
MqPartitionSpareEmpty(Relation spare)
{
	return RelationGetNumberOfBlocks(spare) == 0 || MqSegmentUsedBlocks(spare) == 0;
}

/* Caller holds part->lock exclusively. */
void
MqPartitionSwitchToSpare(MqPartition *part, Oid spare)
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
 * The worker's roll of a partition that segment.ms made due while nobody
 * appends (retention needs its segments sealed): take the spare as an
 * appender would.  Returns the new base offset, or -1 if there is nothing
 * to roll, no usable spare, or the caller's chain is stale.
 */
int64
MqPartitionRollToSpare(MqPartition *part, Relation active, int64 active_base, Relation spare)
{
	int64		base = -1;

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	MqPartitionEnsureLoaded(part, active, active_base);
	if (part->active_relid == RelationGetRelid(active) && part->end_lpos > 0 &&
		MqPartitionSpareEmpty(spare))
	{
		MqPartitionSwitchToSpare(part, RelationGetRelid(spare));
		base = part->active_base;
	}
	LWLockRelease(&part->lock);
	if (base >= 0)
		MqlogCatalogChanged();
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
