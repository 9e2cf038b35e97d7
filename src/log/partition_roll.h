/*-------------------------------------------------------------------------
 *
 * partition_roll.h
 *		Segment rolling as the rest of mqlog uses it (partition_roll.c):
 *		the spares' shared state, the worker's rolls, and the segment
 *		switches a transaction applies when it commits.  The appender's
 *		side is private to the partition (partition_internal.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_ROLL_H
#define MQLOG_PARTITION_ROLL_H

#include "nodes/pg_list.h"
#include "log/partition_shmem.h"

/*
 * A segment prepared ahead by the maintenance worker is listed in the
 * catalog with this base offset until the worker records where it began
 * (the partition rolled into it; see partition_roll.c).
 */
#define MQ_SPARE_BASE	(-1)

/* the spares */
extern int64 MqPartitionSpareBase(MqPartition *part, Oid relid);
extern List *MqPartitionsWantingSpares(Oid catalog_relid);

/* the worker's rolls */
extern int64 MqPartitionRollToSpare(MqPartition *part, Oid active_relid, int64 active_base,
									Oid spare_relid);
extern bool MqPartitionRollLock(Oid relid);
extern int64 MqPartitionRollBegin(MqPartition *part, Oid relid, int64 base_offset);

/* applied when this transaction commits */
extern void MqPartitionSwitchAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionTruncateAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionPublishSpareAtCommit(MqPartition *part, Oid relid);

#endif							/* MQLOG_PARTITION_ROLL_H */
