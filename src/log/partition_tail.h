/*-------------------------------------------------------------------------
 *
 * partition_tail.h
 *		A partition's tail as others use it (partition_tail.c): forgetting
 *		it after a restore wrote below the append protocol, and where the
 *		worker's own roll would start.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_TAIL_H
#define MQLOG_PARTITION_TAIL_H

#include "utils/relcache.h"
#include "log/partition_shmem.h"

extern void MqPartitionForgetTail(MqPartition *part);
extern int64 MqPartitionRollPoint(MqPartition *part, Relation rel, Oid relid, int64 base_offset);

#endif							/* MQLOG_PARTITION_TAIL_H */
