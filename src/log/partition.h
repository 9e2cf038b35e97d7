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

/* ------------------------------------------------------------------------
 * Partition state in shared memory (partition.c)
 * ------------------------------------------------------------------------ */

/*
 * Topic ids are per database and start again at 1 when the extension is
 * dropped and created again, so the key also names the database and the
 * catalog table's relation (a new one for each incarnation).
 */
/*
 * A partition's shared state.  Private to partition.c: everybody else holds
 * a pointer and calls the functions below, so that the append protocol has
 * one owner.
 */
typedef struct MqPartition MqPartition;

extern Size MqPartitionShmemSize(void);
extern void MqPartitionShmemInit(void);
extern void MqPartitionRegisterTranche(void);
extern MqPartition *MqPartitionGet(Oid catalog_relid, int32 topic_id, int32 partition);
extern void MqPartitionLoad(MqPartition *part, Relation rel, int64 base_offset);
extern int64 MqPartitionLso(MqPartition *part, int64 *high_watermark);
extern void MqPartitionRegisterInflight(MqPartition *part, int64 offset);
extern void MqPartitionCheckInflightRoom(MqPartition **parts, int nparts);
extern int64 MqPartitionRollPoint(MqPartition *part, Relation rel, Oid relid, int64 base_offset);
struct MqTopic;
extern int64 MqPartitionAppend(struct MqTopic **topicp, int32 partition, StringInfo batch,
							   int64 at_offset, int32 leader_epoch);

#define MQ_DDL_SLOTS 64
extern void MqAnnounceDdl(int32 topic_id);
extern uint64 MqDdlCount(int32 *topic_id);
extern void MqPartitionInitCallbacks(void);
extern void MqPartitionEnsureLoaded(MqPartition *part, Relation rel, int64 base_offset);
extern void MqPartitionForgetTail(MqPartition *part);
extern Size MqPartitionEntrySize(void);
extern bool MqSizingWarningDue(void);
extern Size MqInflightPoolSize(void);
extern int64 MqPartitionsInUse(int64 *inflight);
extern void MqPartitionSwitchAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionTruncateAtCommit(MqPartition *part, Oid relid, int64 base_offset);
extern void MqPartitionForgetAtCommit(Oid catalog_relid, int32 topic_id);


extern int64 MqPartitionSpareBase(MqPartition *part, Oid relid);
extern void MqPartitionPublishSpareAtCommit(MqPartition *part, Oid relid);
extern int64 MqPartitionRollToSpare(MqPartition *part, Relation active, int64 active_base,
									Relation spare);
struct Latch;
extern List *MqPartitionsWantingSpares(Oid catalog_relid);
extern int64 MqPartitionsExtendAhead(Oid catalog_relid);
extern void MqSetMaintenanceLatch(struct Latch *latch);
extern void MqRequestMaintenance(void);
extern void MqRequestMaintenanceAtCommit(void);
extern Oid	MqTakeMaintenanceRequest(void);
extern void MqRepostMaintenanceRequest(Oid dboid);

extern void MqPartitionOffsets(struct MqTopic *topic, int32 partition, int64 *lso, int64 *hw);
extern uint64 MqPartitionKnownEnd(MqPartition *part, Oid relid);
extern void MqPartitionLogEnd(struct MqTopic *topic, int32 partition, int64 *lso, int64 *leo);

/* replicated partitions: followers' progress and the high watermark */
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

extern int64 MqPartitionAdvanceHighWatermark(MqPartition *part, int64 hw);
struct MqReplicaInfo;
extern int64 MqPartitionUpdateHighWatermark(MqPartition *part, const struct MqReplicaInfo *ri,
											int min_isr);
extern void MqPartitionSetIsr(MqPartition *part, int32 epoch, List *names);
extern void MqPartitionReportFollower(MqPartition *part, const char *node, int64 leo,
									  int32 epoch);
extern bool MqPartitionFollowerProgress(MqPartition *part, const char *node,
										MqFollowerProgress *out);
extern ConditionVariable *MqPartitionCV(MqPartition *part);
extern bool MqPartitionFence(MqPartition *part, int32 from, int32 to);
extern void MqPartitionUnfence(MqPartition *part, int32 epoch, bool lift);
extern ConditionVariable *MqDataArrivedCV(void);

/*
 * Change counters (partition.c): a partition's, and its topic's slot's,
 * for readers that wait across transactions (kafka/watch.c)
 */
#define MQ_CHANGE_SLOTS 1024
extern uint64 MqPartitionChanges(MqPartition *part);
extern uint32 MqPartitionChangeSlot(MqPartition *part);
extern uint64 MqChangeSlotCount(uint32 slot);
extern void MqlogCatalogChanged(void);
extern uint64 MqlogCatalogGeneration(void);

/*
 * The log layer's settings, which the partitions' shared memory, their
 * in-flight registry and their rolls read (settings.c): MqLogDefineSettings
 * defines them, and replica.c's with them
 */
extern int	mqlog_max_partitions;
extern int	mqlog_max_inflight;
extern bool mqlog_roll_ahead;
extern int	mqlog_segment_extend_ahead;
extern void MqLogDefineSettings(void);

#endif							/* MQLOG_PARTITION_H */
