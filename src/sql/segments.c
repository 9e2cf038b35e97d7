/*-------------------------------------------------------------------------
 *
 * segments.c
 *		The internal SQL functions of segment maintenance, which the
 *		install script's PL/pgSQL (mq_run_maintenance, mqlog._roll_ahead,
 *		mq_drop_topic, the follower's truncation) calls: the worker's own
 *		roll (mqlog._roll_begin, _roll_finish), the spares (_spare_base,
 *		_publish_spare, _roll_to_spare, _wanted_spares), the extension ahead
 *		(_extend_ahead), truncation (_cut_segment, _truncate_finish),
 *		compaction (_compact_segment_into), _segment_first_timestamp,
 *		_segment_transactional,
 *		_forget_topic, the maintenance lock and passes (_maintenance_lock,
 *		_request_pass, _request_pass_at_commit) and _debug_pause.
 *
 * Each reads and checks its arguments, resolves the topic id to the
 * partition, and calls log/partition_roll.c (every roll and spare),
 * log/partition_extend.c, log/lifecycle.c, log/partition.c or
 * workers/maintenance.c.  None is for an ordinary role:
 * the install script revokes them from PUBLIC.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "store/segment.h"
#include "log/am.h"
#include "log/lifecycle.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/topic.h"
#include "workers/workers.h"

PG_FUNCTION_INFO_V1(mqlog_roll_begin);
PG_FUNCTION_INFO_V1(mqlog_roll_finish);
PG_FUNCTION_INFO_V1(mqlog_truncate_finish);
PG_FUNCTION_INFO_V1(mqlog_cut_segment);
PG_FUNCTION_INFO_V1(mqlog_forget_topic);
PG_FUNCTION_INFO_V1(mqlog_compact_segment);
PG_FUNCTION_INFO_V1(mqlog_segment_first_timestamp);
PG_FUNCTION_INFO_V1(mqlog_segment_transactional);
PG_FUNCTION_INFO_V1(mqlog_spare_base);
PG_FUNCTION_INFO_V1(mqlog_publish_spare);
PG_FUNCTION_INFO_V1(mqlog_roll_to_spare);
PG_FUNCTION_INFO_V1(mqlog_wanted_spares);
PG_FUNCTION_INFO_V1(mqlog_extend_ahead);
PG_FUNCTION_INFO_V1(mqlog_request_pass);
PG_FUNCTION_INFO_V1(mqlog_request_pass_at_commit);
PG_FUNCTION_INFO_V1(mqlog_maintenance_lock);
PG_FUNCTION_INFO_V1(mqlog_debug_pause);

/* mqlog._maintenance_lock(): see MqMaintenanceLock */
Datum
mqlog_maintenance_lock(PG_FUNCTION_ARGS)
{
	MqMaintenanceLock();
	PG_RETURN_VOID();
}

/*
 * Arguments (topic_id, partition, segment relid) of the internal segment
 * functions, checked: the partition's shared state, and the relid.
 */
static MqPartition *
segment_args(FunctionCallInfo fcinfo, Oid *relid)
{
	MqTopic    *topic;
	int32		partition = PG_GETARG_INT32(1);

	*relid = PG_GETARG_OID(2);
	MqCheckSegment(*relid);
	topic = MqTopicLookupById(PG_GETARG_INT32(0));
	MqCheckPartition(topic, partition);
	return MqTopicPartition(topic, partition);
}

/* Timestamp of a segment's first batch, or NULL if it is empty. */
Datum
mqlog_segment_first_timestamp(PG_FUNCTION_ARGS)
{
	Relation	rel = MqSegmentOpen(PG_GETARG_OID(0), AccessShareLock);
	bool		found;
	TimestampTz ts = 0;

	if (rel == NULL)
		PG_RETURN_NULL();
	found = MqSegmentFirstTimestamp(rel, &ts);
	table_close(rel, AccessShareLock);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(ts);
}

/*
 * mqlog._segment_transactional(relid): whether a segment holds a Kafka
 * transaction's batch (the transactional bit: its records or a marker),
 * aborted or not; null for a segment that is gone.  A walk of the batch
 * headers, which retention makes once per sealed segment, the first time
 * it would drop it, and records in mqlog.segment: only such a segment
 * waits for the text-mode mqlog slots (see mq_run_maintenance).
 */
Datum
mqlog_segment_transactional(PG_FUNCTION_ARGS)
{
	Relation	rel;
	MqLogIter	it;
	bool		found = false;

	MqCheckSegment(PG_GETARG_OID(0));
	rel = MqSegmentOpen(PG_GETARG_OID(0), AccessShareLock);
	if (rel == NULL)
		PG_RETURN_NULL();
	MqLogIterBeginSegment(&it, rel, MQ_ITER_INVISIBLE);
	while (!found && MqLogNextBatch(&it))
		found = (it.hdr.attributes & MQ_ATTR_TRANSACTIONAL) != 0;
	MqLogIterEnd(&it);
	table_close(rel, AccessShareLock);
	PG_RETURN_BOOL(found);
}

/*
 * mqlog._roll_begin(topic_id, partition, relid): the offset the next
 * segment starts at, or null while a producer is inside the segment, when
 * relid is no longer the partition's active segment, or when there is
 * nothing to roll (MqPartitionRollLock, MqPartitionRollBegin).  The topic
 * is looked up only once the segment is locked, so that its chain is the
 * latest.
 */
Datum
mqlog_roll_begin(PG_FUNCTION_ARGS)
{
	int32		topic_id = PG_GETARG_INT32(0);
	int32		partition = PG_GETARG_INT32(1);
	Oid			relid = PG_GETARG_OID(2);
	MqTopic    *topic;
	const MqSegmentRef *seg;
	int64		next;

	MqCheckSegment(relid);
	if (!MqPartitionRollLock(relid))
		PG_RETURN_NULL();
	topic = MqTopicLookupById(topic_id);
	MqCheckPartition(topic, partition);
	seg = MqTopicActiveSegment(topic, partition);
	if (seg->relid != relid)
		PG_RETURN_NULL();
	next = MqPartitionRollBegin(MqTopicPartition(topic, partition), relid, seg->base_offset);
	if (next < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(next);
}

Datum
mqlog_roll_finish(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionSwitchAtCommit(part, relid, PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/*
 * mqlog._truncate_finish(topic_id, partition, relid, base_offset): as
 * _roll_finish, for a log whose end moved to base_offset (mqlog._move_log_end):
 * when the transaction commits, the log ends there.
 */
Datum
mqlog_truncate_finish(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionTruncateAtCommit(part, relid, PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/*
 * mqlog._cut_segment(topic_id, partition, relid, offset): cut the segment
 * so that it holds nothing at or past offset (MqLogCutSegment).
 */
Datum
mqlog_cut_segment(PG_FUNCTION_ARGS)
{
	Oid			relid;

	(void) segment_args(fcinfo, &relid);
	PG_RETURN_BOOL(MqLogCutSegment(relid, PG_GETARG_INT64(3)));
}

/*
 * mqlog._spare_base(topic_id, partition, relid): where the partition rolled
 * into its spare segment relid, or null while the spare is unused.
 */
Datum
mqlog_spare_base(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);
	int64		base = MqPartitionSpareBase(part, relid);

	if (base < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(base);
}

/* mqlog._publish_spare(topic_id, partition, relid): appenders may roll into it once this commits. */
Datum
mqlog_publish_spare(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionPublishSpareAtCommit(part, relid);
	PG_RETURN_VOID();
}

/*
 * mqlog._roll_to_spare(topic_id, partition): roll an idle partition into
 * its spare (MqPartitionRollToSpare); the new base offset, or null if there
 * was nothing to roll or no spare.  The topic is loaded afresh, so that its spare is the
 * catalog's latest.
 */
Datum
mqlog_roll_to_spare(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicRefresh(MqTopicLookupById(PG_GETARG_INT32(0))->name);
	int32		partition = PG_GETARG_INT32(1);
	const MqSegmentRef *seg;
	int64		base;

	MqCheckPartition(topic, partition);
	if (!OidIsValid(topic->spares[partition]))
		PG_RETURN_NULL();
	seg = MqTopicActiveSegment(topic, partition);
	base = MqPartitionRollToSpare(MqTopicPartition(topic, partition), seg->relid,
								  seg->base_offset, topic->spares[partition]);
	if (base < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(base);
}

/*
 * mqlog._wanted_spares(): (topic_id, partition) of every partition of this
 * database whose appenders asked for a spare segment or rolled into one
 * that the catalog does not show yet.
 */
Datum
mqlog_wanted_spares(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			catalog = MqTopicCatalogRelid();
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, MqPartitionsWantingSpares(catalog))
	{
		List	   *pair = lfirst(lc);
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int32GetDatum(linitial_int(pair));
		values[1] = Int32GetDatum(lsecond_int(pair));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * mqlog._extend_ahead(): extend the active segments whose appenders asked
 * for pages ahead (MqPartitionsExtendAhead); the count of pages added.
 */
Datum
mqlog_extend_ahead(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(MqPartitionsExtendAhead(MqTopicCatalogRelid()));
}

/* mqlog._request_pass(): a roll-ahead pass in this database soon. */
Datum
mqlog_request_pass(PG_FUNCTION_ARGS)
{
	MqRequestMaintenance();
	PG_RETURN_VOID();
}

/*
 * mqlog._request_pass_at_commit(): the same once this transaction commits
 * (mq_create_topic of more partitions than it creates segments for).
 */
Datum
mqlog_request_pass_at_commit(PG_FUNCTION_ARGS)
{
	MqRequestMaintenanceAtCommit();
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

/*
 * mqlog._compact_segment_into(topic_id, partition, old relid, new relid):
 * how many records compaction removes from the old segment; with a new
 * relation (created by the caller in this transaction) the survivors are
 * written there (MqLogCompactSegment).
 */
Datum
mqlog_compact_segment(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);
	Oid			oldrel = PG_GETARG_OID(2);
	Oid			newrel = PG_GETARG_OID(3);

	MqCheckPartition(topic, partition);
	MqCheckSegment(oldrel);
	if (OidIsValid(newrel))
		MqCheckSegment(newrel);
	PG_RETURN_INT64(MqLogCompactSegment(topic, partition, oldrel, newrel));
}

/*
 * mqlog._debug_pause(step): a point between two steps of a maintenance
 * pass, where the tests stop it (MqMaintenanceDebugPause).
 */
Datum
mqlog_debug_pause(PG_FUNCTION_ARGS)
{
	MqMaintenanceDebugPause(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}
