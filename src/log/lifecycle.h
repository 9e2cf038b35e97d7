/*-------------------------------------------------------------------------
 *
 * lifecycle.h
 *		The maintenance worker's segment work (lifecycle.c): the
 *		maintenance lock, its own roll, rolling an idle partition into its
 *		spare, cutting a segment short, and compaction.
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
extern int64 MqLogRollBegin(int32 topic_id, int32 partition, Oid relid);
extern bool MqLogCutSegment(Oid relid, int64 offset);
extern int64 MqLogRollToSpare(MqTopic *topic, int32 partition);
extern int64 MqLogCompactSegment(MqTopic *topic, int32 partition, Oid oldrel, Oid newrel);

#endif							/* MQLOG_LIFECYCLE_H */
