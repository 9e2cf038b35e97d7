/*-------------------------------------------------------------------------
 *
 * partition_shmem.h
 *		The partitions' shared memory (partition_shmem.c): its size and
 *		initialization, a partition's entry, and what an entry holds that
 *		others receive copies of.  The lowest of the partition's headers:
 *		the topic cache (topic.h) hands out entries through it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_SHMEM_H
#define MQLOG_PARTITION_SHMEM_H

#include "datatype/timestamp.h"
#include "cluster/metadata.h"

/*
 * A partition's shared state.  Private to the partition's files
 * (partition_internal.h): everybody else holds a pointer and calls the
 * functions of partition.h, so that the append protocol has one owner.
 */
typedef struct MqPartition MqPartition;

extern Size MqPartitionShmemSize(void);
extern void MqPartitionShmemInit(void);
extern void MqPartitionRegisterTranche(void);
extern MqPartition *MqPartitionGet(Oid catalog_relid, int32 topic_id, int32 partition);
extern bool MqSizingWarningDue(void);
extern Size MqInflightPoolSize(void);
extern int64 MqPartitionsInUse(int64 *inflight);

/* replicated partitions: a follower's progress as its leader keeps it */
#define MQ_MAX_FOLLOWERS	(MQ_MAX_REPLICATION_FACTOR - 1)

typedef struct MqFollowerProgress
{
	char		node[64];
	int64		leo;			/* its log end offset */
	TimestampTz last_report;
	int64		leader_leo;		/* the leader's last stable offset then */
	TimestampTz caught_up;		/* Kafka's lastCaughtUpTime */
	int32		epoch;			/* the leader epoch it reported under */
} MqFollowerProgress;

/*
 * The log layer's settings, which the partitions' shared memory, their
 * in-flight registry and their rolls read (log_settings.c): MqLogDefineSettings
 * defines them, and replica.c's with them
 */
extern int	mqlog_max_partitions;
extern int	mqlog_max_inflight;
extern bool mqlog_roll_ahead;
extern int	mqlog_segment_extend_ahead;
extern void MqLogDefineSettings(void);

#endif							/* MQLOG_PARTITION_SHMEM_H */
