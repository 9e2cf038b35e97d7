/*-------------------------------------------------------------------------
 *
 * partition_tail.h
 *		A partition's tail as others use it (partition_tail.c): forgetting
 *		it after a restore wrote below the append protocol.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_TAIL_H
#define MQLOG_PARTITION_TAIL_H

#include "log/partition_shmem.h"

extern void MqPartitionForgetTail(MqPartition *part);

#endif							/* MQLOG_PARTITION_TAIL_H */
