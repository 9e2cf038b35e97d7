/*-------------------------------------------------------------------------
 *
 * fetch.c
 *		The SQL entry points that read: mq_fetch, mq_fetch_kafka_batches,
 *		the offset functions, mq_verify and the statistics behind the admin
 *		views.  The reading itself is log/logiter.c and log/records.c.
 *
 * A read takes the partition's last stable offset from shared memory first
 * and only then looks at the pages: any batch below that LSO was completely
 * written before the LSO moved past it, and its transaction has ended, so
 * the clog alone decides whether it is visible.  On a hot standby there is
 * no in-flight registry; there the reader stops at the first batch whose
 * transaction is still running in the replayed WAL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "store/batch.h"
#include "store/segment.h"
#include "log/am.h"
#include "base/subxact.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/topic.h"
#include "acl/acl.h"

PG_FUNCTION_INFO_V1(mq_fetch);
PG_FUNCTION_INFO_V1(mq_fetch_kafka_batches);
PG_FUNCTION_INFO_V1(mq_earliest_offset);
PG_FUNCTION_INFO_V1(mq_latest_offset);
PG_FUNCTION_INFO_V1(mq_offsets_for_times);
PG_FUNCTION_INFO_V1(mq_verify);
PG_FUNCTION_INFO_V1(mqlog_partition_offsets);
PG_FUNCTION_INFO_V1(mqlog_segment_stats);
PG_FUNCTION_INFO_V1(mqlog_segment_size);

Datum
mq_fetch(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		partition = PG_GETARG_INT32(1);
	int64		from = PG_GETARG_INT64(2);
	int32		max_records = PG_GETARG_INT32(3);
	int32		max_bytes = PG_GETARG_INT32(4);
	MqTopic    *topic = MqTopicLookup(name, false);
	MqRecordOutput out;

	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	MqCheckPartition(topic, partition);
	if (from < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("from_offset must not be negative")));
	if (max_records < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_records must be at least 1")));
	if (max_bytes < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_bytes must be at least 1")));
	MqCheckOffsetRange(topic, partition, from, false);
	MqInitRecordOutput(fcinfo, &out);
	(void) MqReadPartition(topic, partition, from, max_records, max_records, max_bytes,
						   &out, NULL);
	return (Datum) 0;
}

/*
 * mq_fetch_kafka_batches(topic, partition, from_offset, max_bytes): the
 * committed batches holding from_offset and after, as stored, which is
 * Kafka's record batch v2: what a Fetch response carries.  As in Kafka, the
 * first batch may start before from_offset, and at least one batch is
 * returned however large.
 */
/* one row of mq_fetch_kafka_batches */
static void
put_kafka_batch(void *arg, const MqBatchHeader *hdr, const char *kafka, Size len)
{
	ReturnSetInfo *rsinfo = arg;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = Int64GetDatum(hdr->base_offset);
	values[1] = Int64GetDatum(MqBatchNextOffset(hdr) - 1);
	values[2] = PointerGetDatum(MqBytea(kafka, len));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
mq_fetch_kafka_batches(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	int32		partition = PG_GETARG_INT32(1);
	int64		from = PG_GETARG_INT64(2);
	int32		max_bytes = PG_GETARG_INT32(3);

	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	MqCheckPartition(topic, partition);
	if (max_bytes < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_bytes must be at least 1")));
	MqCheckOffsetRange(topic, partition, from, false);
	InitMaterializedSRF(fcinfo, 0);
	(void) MqLogReadKafkaBatches(topic, partition, from, max_bytes, true,
								 put_kafka_batch, NULL, fcinfo->resultinfo);
	return (Datum) 0;
}

Datum
mq_earliest_offset(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	int32		partition = PG_GETARG_INT32(1);

	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	MqCheckPartition(topic, partition);
	PG_RETURN_INT64(MqLogStartOffset(topic, partition));
}

Datum
mq_latest_offset(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	int32		partition = PG_GETARG_INT32(1);
	int64		lso,
				hw;

	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	MqCheckPartition(topic, partition);
	MqPartitionOffsets(topic, partition, &lso, &hw);
	if (lso < 0)
	{
		/* standby: read up to the first running transaction */
		lso = MqReadPartition(topic, partition, MqLogStartOffset(topic, partition),
							 PG_INT32_MAX, PG_INT32_MAX, PG_INT64_MAX, NULL, NULL);
	}
	PG_RETURN_INT64(lso);
}

Datum
mq_offsets_for_times(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	TimestampTz ts = PG_GETARG_TIMESTAMPTZ(1);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < topic->partitions; p++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, true, true};
		TimestampTz found_ts = 0;
		int64		offset = MqOffsetForTime(topic, p, ts, &found_ts);

		values[0] = Int32GetDatum(p);
		if (offset >= 0)
		{
			values[1] = Int64GetDatum(offset);
			values[2] = TimestampTzGetDatum(found_ts);
			nulls[1] = nulls[2] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * Decode a batch for mq_verify, in a subtransaction: a batch that does not
 * decompress or decode is a problem to report, not an error that stops the
 * check of everything else.  Returns the records decoded.
 */
typedef struct VerifyDecode
{
	MqLogIter  *it;
	MemoryContext cxt;
	MqRecord  **recs;
	int			n;
} VerifyDecode;

static void
verify_decode_batch(void *arg)
{
	VerifyDecode *vd = arg;
	MemoryContext old = MemoryContextSwitchTo(vd->cxt);

	/* one more than the header says, to see a batch that holds more */
	vd->n = MqBatchDecodeAll(vd->it->stored, &vd->it->hdr, PG_INT64_MIN,
							 vd->it->hdr.record_count + 1, vd->recs);
	MemoryContextSwitchTo(old);
}

static int
verify_decode(MqLogIter *it, MemoryContext cxt, MqRecord **recs, char **problem)
{
	VerifyDecode vd = {it, cxt, recs, 0};
	ErrorData  *edata;

	if (MqRunInSubtransaction(verify_decode_batch, &vd, &edata))
		return vd.n;
	*problem = psprintf("the batch at offset " INT64_FORMAT " does not decode: %s",
						it->hdr.base_offset, edata->message);
	FreeErrorData(edata);
	return 0;
}

/*
 * Check every batch of every segment: CRC, decodability, record count, and
 * that offsets only grow; and that the newest segment, only it, is the
 * active one.  One row per segment.
 */
Datum
mq_verify(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "mq_verify",
											  ALLOCSET_DEFAULT_SIZES);

	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < topic->partitions; p++)
	{
		int64		prev_next = -1;

		for (int s = 0; s < topic->nsegments[p]; s++)
		{
			MqSegmentRef *seg = &topic->segments[p][s];
			Relation	rel = try_table_open(seg->relid, AccessShareLock);
			MqLogIter	it;
			int64		batches = 0,
						records = 0;
			char	   *problem = NULL;
			Datum		values[6];
			bool		nulls[6] = {false, false, false, false, false, false};

			if (rel == NULL)
				continue;
			if (prev_next < 0)
				prev_next = seg->base_offset;
			MqLogIterBeginSegment(&it, rel, MQ_ITER_ANY_FATE | MQ_ITER_BYTES | MQ_ITER_NO_CRC);
			while (problem == NULL && MqLogNextBatch(&it))
			{
				MqBatchHeader *hdr = &it.hdr;
				MqRecord   *recs = NULL;
				int			n;

				batches++;
				if (!MqBatchCheckCrc(it.stored, hdr->length))
				{
					problem = psprintf("CRC mismatch in the batch at offset " INT64_FORMAT, hdr->base_offset);
					break;
				}
				if (hdr->base_offset < prev_next)
				{
					problem = psprintf("batch at offset " INT64_FORMAT " follows offset " INT64_FORMAT,
									   hdr->base_offset, prev_next - 1);
					break;
				}
				MemoryContextReset(cxt);
				n = verify_decode(&it, cxt, &recs, &problem);
				if (problem == NULL && n != hdr->record_count)
					problem = psprintf("batch at offset " INT64_FORMAT " holds %d records, its header says %d",
									   hdr->base_offset, n, hdr->record_count);
				for (int r = 1; r < n && problem == NULL; r++)
					if (recs[r].offset <= recs[r - 1].offset)
						problem = psprintf("offsets go backwards inside the batch at offset " INT64_FORMAT,
										   hdr->base_offset);
				records += n;
				prev_next = MqBatchNextOffset(hdr);
			}
			if (problem == NULL && it.reader.lpos < it.reader.end_lpos)
				problem = psprintf("torn batch at the tail (a crash during an append); the next append cuts it off");

			/*
			 * The chain: the newest segment, and only it, is unsealed (see
			 * mqlog._repair_chain, which the next maintenance pass runs).
			 */
			if (problem == NULL && s < topic->nsegments[p] - 1 && !seg->sealed)
				problem = psprintf("not sealed, but newer segments follow: the partition has more than one active segment; the next maintenance pass seals it");
			if (problem == NULL && s == topic->nsegments[p] - 1 && seg->sealed)
				problem = psprintf("sealed, but the newest segment: the partition has no active segment; the next maintenance pass makes this one active again");
			values[0] = Int32GetDatum(p);
			values[1] = ObjectIdGetDatum(seg->relid);
			values[2] = Int64GetDatum(batches);
			values[3] = Int64GetDatum(records);
			values[4] = BoolGetDatum(problem == NULL || strncmp(problem, "torn", 4) == 0);
			if (problem)
				values[5] = CStringGetTextDatum(problem);
			else
				nulls[5] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			MqLogIterEnd(&it);
			table_close(rel, AccessShareLock);
		}
	}
	MemoryContextDelete(cxt);
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * Functions behind the views
 * ------------------------------------------------------------------------ */

Datum
mqlog_partition_offsets(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int64		lso,
				hw,
				raw_lso,
				leo;

	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	MqCheckPartition(topic, partition);
	MqPartitionOffsets(topic, partition, &lso, &hw);
	MqPartitionLogEnd(topic, partition, &raw_lso, &leo);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(hw);
	values[1] = Int64GetDatum(lso);
	nulls[1] = (lso < 0);
	values[2] = Int64GetDatum(leo);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

Datum
mqlog_segment_stats(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	TupleDesc	desc;
	Datum		values[5];
	bool		nulls[5] = {false, false, true, true, true};
	int64		batches = 0,
				records = 0;
	TimestampTz first_ts = 0,
				max_ts = 0;
	int64		next = -1;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	MqCheckSegmentDescribe(relid);
	rel = MqSegmentOpen(relid, AccessShareLock);
	if (rel != NULL)
	{
		MqLogIter	it;

		MqLogIterBeginSegment(&it, rel, MQ_ITER_INVISIBLE);
		while (MqLogNextBatch(&it))
		{
			next = MqBatchNextOffset(&it.hdr);
			if (it.fate == MQ_FATE_INVISIBLE)
				continue;
			if (batches == 0 || it.hdr.first_timestamp < first_ts)
				first_ts = it.hdr.first_timestamp;
			if (batches == 0 || it.hdr.max_timestamp > max_ts)
				max_ts = it.hdr.max_timestamp;
			batches++;
			records += it.hdr.record_count;
		}
		MqLogIterEnd(&it);
		table_close(rel, AccessShareLock);
	}
	values[0] = Int64GetDatum(batches);
	values[1] = Int64GetDatum(records);
	if (batches > 0)
	{
		values[2] = TimestampTzGetDatum(first_ts);
		values[3] = TimestampTzGetDatum(max_ts);
		nulls[2] = nulls[3] = false;
	}
	if (next >= 0)
	{
		values[4] = Int64GetDatum(next);
		nulls[4] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/*
 * mqlog.segment_size(relid): the bytes of a segment's log, whole pages, as
 * pg_relation_size counts them but without the new pages extended ahead of
 * the appender: what the views show and retention.bytes counts, the same
 * on a primary, its standbys and a restored copy.  Null for a segment that
 * is gone.  Like pg_relation_size it needs no privilege: it tells whole
 * pages only, as pg_relation_size does of any relation, and so it costs no
 * catalog query (the maintenance pass calls it for every partition).
 */
Datum
mqlog_segment_size(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	int64		size;

	rel = MqSegmentOpen(relid, AccessShareLock);
	if (rel == NULL)
		PG_RETURN_NULL();
	size = (int64) MqSegmentUsedBlocks(rel) * BLCKSZ;
	table_close(rel, AccessShareLock);
	PG_RETURN_INT64(size);
}
