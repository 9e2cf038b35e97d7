/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *		Segment roll: the C half of mqlog._roll_segment().
 *
 * Rolling seals a partition's active segment and starts the next one at
 * the partition's next offset.  The maintenance pass does it, never a
 * producer, so producers never wait on DDL of their own.  To seal a
 * segment no append may be in flight in it: _roll_begin takes an
 * ExclusiveLock on the segment only if it is free at once (a producer
 * transaction holds RowExclusiveLock until it ends, so a busy segment is
 * simply tried again on the next pass), and that lock keeps new producers
 * out until the rolling transaction commits.  At commit the partition's
 * shared state switches to the new segment; producers then notice that
 * their cached chain is stale and reload it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "mqlog.h"

PG_FUNCTION_INFO_V1(mqlog_roll_begin);
PG_FUNCTION_INFO_V1(mqlog_roll_finish);
PG_FUNCTION_INFO_V1(mqlog_forget_topic);

Datum
mqlog_roll_begin(PG_FUNCTION_ARGS)
{
	int32		topic_id = PG_GETARG_INT32(0);
	int32		partition = PG_GETARG_INT32(1);
	Oid			relid = PG_GETARG_OID(2);
	MqTopic    *topic;
	MqPartition *part;
	const MqSegmentRef *seg;
	Relation	rel;
	int64		next;

	if (!ConditionalLockRelationOid(relid, ExclusiveLock))
		PG_RETURN_NULL();

	topic = MqTopicLookupById(topic_id);
	MqCheckPartition(topic, partition);
	seg = MqTopicActiveSegment(topic, partition);
	if (seg->relid != relid)
		PG_RETURN_NULL();
	part = MqTopicPartition(topic, partition);
	rel = table_open(relid, NoLock);

	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	MqPartitionEnsureLoaded(part, rel, seg->base_offset);
	if (part->active_relid != relid || !dlist_is_empty(&part->inflight))
	{
		LWLockRelease(&part->lock);
		table_close(rel, NoLock);
		PG_RETURN_NULL();
	}
	next = part->next_offset;
	LWLockRelease(&part->lock);
	table_close(rel, NoLock);
	PG_RETURN_INT64(next);
}

Datum
mqlog_roll_finish(PG_FUNCTION_ARGS)
{
	int32		topic_id = PG_GETARG_INT32(0);
	int32		partition = PG_GETARG_INT32(1);
	Oid			relid = PG_GETARG_OID(2);
	int64		base = PG_GETARG_INT64(3);
	MqTopic    *topic = MqTopicLookupById(topic_id);

	MqCheckPartition(topic, partition);
	MqPartitionSwitchAtCommit(MqTopicPartition(topic, partition), relid, base);
	PG_RETURN_VOID();
}

/* Called by mq_drop_topic: free the topic's shared partition state at commit. */
Datum
mqlog_forget_topic(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));

	MqPartitionForgetAtCommit(topic->catalog_relid, topic->topic_id);
	PG_RETURN_VOID();
}
