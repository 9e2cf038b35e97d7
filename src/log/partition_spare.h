/*-------------------------------------------------------------------------
 *
 * partition_spare.h
 *		The maintenance worker's side of rolling (partition_spare.c): spare
 *		segments and the worker's roll into one.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PARTITION_SPARE_H
#define MQLOG_PARTITION_SPARE_H

#include "nodes/pg_list.h"
#include "utils/relcache.h"
#include "log/partition_shmem.h"

extern int64 MqPartitionSpareBase(MqPartition *part, Oid relid);
extern List *MqPartitionsWantingSpares(Oid catalog_relid);
extern int64 MqPartitionRollToSpare(MqPartition *part, Relation active, int64 active_base,
									Relation spare);

#endif							/* MQLOG_PARTITION_SPARE_H */
