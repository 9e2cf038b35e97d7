/*-------------------------------------------------------------------------
 *
 * partition_signal.h
 *		What the partitions tell other processes (partition_signal.c): the
 *		catalog generation, the DDL announcements, the data condition
 *		variable, the change counters and the maintenance wake-ups.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_SIGNAL_H
#define MQLOG_PARTITION_SIGNAL_H

#include "storage/condition_variable.h"
#include "log/partition_shmem.h"

/* the catalog generation: a topic cache older than it reloads */
extern void MqlogCatalogChanged(void);
extern uint64 MqlogCatalogGeneration(void);

/* DDL that waiting consumers give way to, and what they sleep on */
extern void MqAnnounceDdl(int32 topic_id);
extern uint64 MqDdlCount(int32 *topic_id);
extern ConditionVariable *MqDataArrivedCV(void);

/*
 * Change counters: a partition's, and its topic's slot's, for readers that
 * wait across transactions (kafka/watch.c)
 */
extern uint64 MqPartitionChanges(MqPartition *part);
extern uint32 MqPartitionChangeSlot(MqPartition *part);
extern uint64 MqChangeSlotCount(uint32 slot);

/* the maintenance launcher's wake-ups */
struct Latch;
extern void MqSetMaintenanceLatch(struct Latch *latch);
extern void MqRequestMaintenance(void);
extern void MqRequestMaintenanceAtCommit(void);
extern Oid	MqTakeMaintenanceRequest(void);
extern void MqRepostMaintenanceRequest(Oid dboid);

#endif							/* MQLOG_PARTITION_SIGNAL_H */
