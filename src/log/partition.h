/*-------------------------------------------------------------------------
 *
 * partition.h
 *		A partition's shared state as everybody else uses it: the append
 *		protocol, what a transaction applies when it commits, and the
 *		transaction-end hook (partition.c); and, through the headers it
 *		includes, the entries (partition_shmem.h), a partition's tail
 *		(partition_tail.h), what readers may see and the high watermark
 *		(partition_offsets.h), rolling (partition_roll.h), extension
 *		ahead (partition_extend.h) and the signals (partition_signal.h).
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
#include "log/partition_extend.h"
#include "log/partition_offsets.h"
#include "log/partition_roll.h"
#include "log/partition_shmem.h"
#include "log/partition_signal.h"
#include "log/partition_tail.h"

/* ------------------------------------------------------------------------
 * The append protocol (partition.c)
 * ------------------------------------------------------------------------ */

struct MqTopic;
struct MqProducerAppend;
extern void MqPartitionCheckInflightRoom(MqPartition **parts, int nparts);
/* an open Kafka transaction's hold on the LSO, put back after a restart */
extern void MqPartitionHoldKafkaTransaction(struct MqTopic *topic, int32 partition,
											int64 producer_id, int64 offset);
extern void MqPartitionRestoreKafkaHolds(struct MqTopic *topic, int32 partition, int n,
										 const int64 *producer_ids, const int64 *offsets);
extern int64 MqPartitionAppend(struct MqTopic **topicp, int32 partition, StringInfo batch,
							   int64 at_offset, int32 leader_epoch,
							   struct MqProducerAppend *producer);

/* applied when this transaction commits (its segment switches: partition_roll.h) */
extern void MqPartitionForgetAtCommit(Oid catalog_relid, int32 topic_id);

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

#endif							/* MQLOG_PARTITION_H */
