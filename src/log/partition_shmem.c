/*-------------------------------------------------------------------------
 *
 * partition_shmem.c
 *		The partitions' shared memory: its size and initialization, the
 *		hash of partition entries (MqPartitionGet) and the pool of in-flight
 *		entries, and how much of them is in use (mqlog.shared_memory).
 *
 * One area, "mqlog", holds the shared counters and the in-flight pool
 * (MqShared); one hash, "mqlog partitions", holds an entry per partition
 * that has been produced to or read since the server started, up to
 * mqlog.max_partitions.  The entries' fields are partition_internal.h's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "log/partition_internal.h"
#include "log/partition_shmem.h"

MqShared   *mqlog_partition_shmem = NULL;
HTAB	   *mqlog_partition_hash = NULL;

static Size
pool_entries(void)
{
	return (Size) MaxBackends * mqlog_max_inflight;
}

static Size
shared_size(void)
{
	return add_size(offsetof(MqShared, pool), mul_size(pool_entries(), sizeof(MqInflight)));
}

/*
 * A warning that shared memory is sized too small for the catalog
 * (workers/maintenance.c) is due at most every ten minutes, server-wide.
 */
#define MQ_SIZING_WARN_MS	(10 * 60 * 1000)

bool
MqSizingWarningDue(void)
{
	uint64		last = pg_atomic_read_u64(&mqlog_partition_shmem->sizing_warned_at);
	TimestampTz now = GetCurrentTimestamp();

	if (last != 0 && !TimestampDifferenceExceeds((TimestampTz) last, now, MQ_SIZING_WARN_MS))
		return false;
	return pg_atomic_compare_exchange_u64(&mqlog_partition_shmem->sizing_warned_at, &last, (uint64) now);
}

/* the in-flight pool (mqlog.shared_memory) */
Size
MqInflightPoolSize(void)
{
	return mul_size(pool_entries(), sizeof(MqInflight));
}

/*
 * Partition entries in use now, server-wide, and in-flight entries taken
 * (mqlog.shared_memory).
 */
int64
MqPartitionsInUse(int64 *inflight)
{
	int64		n;
	int64		free_entries = 0;
	dlist_iter	it;

	LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_SHARED);
	n = hash_get_num_entries(mqlog_partition_hash);
	LWLockRelease(mqlog_partition_shmem->hash_lock);
	SpinLockAcquire(&mqlog_partition_shmem->free_lock);
	dlist_foreach(it, &mqlog_partition_shmem->free_list)
		free_entries++;
	SpinLockRelease(&mqlog_partition_shmem->free_lock);
	*inflight = (int64) pool_entries() - free_entries;
	return n;
}

/* What the partition state needs in shared memory (mqlog.c sums it up). */
Size
MqPartitionShmemSize(void)
{
	return add_size(shared_size(),
					hash_estimate_size(mqlog_max_partitions, sizeof(MqPartition)));
}

/* Called with AddinShmemInitLock held. */
void
MqPartitionShmemInit(void)
{
	bool		found;
	HASHCTL		info;

	mqlog_partition_shmem = ShmemInitStruct("mqlog", shared_size(), &found);
	if (!found)
	{
		mqlog_partition_shmem->hash_lock = &(GetNamedLWLockTranche("mqlog"))->lock;
		mqlog_partition_shmem->part_tranche = LWLockNewTrancheId();
		pg_atomic_init_u64(&mqlog_partition_shmem->catalog_generation, 1);
		for (int i = 0; i < MQ_DDL_SLOTS; i++)
		{
			pg_atomic_init_u64(&mqlog_partition_shmem->ddl_count[i], 0);
			pg_atomic_init_u32(&mqlog_partition_shmem->ddl_topic[i], 0);
			pg_atomic_init_u32(&mqlog_partition_shmem->ddl_db[i], 0);
		}
		for (int i = 0; i < MQ_CHANGE_SLOTS; i++)
			pg_atomic_init_u64(&mqlog_partition_shmem->topic_changes[i], 0);
		ConditionVariableInit(&mqlog_partition_shmem->data_cv);
		mqlog_partition_shmem->maintenance_latch = NULL;
		pg_atomic_init_u32(&mqlog_partition_shmem->maintenance_db, InvalidOid);
		SpinLockInit(&mqlog_partition_shmem->free_lock);
		dlist_init(&mqlog_partition_shmem->free_list);
		for (Size i = 0; i < pool_entries(); i++)
			dlist_push_tail(&mqlog_partition_shmem->free_list, &mqlog_partition_shmem->pool[i].node);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(MqPartitionKey);
	info.entrysize = sizeof(MqPartition);
	mqlog_partition_hash = ShmemInitHash("mqlog partitions", mqlog_max_partitions, mqlog_max_partitions,
							  &info, HASH_ELEM | HASH_BLOBS);
}

/* Called after AddinShmemInitLock is released, in every process. */
void
MqPartitionRegisterTranche(void)
{
	LWLockRegisterTranche(mqlog_partition_shmem->part_tranche, "mqlog_partition");
}

/* ------------------------------------------------------------------------
 * Partition entries
 * ------------------------------------------------------------------------ */

MqPartition *
MqPartitionGet(Oid catalog_relid, int32 topic_id, int32 partition)
{
	MqPartitionKey key;
	MqPartition *part;
	bool		found;

	if (mqlog_partition_shmem == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mqlog must be loaded via shared_preload_libraries")));
	memset(&key, 0, sizeof(key));
	key.dboid = MyDatabaseId;
	key.catalog_relid = catalog_relid;
	key.topic_id = topic_id;
	key.partition = partition;

	LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_SHARED);
	part = hash_search(mqlog_partition_hash, &key, HASH_FIND, NULL);
	LWLockRelease(mqlog_partition_shmem->hash_lock);
	if (part)
		return part;

	LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_EXCLUSIVE);
	part = hash_search(mqlog_partition_hash, &key, HASH_ENTER_NULL, &found);
	if (part == NULL)
	{
		LWLockRelease(mqlog_partition_shmem->hash_lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many mqlog partitions in use"),
				 errhint("Raise mqlog.max_partitions (currently %d) and restart the server.",
						 mqlog_max_partitions)));
	}
	if (!found)
	{
		LWLockInitialize(&part->lock, mqlog_partition_shmem->part_tranche);
		part->loaded = false;
		part->dirty = false;
		part->active_relid = InvalidOid;
		part->active_base = 0;
		part->active_since = NO_ACTIVE_SINCE;
		part->spare_relid = InvalidOid;
		part->spare_wanted = 0;
		part->roll_unrecorded = false;
		part->extend_relid = InvalidOid;
		part->extend_to = 0;
		part->extend_asked = 0;
		part->end_lpos = 0;
		part->torn_lpos = 0;
		part->next_offset = 0;
		dlist_init(&part->inflight);
		part->kafka_holds_checked = false;
		ConditionVariableInit(&part->cv);
		pg_atomic_init_u64(&part->high_watermark, 0);
		pg_atomic_init_u64(&part->changes, 0);
		part->min_leader_epoch = 0;
		part->mover_pid = 0;
		part->nfollowers = 0;
	}
	LWLockRelease(mqlog_partition_shmem->hash_lock);
	return part;
}

