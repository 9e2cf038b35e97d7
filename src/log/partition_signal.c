/*-------------------------------------------------------------------------
 *
 * partition_signal.c
 *		What the partitions tell other processes: the catalog generation
 *		(topic caches reload when it moves), the DDL announcements waiting
 *		consumers give way to, the data condition variable, the change
 *		counters parked readers compare, and the maintenance launcher's
 *		wake-ups; with the parts of them a transaction applies at its end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"

#include "log/partition_internal.h"
#include "log/partition_signal.h"

static bool catalog_bump_at_commit = false;
static bool maintenance_at_commit = false;

/* ------------------------------------------------------------------------
 * Catalog generation: lets every backend know its topic cache is stale.
 * ------------------------------------------------------------------------ */

uint64
MqlogCatalogGeneration(void)
{
	return pg_atomic_read_u64(&mqlog_partition_shmem->catalog_generation);
}

/*
 * Bump now, so that this backend reloads at once, and again at commit, so
 * that others reload once the change is visible to them.
 */
void
MqlogCatalogChanged(void)
{
	pg_atomic_fetch_add_u64(&mqlog_partition_shmem->catalog_generation, 1);
	catalog_bump_at_commit = true;
}

/*
 * A catalog change made by this transaction (MqlogCatalogChanged) moves
 * the generation again at its end: at commit so that others reload once
 * the change is visible to them, at abort so that this backend drops what
 * it cached of the change.
 */
void
MqCatalogAtXactEnd(bool commit)
{
	if (catalog_bump_at_commit)
	{
		pg_atomic_fetch_add_u64(&mqlog_partition_shmem->catalog_generation, 1);
		/* waiting polls look again: a topic of theirs may have grown */
		if (commit)
			ConditionVariableBroadcast(&mqlog_partition_shmem->data_cv);
	}
	catalog_bump_at_commit = false;
}

/* a catalog change (a grant, a config) rolled back: reload */
void
MqCatalogAtSubxactAbort(void)
{
	if (catalog_bump_at_commit)
		pg_atomic_fetch_add_u64(&mqlog_partition_shmem->catalog_generation, 1);
}

/*
 * DDL that will need locks waiting consumers hold (mq_drop_topic of a
 * topic, or 0: DROP EXTENSION) says so before it asks for them, and wakes
 * the consumers, which give way (groups/consumer.c).  A slot per database
 * hash: another database that shares the slot only causes a spurious
 * check.
 */
void
MqAnnounceDdl(int32 topic_id)
{
	int			slot = MyDatabaseId % MQ_DDL_SLOTS;

	pg_atomic_write_u32(&mqlog_partition_shmem->ddl_topic[slot], (uint32) topic_id);
	pg_atomic_write_u32(&mqlog_partition_shmem->ddl_db[slot], (uint32) MyDatabaseId);
	pg_atomic_fetch_add_u64(&mqlog_partition_shmem->ddl_count[slot], 1);
	ConditionVariableBroadcast(&mqlog_partition_shmem->data_cv);
}

/*
 * The count of announcements in this database's slot, and the last one's
 * topic (-1 when it came from another database sharing the slot).
 */
uint64
MqDdlCount(int32 *topic_id)
{
	int			slot = MyDatabaseId % MQ_DDL_SLOTS;
	uint64		count = pg_atomic_read_u64(&mqlog_partition_shmem->ddl_count[slot]);

	pg_memory_barrier();
	if (topic_id)
		*topic_id = (pg_atomic_read_u32(&mqlog_partition_shmem->ddl_db[slot]) == (uint32) MyDatabaseId) ?
			(int32) pg_atomic_read_u32(&mqlog_partition_shmem->ddl_topic[slot]) : -1;
	return count;
}

/* Waiting consumers sleep on this; every commit that produced wakes them. */
ConditionVariable *
MqDataArrivedCV(void)
{
	return &mqlog_partition_shmem->data_cv;
}

/* ------------------------------------------------------------------------
 * Change counters
 *
 * A reader that waits for data across transactions (the Kafka listener's
 * parked Fetches) notes a partition's counter before it reads the
 * partition's offsets, and looks again only once the counter moved.  The
 * counter moves, after the change and before the data condition variable
 * is broadcast, whenever the partition's log end, last stable offset or
 * high watermark may have moved: an append, the release of an in-flight
 * entry (commit, abort, backend exit), a high watermark that advances, a
 * follower's report (the leader's high watermark is computed from them
 * when read), a roll or truncation, a tail read from disk.  Each move also
 * bumps the counter of the partition's topic slot, a hash of (database,
 * catalog, topic) into MQ_CHANGE_SLOTS counters, so that a reader of many
 * partitions first compares one counter per topic: a topic that shares
 * the slot costs a spurious pass over the partitions, never a missed
 * change.  Catalog changes (DDL, grants, leaders, log start) are the
 * catalog generation's, not these counters'.
 * ------------------------------------------------------------------------ */

uint64
MqPartitionChanges(MqPartition *part)
{
	return pg_atomic_read_u64(&part->changes);
}

uint32
MqPartitionChangeSlot(MqPartition *part)
{
	return change_slot(&part->key);
}

uint64
MqChangeSlotCount(uint32 slot)
{
	Assert(slot < MQ_CHANGE_SLOTS);
	return pg_atomic_read_u64(&mqlog_partition_shmem->topic_changes[slot]);
}

/* ------------------------------------------------------------------------
 * Waking the maintenance launcher
 * ------------------------------------------------------------------------ */

void
MqSetMaintenanceLatch(struct Latch *latch)
{
	mqlog_partition_shmem->maintenance_latch = latch;
}

/* Ask for a maintenance pass in this database now (a roll was due or done). */
void
MqRequestMaintenance(void)
{
	struct Latch *latch = mqlog_partition_shmem->maintenance_latch;

	pg_atomic_write_u32(&mqlog_partition_shmem->maintenance_db, MyDatabaseId);
	if (latch)
		SetLatch(latch);
}

/*
 * Ask for it when this transaction commits: what the pass is to do (the
 * first segments of a topic's partitions) is invisible to it before.
 */
void
MqRequestMaintenanceAtCommit(void)
{
	maintenance_at_commit = true;
}

/* the pass MqRequestMaintenanceAtCommit asked for */
void
MqMaintenanceAtXactEnd(bool commit)
{
	if (commit && maintenance_at_commit)
		MqRequestMaintenance();
	maintenance_at_commit = false;
}

/* Keep a request the launcher could not serve yet, unless a newer one came. */
void
MqRepostMaintenanceRequest(Oid dboid)
{
	uint32		expected = InvalidOid;

	(void) pg_atomic_compare_exchange_u32(&mqlog_partition_shmem->maintenance_db, &expected, dboid);
}

/* The database that asked, if any; the request is consumed. */
Oid
MqTakeMaintenanceRequest(void)
{
	return (Oid) pg_atomic_exchange_u32(&mqlog_partition_shmem->maintenance_db, InvalidOid);
}
