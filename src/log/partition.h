/*-------------------------------------------------------------------------
 *
 * partition.h
 *		The shared state of every partition: offsets, the in-flight
 *		registry behind the last stable offset, the append protocol, the
 *		catalog generation and the DDL announcements (partition.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_H
#define MQLOG_PARTITION_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/relcache.h"
#include "datatype/timestamp.h"
#include "cluster/metadata.h"
#include "log/partition_shmem.h"
#include "log/partition_signal.h"
#include "log/partition_offsets.h"
#include "log/partition_spare.h"

/* ------------------------------------------------------------------------
 * Partition state in shared memory (partition.c)
 * ------------------------------------------------------------------------ */

extern void MqPartitionLoad(MqPartition *part, Relation rel, int64 base_offset);
extern int64 MqPartitionLso(MqPartition *part, int64 *high_watermark);
extern void MqPartitionRegisterInflight(MqPartition *part, int64 offset);
extern void MqPartitionCheckInflightRoom(MqPartition **parts, int nparts);
struct MqTopic;
extern int64 MqPartitionAppend(struct MqTopic **topicp, int32 partition, StringInfo batch,
							   int64 at_offset, int32 leader_epoch);

extern void MqPartitionInitCallbacks(void);

/*
 * A hook at the end of every top transaction, run by the partition's
 * transaction callback: last at commit (commit true), when the commit is
 * durable and visible here and its locks are still held, and at abort
 * (commit false), after the in-flight entries are released.  One module
 * sets it, once, when mqlog is loaded: log/replica.c, whose acks=all wait
 * it is, so that the partition does not call into the replica module.
 */
typedef void (*MqXactEndHook) (bool commit);
extern void MqPartitionSetXactEndHook(MqXactEndHook hook);
extern void MqPartitionEnsureLoaded(MqPartition *part, Relation rel, int64 base_offset);
extern void MqPartitionForgetTail(MqPartition *part);
extern void MqPartitionSwitchAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionTruncateAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionForgetAtCommit(Oid catalog_relid, int32 topic_id);


extern void MqPartitionPublishSpareAtCommit(MqPartition *part, Oid relid);



#endif							/* MQLOG_PARTITION_H */
