/*-------------------------------------------------------------------------
 *
 * lifecycle.h
 *		The maintenance worker's segment work that is not rolling
 *		(lifecycle.c): the maintenance lock, cutting a segment short, and
 *		compaction.
 *
 * The callers (sql/segments.c) have checked that each relation is a
 * segment, and the partition of a topic they pass.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_LIFECYCLE_H
#define MQLOG_LIFECYCLE_H

#include "log/topic.h"

extern void MqMaintenanceLock(void);
extern bool MqLogCutSegment(Oid relid, int64 offset);
extern int64 MqLogCompactSegment(MqTopic *topic, int32 partition, Oid oldrel, Oid newrel);

#endif							/* MQLOG_LIFECYCLE_H */
