/*-------------------------------------------------------------------------
 *
 * partition_internal.h
 *		A partition's shared state, private to the files of the partition
 *		(log/partition*.c; test/perl/000_layers.pl checks that nobody else
 *		includes this): struct MqPartition, the in-flight entries behind the
 *		last stable offset, the shared area that holds them, and what the
 *		partition's files call in one another (the roll decision among it).
 *
 * Everybody else holds an MqPartition pointer and calls the functions of
 * partition.h, so that the append protocol has one owner.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_INTERNAL_H
#define MQLOG_PARTITION_INTERNAL_H

#include "common/hashfn.h"
#include "common/int.h"
#include "lib/ilist.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"

#include "store/segment.h"
#include "log/partition_shmem.h"

/*
 * Topic ids are per database and start again at 1 when the extension is
 * dropped and created again, so the key also names the database and the
 * catalog table's relation (a new one for each incarnation).
 */
typedef struct MqPartitionKey
{
	Oid			dboid;
	Oid			catalog_relid;
	int32		topic_id;
	int32		partition;
} MqPartitionKey;

/*
 * active_since of an empty active segment: no record's time (those are
 * clamped to PostgreSQL's range), unlike 0, which is 2000-01-01 and a
 * record may carry it.
 */
#define NO_ACTIVE_SINCE DT_NOBEGIN

struct MqPartition
{
	MqPartitionKey key;			/* hash key: must be first */
	LWLock		lock;			/* serializes appends; protects what follows */
	bool		loaded;			/* tail read from disk */
	bool		dirty;			/* an append failed midway: re-read the tail */
	Oid			active_relid;	/* segment where appends go */
	int64		active_base;
	uint64		end_lpos;		/* append position in the active segment */
	uint64		torn_lpos;		/* > end_lpos when a crash tore the tail */
	int64		next_offset;	/* offset the next batch gets */
	TimestampTz active_since;	/* first timestamp in the active segment,
								 * NO_ACTIVE_SINCE while it is empty:
								 * segment.ms counts from it */
	Oid			spare_relid;	/* a committed, empty segment prepared ahead,
								 * where the next roll goes (InvalidOid: none) */
	TimestampTz spare_wanted;	/* when an appender asked for a spare (0: no
								 * request outstanding) */
	bool		roll_unrecorded;	/* rolled into the spare; the worker has not
									 * recorded it in the catalog yet */
	/* extension ahead of the appender (MqPartitionsExtendAhead) */
	Oid			extend_relid;	/* the segment to extend, the active one */
	BlockNumber extend_to;		/* to this many blocks */
	TimestampTz extend_asked;	/* when the appender asked (0: no request) */
	dlist_head	inflight;		/* MqInflight, ascending first offset */
	bool		kafka_holds_checked;	/* the holds of the Kafka
										 * transactions open at the start
										 * are back (log/kafka_holds.c) */
	ConditionVariable cv;		/* broadcast when appends commit, when a
								 * spare is ready and when the high
								 * watermark moves */
	/* replicated partitions (partition_offsets.c), under lock */
	pg_atomic_uint64 high_watermark;	/* leader: as computed; follower: as
										 * the leader said */
	pg_atomic_uint64 changes;	/* bumped when what a reader may see of
								 * the partition may have moved
								 * (MqPartitionChanges) */
	int32		min_leader_epoch;	/* appends need a leader epoch at least
									 * this: a leader move fences the old one */
	int			mover_pid;		/* the backend moving the leader, or 0 */
	int			nfollowers;
	MqFollowerProgress followers[MQ_MAX_FOLLOWERS];

	/*
	 * The in-sync replicas as this leader's ISR round last decided them
	 * (workers/isr.c), at leader epoch isr_epoch (nisr 0: none yet): set
	 * before an expansion goes to etcd and after a shrink did, so that the
	 * high watermark never counts fewer replicas than etcd may list, however
	 * old the computing backend's topic cache is (Kafka's "maximal ISR").
	 */
	int32		isr_epoch;
	int			nisr;
	char		isr[MQ_MAX_REPLICATION_FACTOR][NAMEDATALEN];
};

#define MQ_DDL_SLOTS 64			/* MqAnnounceDdl */
#define MQ_CHANGE_SLOTS 1024	/* MqChangeSlotCount */

typedef struct MqInflight
{
	dlist_node	node;			/* in MqPartition.inflight, or the free list */
	int64		offset;
	int64		producer_id;	/* -1: a PostgreSQL transaction's append;
								 * else the hold of the open Kafka
								 * transaction of this producer id, which no
								 * backend owns (partition.c) */
} MqInflight;

typedef struct MqShared
{
	LWLock	   *hash_lock;		/* protects the partition hash */
	int			part_tranche;	/* tranche id of the partition locks */
	pg_atomic_uint64 catalog_generation;
	ConditionVariable data_cv;	/* broadcast when produced records commit */
	struct Latch *maintenance_latch;	/* the maintenance launcher's */
	pg_atomic_uint32 maintenance_db;	/* a database that wants a pass now */
	/* DDL announcements, a slot per database hash (MqAnnounceDdl) */
	pg_atomic_uint64 ddl_count[MQ_DDL_SLOTS];
	pg_atomic_uint32 ddl_topic[MQ_DDL_SLOTS];
	pg_atomic_uint32 ddl_db[MQ_DDL_SLOTS];
	pg_atomic_uint64 sizing_warned_at;	/* MqSizingWarningDue */
	/* a counter per hash of (database, catalog, topic): MqChangeSlotCount */
	pg_atomic_uint64 topic_changes[MQ_CHANGE_SLOTS];
	slock_t		free_lock;		/* protects free_list */
	dlist_head	free_list;		/* unused MqInflight entries */
	MqInflight	pool[FLEXIBLE_ARRAY_MEMBER];
} MqShared;

/* partition_tail.c: a partition's tail */
extern void MqPartitionLoadTail(MqPartition *part, Relation rel, int64 base_offset);
extern void MqPartitionEnsureLoaded(MqPartition *part, Relation rel, int64 base_offset);

/* partition.c: the last stable offset */
extern int64 MqPartitionLso(MqPartition *part, int64 *high_watermark);

/* partition_shmem.c */
extern MqShared *mqlog_partition_shmem;
extern HTAB *mqlog_partition_hash;	/* MqPartition by MqPartitionKey */

/*
 * partition_signal.c: the change counters (the essay is there), bumped
 * after every change to what a reader may see of a partition; inline here,
 * since the appender bumps them under its lock
 */
static inline uint32
change_slot(const MqPartitionKey *key)
{
	uint32		h = hash_bytes((const unsigned char *) key,
							   offsetof(MqPartitionKey, partition));

	return h % MQ_CHANGE_SLOTS;
}

/* after a change to part (its lock held or not): bump both counters */
static inline void
note_change(MqPartition *part)
{
	pg_atomic_fetch_add_u64(&part->changes, 1);
	pg_atomic_fetch_add_u64(&mqlog_partition_shmem->topic_changes[change_slot(&part->key)], 1);
}

/* partition_signal.c: what the end of a transaction applies */
extern void MqCatalogAtXactEnd(bool commit);
extern void MqCatalogAtSubxactAbort(void);
extern void MqMaintenanceAtXactEnd(bool commit);

/*
 * partition_roll.c: rolling (the essay is there).  The roll decision is
 * inline here, since the appender makes it for every batch under its lock;
 * a topic's segment.bytes and segment.ms come as arguments, so that this
 * header needs no topic.
 */

/* The active segment's relation size once len more bytes are appended. */
static inline int64
roll_size_with(MqPartition *part, uint32 len)
{
	return ((int64) MqLposBlock(part->end_lpos + len - 1) + 1) * BLCKSZ;
}

/*
 * Are records at max_ts the given share (per mille) of segment_ms younger
 * than the active segment's first?  Kafka compares record time with record
 * time, not with the clock.  Producers choose record times, and the first
 * and last times timestamptz holds are further apart than an int64 of
 * microseconds counts: such an age is past any segment.ms.
 */
static inline bool
roll_age_reached(MqPartition *part, int64 segment_ms, TimestampTz max_ts, int per_mille)
{
	int64		age;

	Assert(per_mille >= 0 && per_mille <= 1000);
	if (part->active_since == NO_ACTIVE_SINCE || segment_ms < 0 ||
		segment_ms > PG_INT64_MAX / 1000)
		return false;
	if (pg_sub_s64_overflow(max_ts, part->active_since, &age))
		return max_ts > part->active_since;
	return age >= segment_ms * per_mille;
}

/* Must a batch of len bytes whose newest record is at max_ts roll first? */
static inline bool
roll_due(MqPartition *part, int64 segment_bytes, int64 segment_ms, uint32 len,
		 TimestampTz max_ts)
{
	if (part->end_lpos == 0)
		return false;			/* an empty segment takes any batch */
	return roll_size_with(part, len) > segment_bytes ||
		roll_age_reached(part, segment_ms, max_ts, 1000);
}

/*
 * After an append: past half of segment.bytes (as the next byte would find
 * it) or of segment.ms, with no spare and none asked for, the next segment
 * is to be prepared; then the request is noted here (true: the caller asks
 * the worker once it has released the lock).
 */
static inline bool
roll_ask_spare(MqPartition *part, int64 segment_bytes, int64 segment_ms, TimestampTz max_ts)
{
	if (mqlog_roll_ahead && !OidIsValid(part->spare_relid) && part->spare_wanted == 0 &&
		(roll_size_with(part, 1) * 2 > segment_bytes ||
		 roll_age_reached(part, segment_ms, max_ts, 500)))
	{
		part->spare_wanted = GetCurrentTimestamp();
		return true;
	}
	return false;
}

extern bool MqPartitionTakeSpare(MqPartition *part, Relation spare);
extern bool MqPartitionWaitForSpare(MqPartition *part);
extern void MqPartitionSwitchesAtXactEnd(bool commit);

#endif							/* MQLOG_PARTITION_INTERNAL_H */
