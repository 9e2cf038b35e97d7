/*-------------------------------------------------------------------------
 *
 * partition_extend.c
 *		Extending active segments ahead of their appenders, the maintenance
 *		worker's side (doc/architecture.md, "Segment growth"): the appender
 *		asks under its lock (want_extension in partition.c), the roll-ahead
 *		pass extends (mqlog._extend_ahead()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "store/segment.h"
#include "log/partition_extend.h"
#include "log/partition_internal.h"

/* ------------------------------------------------------------------------
 * Extension ahead of the appender (the appender asks: want_extension in
 * partition.c)
 * ------------------------------------------------------------------------ */

/* pages per hold of the extension lock, so that an appender that must extend waits little */
#define MQ_EXTEND_STEP_BLOCKS	64

/* a request MqPartitionsExtendAhead found, to serve without the hash lock */
typedef struct ExtendWanted
{
	MqPartitionKey key;
	Oid			relid;
} ExtendWanted;

/*
 * Extend the active segments whose appenders asked (want_extension), for
 * the roll-ahead pass (mqlog._extend_ahead()); returns the pages added.
 * A segment is extended in steps of MQ_EXTEND_STEP_BLOCKS, and no further
 * once its partition has rolled past it.  It is locked only if that can be
 * done at once: an appender cutting a torn tail holds AccessExclusiveLock,
 * and the request is asked again.
 */
int64
MqPartitionsExtendAhead(Oid catalog_relid)
{
	List	   *todo = NIL;
	ListCell   *lc;
	HASH_SEQ_STATUS seq;
	MqPartition *part;
	int64		added = 0;

	LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_SHARED);
	hash_seq_init(&seq, mqlog_partition_hash);
	while ((part = hash_seq_search(&seq)) != NULL)
	{
		if (part->key.dboid != MyDatabaseId || part->key.catalog_relid != catalog_relid)
			continue;
		LWLockAcquire(&part->lock, LW_SHARED);
		if (part->extend_asked != 0 && part->extend_relid == part->active_relid)
		{
			ExtendWanted *w = palloc(sizeof(ExtendWanted));

			w->key = part->key;
			w->relid = part->extend_relid;
			todo = lappend(todo, w);
		}
		LWLockRelease(&part->lock);
	}
	LWLockRelease(mqlog_partition_shmem->hash_lock);

	foreach(lc, todo)
	{
		ExtendWanted *w = lfirst(lc);
		Relation	rel;

		if (!ConditionalLockRelationOid(w->relid, AccessShareLock))
			continue;
		rel = try_table_open(w->relid, NoLock);
		if (rel == NULL)
		{
			UnlockRelationOid(w->relid, AccessShareLock);
			continue;
		}

		/*
		 * Found again under the lock on one of its topic's segments: a drop
		 * of the topic, which removes the entry, waits for that lock.
		 */
		LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_SHARED);
		part = hash_search(mqlog_partition_hash, &w->key, HASH_FIND, NULL);
		LWLockRelease(mqlog_partition_shmem->hash_lock);
		while (part != NULL)
		{
			BlockNumber target;
			BlockNumber before;

			/*
			 * The target is read again each step: the appender raises it
			 * while a request is outstanding.  The request is done only
			 * when, under the partition lock, the segment is as long as
			 * the target then, so that no raise is lost.
			 */
			CHECK_FOR_INTERRUPTS();
			LWLockAcquire(&part->lock, LW_EXCLUSIVE);
			target = (part->active_relid == w->relid && part->extend_relid == w->relid) ?
				part->extend_to : 0;
			before = RelationGetNumberOfBlocks(rel);
			if (before >= target)
			{
				if (part->extend_relid == w->relid)
					part->extend_asked = 0;
				LWLockRelease(&part->lock);
				break;
			}
			LWLockRelease(&part->lock);
			added += MqSegmentExtend(rel, target, MQ_EXTEND_STEP_BLOCKS) - before;
		}
		table_close(rel, AccessShareLock);
	}
	list_free_deep(todo);
	return added;
}
