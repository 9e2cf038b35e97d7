/*-------------------------------------------------------------------------
 *
 * records.c
 *		Records as SQL rows: the record reader behind mq_fetch and mq_poll,
 *		and the bytea and mqlog.header[] forms that every row of records
 *		(those and the segment scan) is made of.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "store/batch.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/topic.h"

bytea *
MqBytea(const char *data, int len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return b;
}

/* A record's headers as mqlog.header[] */
Datum
MqHeadersDatum(Oid header_type, TupleDesc header_desc, MqRecord *rec)
{
	Datum	   *elems = palloc(sizeof(Datum) * rec->nheaders);

	for (int i = 0; i < rec->nheaders; i++)
	{
		Datum		v[2];
		bool		nl[2] = {false, false};
		MqHeaderKV *h = &rec->headers[i];

		v[0] = PointerGetDatum(cstring_to_text_with_len(h->key, h->keylen));
		if (h->value)
			v[1] = PointerGetDatum(MqBytea(h->value, h->valuelen));
		else
			nl[1] = true;
		elems[i] = HeapTupleGetDatum(heap_form_tuple(header_desc, v, nl));
	}
	return PointerGetDatum(construct_array(elems, rec->nheaders, header_type,
										   -1, false, TYPALIGN_DOUBLE));
}

static void
emit_record(MqRecordOutput *out, int32 partition, MqRecord *rec)
{
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};

	values[0] = PointerGetDatum(out->topic);
	values[1] = Int32GetDatum(partition);
	values[2] = Int64GetDatum(rec->offset);
	values[3] = TimestampTzGetDatum(rec->ts);
	if (rec->key)
		values[4] = PointerGetDatum(MqBytea(rec->key, rec->keylen));
	else
		nulls[4] = true;
	if (rec->value)
		values[5] = PointerGetDatum(MqBytea(rec->value, rec->valuelen));
	else
		nulls[5] = true;
	if (rec->nheaders > 0)
		values[6] = MqHeadersDatum(out->header_type, out->header_desc, rec);
	else
		nulls[6] = true;
	tuplestore_putvalues(out->store, out->desc, values, nulls);
}

/* ------------------------------------------------------------------------
 * Reading records
 * ------------------------------------------------------------------------ */

/*
 * Read up to max_records committed records at or after from_offset, and
 * at most about max_bytes of keys and values (at least one record, as in
 * Kafka).  Returns the offset after the last record returned, or where the
 * read stopped.
 */
int64
MqReadPartition(MqTopic *topic, int32 partition, int64 from_offset,
				int max_records, int64 max_bytes, MqRecordOutput *out, int *nread)
{
	int64		lso,
				hw;
	MqLogIter	it;
	MqRecord   *rec;
	int64		next;

	MqPartitionOffsets(topic, partition, &lso, &hw);
	if (from_offset >= hw)
	{
		if (nread)
			*nread = 0;
		return from_offset;
	}
	if (out)
		out->topic = cstring_to_text(topic->name);
	MqLogIterBegin(&it, topic, partition, from_offset, lso, MQ_ITER_RECORDS);
	it.max_records = max_records;
	it.max_bytes = max_bytes;
	while ((rec = MqLogNextRecord(&it)) != NULL)
		if (out)
			emit_record(out, partition, rec);
	next = it.next;
	if (nread)
		*nread = it.nreturned;
	MqLogIterEnd(&it);
	return next;
}

void
MqInitRecordOutput(FunctionCallInfo fcinfo, MqRecordOutput *out)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			arraytype;

	InitMaterializedSRF(fcinfo, 0);
	out->store = rsinfo->setResult;
	out->desc = rsinfo->setDesc;
	arraytype = TupleDescAttr(out->desc, 6)->atttypid;
	out->header_type = get_element_type(arraytype);
	out->header_desc = lookup_rowtype_tupdesc_copy(out->header_type, -1);
	out->header_desc = BlessTupleDesc(out->header_desc);
	out->topic = NULL;
}

/*
 * The first committed offset of a partition whose timestamp is at or after
 * ts, or -1: a walk over batch headers (skipping batches whose max
 * timestamp is earlier), decoding only the batch that holds the answer.
 */
int64
MqOffsetForTime(MqTopic *topic, int32 partition, TimestampTz ts, TimestampTz *found_ts)
{
	int64		lso,
				hw;
	int64		result = -1;
	MqLogIter	headers;

	/* record timestamps are Kafka's milliseconds: so is the question */
	ts = MqPgTime(MqKafkaTime(ts));
	MqPartitionOffsets(topic, partition, &lso, &hw);
	MqLogIterBegin(&headers, topic, partition, MqLogStartOffset(topic, partition), lso, 0);
	while (result < 0 && MqLogNextBatch(&headers))
	{
		MqLogIter	batch;
		MqRecord   *rec;

		if (headers.hdr.max_timestamp < ts)
			continue;
		/* the answer is in this batch: read its records */
		MqLogIterBegin(&batch, topic, partition, headers.hdr.base_offset, lso, MQ_ITER_RECORDS);
		while ((rec = MqLogNextRecord(&batch)) != NULL &&
			   rec->offset < MqBatchNextOffset(&headers.hdr))
			if (rec->ts >= ts)
			{
				result = rec->offset;
				if (found_ts)
					*found_ts = rec->ts;
				break;
			}
		MqLogIterEnd(&batch);
	}
	MqLogIterEnd(&headers);
	return result;
}
