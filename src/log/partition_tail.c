/*-------------------------------------------------------------------------
 *
 * partition_tail.c
 *		A partition's tail, read from its active segment into its shared
 *		entry: where the next batch goes and what offset it gets.  Below
 *		the append protocol (partition.c), the readers' offsets
 *		(partition_offsets.c) and the rolls (partition_roll.c), which all
 *		load it before they look at it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/lwlock.h"
#include "utils/rel.h"

#include "store/segment.h"
#include "log/partition_internal.h"
#include "log/partition_tail.h"

/*
 * Read the tail of the active segment into the partition entry.  The caller
 * holds part->lock exclusively and has the segment open.
 */
void
MqPartitionLoadTail(MqPartition *part, Relation rel, int64 base_offset)
{
	MqSegmentTail tail;

	MqSegmentReadTail(rel, base_offset, &tail);
	part->active_relid = RelationGetRelid(rel);
	part->active_base = base_offset;
	if (!MqSegmentFirstTimestamp(rel, &part->active_since))
		part->active_since = NO_ACTIVE_SINCE;	/* empty: the first append sets it */
	part->end_lpos = tail.end_lpos;
	part->torn_lpos = tail.torn_lpos;
	part->next_offset = tail.next_offset;
	part->dirty = false;
	part->loaded = true;
	note_change(part);
}

/*
 * Load the partition's tail from rel if it is not known yet, or if an
 * append failed midway in this same segment.  A caller whose topic cache
 * is older than a roll passes the sealed segment: that never reloads.
 * Caller holds part->lock exclusively.
 */
void
MqPartitionEnsureLoaded(MqPartition *part, Relation rel, int64 base_offset)
{
	if (!part->loaded ||
		(part->dirty && part->active_relid == RelationGetRelid(rel)))
		MqPartitionLoadTail(part, rel, base_offset);
}

/*
 * Forget the partition's tail, so that its next use reads it from disk: a
 * restore (log/dump.c) writes the active segment below the append
 * protocol, holding AccessExclusiveLock on it, which every appender and
 * reader of the segment waits for before it loads the tail again.
 */
void
MqPartitionForgetTail(MqPartition *part)
{
	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	part->loaded = false;
	part->dirty = false;
	LWLockRelease(&part->lock);
}
