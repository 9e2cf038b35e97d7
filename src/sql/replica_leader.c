/*-------------------------------------------------------------------------
 *
 * replica_leader.c
 *		The leader's side of replication that followers call over an
 *		ordinary connection: mqlog._replica_batches (a copy of the decided
 *		log, aborted batches included), mqlog._replica_mark (the LSO into
 *		the stream) and mqlog._replica_progress (the follower's log end
 *		offsets in, the high watermarks out).  The follower's side is
 *		workers/apply.c.
 *
 * Both are internal: EXECUTE is revoked from PUBLIC and the apply worker
 * connects as a role the DBA names in the node's conninfo (a superuser, or
 * a role granted these functions and REPLICATION).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "pgstat.h"
#include "utils/array.h"
#include "storage/condition_variable.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "log/epochs.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/replica.h"
#include "log/topic.h"
#include "cluster/metadata.h"

PG_FUNCTION_INFO_V1(mqlog_replica_batches);
PG_FUNCTION_INFO_V1(mqlog_replica_mark);
PG_FUNCTION_INFO_V1(mqlog_replica_progress);
PG_FUNCTION_INFO_V1(mqlog_replica_epoch_end);

/*
 * mqlog._replica_batches(topic_id, partition, from_offset, max_bytes):
 * the batches after from_offset whose fate is decided (below the LSO), in
 * offset order, each with committed true or false and its Kafka bytes as
 * stored.  At least one batch when there is one; then up to max_bytes.
 *
 * A from_offset below the log start offset (retention here dropped what
 * the follower lacks) answers one row with a null batch: the log starts
 * at base_offset, and the follower starts its log again there, as a Kafka
 * follower does when its fetch offset is below the leader's log start.
 */
Datum
mqlog_replica_batches(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);
	int64		from = PG_GETARG_INT64(2);
	int64		max_bytes = PG_GETARG_INT32(3);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		lso,
				hw,
				start,
				bytes = 0;
	MqLogIter	it;

	MqCheckPartition(topic, partition);
	start = MqLogStartOffset(topic, partition);
	if (from < start)
	{
		Datum		values[3] = {Int64GetDatum(start), (Datum) 0, (Datum) 0};
		bool		nulls[3] = {false, true, true};

		InitMaterializedSRF(fcinfo, 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		return (Datum) 0;
	}
	InitMaterializedSRF(fcinfo, 0);
	MqPartitionLogEnd(topic, partition, &lso, &hw);
	MqLogIterBegin(&it, topic, partition, from, lso, MQ_ITER_BYTES | MQ_ITER_INVISIBLE);
	it.max_bytes = PG_INT64_MAX;
	while (MqLogNextBatch(&it))
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		if (it.hdr.base_offset >= lso)
			break;
		if (bytes > 0 && bytes + it.hdr.length > max_bytes)
			break;
		bytes += it.hdr.length;
		values[0] = Int64GetDatum(it.hdr.base_offset);
		values[1] = BoolGetDatum(it.fate == MQ_FATE_VISIBLE);
		values[2] = PointerGetDatum(MqBytea(it.stored + MQ_PREFIX_SIZE,
											it.hdr.length - MQ_PREFIX_SIZE));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MqLogIterEnd(&it);
	return (Datum) 0;
}

/* mqlog._replica_mark(topic_id, partition) -> the LSO it logged */
Datum
mqlog_replica_mark(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);

	MqCheckPartition(topic, partition);
	PG_RETURN_INT64(MqLogMarkLso(topic, partition));
}

/*
 * On the leader: the replicated high watermark of a partition, moved up to
 * what its in-sync replicas have reported (shared memory only); -1 where
 * this node does not lead it, so nothing here moves it.
 */
static int64
leader_hw(MqTopic *topic, int32 partition)
{
	if (topic->replicas == NULL || !MqTopicLeadsHere(topic, partition))
		return -1;
	return MqPartitionUpdateHighWatermark(MqTopicPartition(topic, partition),
										  &topic->replicas[partition],
										  topic->min_insync_replicas);
}

/*
 * mqlog._replica_progress(node, topic_ids, partitions, log_end_offsets,
 * epochs, etcd_reached, etcd_reached_ms_ago, wait_ms): a follower's log end
 * offsets, by the leader's topic ids, each under the leader epoch it
 * follows (a partition of another epoch than this leader's is left out of
 * the answer), whether its last etcd request reached etcd and how long ago
 * its last one that did was answered (cluster/lease.c); returns each
 * partition's high watermark, which the follower's readers stop at, and
 * the leader's last stable offset, below which the follower can copy what
 * its stream did not carry.
 *
 * The report moves the high watermark at once (an acks=all commit waiting
 * for it wakes on the partition's condition variable).  When a high
 * watermark is still below the log end offset the follower reported (the
 * other in-sync replicas have not reported as much), the answer waits, up
 * to wait_ms, until one such partition's high watermark reaches it: the
 * follower that reports first then learns the high watermark the moment
 * the last in-sync replica's report moves it, instead of at a report of
 * its own later.  The follower sends its reports without waiting for the answer
 * (workers/apply.c), so a held report does not hold its stream.
 */
Datum
mqlog_replica_progress(PG_FUNCTION_ARGS)
{
	char	   *node = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *tids = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *parts = PG_GETARG_ARRAYTYPE_P(2);
	ArrayType  *leos = PG_GETARG_ARRAYTYPE_P(3);
	ArrayType  *epochs = PG_GETARG_ARRAYTYPE_P(4);
	int32		wait_ms = PG_GETARG_INT32(7);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n = ArrayGetNItems(ARR_NDIM(tids), ARR_DIMS(tids));
	MqTopic   **topics;
	int64	   *held;			/* the high watermark when held, or -1 */

	/* whether the follower reaches etcd: a leader cut off from it fences itself */
	MqClusterNotePeer(node, PG_GETARG_BOOL(5), PG_GETARG_INT64(6));

	if (ARR_HASNULL(tids) || ARR_HASNULL(parts) || ARR_HASNULL(leos) || ARR_HASNULL(epochs) ||
		ArrayGetNItems(ARR_NDIM(parts), ARR_DIMS(parts)) != n ||
		ArrayGetNItems(ARR_NDIM(leos), ARR_DIMS(leos)) != n ||
		ArrayGetNItems(ARR_NDIM(epochs), ARR_DIMS(epochs)) != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic ids, partitions, log end offsets and epochs must be arrays of one length without nulls")));
	topics = palloc0(sizeof(MqTopic *) * Max(n, 1));
	held = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		int32		partition = ((int32 *) ARR_DATA_PTR(parts))[i];
		int64		leo = ((int64 *) ARR_DATA_PTR(leos))[i];
		int32		epoch = ((int32 *) ARR_DATA_PTR(epochs))[i];
		MqTopic    *topic = MqTopicLookupById(((int32 *) ARR_DATA_PTR(tids))[i]);
		int64		hw;

		MqCheckPartition(topic, partition);
		held[i] = -1;

		/*
		 * A follower of another leadership than this one's (Kafka's
		 * FENCED_LEADER_EPOCH, KIP-320): its log end may hold what this log
		 * does not, until it truncates for this epoch; neither side's view
		 * counts for the other.
		 */
		if (topic->replicas == NULL || topic->replicas[partition].leader_epoch != epoch)
			continue;
		topics[i] = topic;
		MqPartitionReportFollower(MqTopicPartition(topic, partition), node, leo, epoch);
		hw = leader_hw(topic, partition);
		if (hw >= 0 && hw < leo)
			held[i] = hw;
	}

	/* hold the answer until a high watermark below its report reaches it */
	if (wait_ms > 0)
	{
		TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
		ConditionVariable *cv = MqDataArrivedCV();

		for (;;)
		{
			bool		hold = false;
			bool		reached = false;
			long		left;

			/* joined before the look, so no move between them is missed */
			ConditionVariablePrepareToSleep(cv);
			for (int i = 0; i < n; i++)
				if (held[i] >= 0)
				{
					int64		hw = leader_hw(topics[i], ((int32 *) ARR_DATA_PTR(parts))[i]);

					if (hw >= ((int64 *) ARR_DATA_PTR(leos))[i])
						reached = true;
					else
						hold = true;
				}
			left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (!hold || reached || left <= 0)
				break;
			(void) ConditionVariableTimedSleep(cv, left, PG_WAIT_EXTENSION);
		}
		ConditionVariableCancelSleep();
	}

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < n; i++)
	{
		int32		partition = ((int32 *) ARR_DATA_PTR(parts))[i];
		int64		lso,
					hw,
					decided,
					end;
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		if (topics[i] == NULL)
			continue;
		MqPartitionOffsets(topics[i], partition, &lso, &hw);
		MqPartitionLogEnd(topics[i], partition, &decided, &end);
		values[0] = Int32GetDatum(topics[i]->topic_id);
		values[1] = Int32GetDatum(partition);
		values[2] = Int64GetDatum(hw);
		values[3] = Int64GetDatum(decided);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * mqlog._replica_epoch_end(topic_id, partition, epoch) -> (leader_epoch,
 * end_offset): Kafka's OffsetForLeaderEpoch, which a follower asks before
 * it follows, to truncate what it holds beyond this log (workers/apply.c).
 */
Datum
mqlog_replica_epoch_end(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int32		found;

	MqCheckPartition(topic, partition);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "mqlog._replica_epoch_end must return a record");
	values[1] = Int64GetDatum(MqLogEpochEnd(topic, partition, PG_GETARG_INT32(2), &found));
	values[0] = Int32GetDatum(found);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
