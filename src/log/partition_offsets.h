/*-------------------------------------------------------------------------
 *
 * partition_offsets.h
 *		What readers may see of a partition, and a replicated partition's
 *		high watermark, followers, ISR and fences (partition_offsets.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_OFFSETS_H
#define MQLOG_PARTITION_OFFSETS_H

#include "nodes/pg_list.h"
#include "storage/condition_variable.h"
#include "log/partition_shmem.h"

struct MqTopic;
struct MqReplicaInfo;

extern void MqPartitionOffsets(struct MqTopic *topic, int32 partition, int64 *lso, int64 *hw);
extern uint64 MqPartitionKnownEnd(MqPartition *part, Oid relid);
extern void MqPartitionLogEnd(struct MqTopic *topic, int32 partition, int64 *lso, int64 *leo);

/*
 * A partition's first use after its shared entry was made (a start): the
 * holds of the Kafka transactions open then, put back (log/kafka_holds.c
 * sets the hook) before the LSO is read or an append made.
 */
typedef void (*MqPartitionFirstUseHook) (struct MqTopic *topic, int32 partition);
extern void MqPartitionSetFirstUseHook(MqPartitionFirstUseHook hook);
extern void MqPartitionFirstUse(struct MqTopic *topic, int32 partition);

/* replicated partitions: followers' progress and the high watermark */
extern int64 MqPartitionAdvanceHighWatermark(MqPartition *part, int64 hw);
extern int64 MqPartitionUpdateHighWatermark(MqPartition *part, const struct MqReplicaInfo *ri,
											int min_isr);
extern void MqPartitionSetIsr(MqPartition *part, int32 epoch, List *names);
extern bool MqPartitionIsrBelow(MqPartition *part, int32 epoch, int min_isr);
extern void MqPartitionReportFollower(MqPartition *part, const char *node, int64 leo,
									  int32 epoch);
extern bool MqPartitionFollowerProgress(MqPartition *part, const char *node,
										MqFollowerProgress *out);
extern ConditionVariable *MqPartitionCV(MqPartition *part);
extern bool MqPartitionFence(MqPartition *part, int32 from, int32 to);
extern void MqPartitionUnfence(MqPartition *part, int32 epoch, bool lift);

#endif							/* MQLOG_PARTITION_OFFSETS_H */
