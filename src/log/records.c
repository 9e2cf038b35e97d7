/*-------------------------------------------------------------------------
 *
 * records.c
 *		Records as SQL rows: the record reader behind mq_fetch and mq_poll,
 *		and the bytea and mqlog.header[] forms that every row of records
 *		(those and the segment scan) is made of; keys and values as text or
 *		jsonb for the _text and _json forms of produce, fetch and poll.
 *
 * Text is stored as UTF-8, which is what Kafka's string serializer writes:
 * a producer's text is converted from the database encoding (nothing to do
 * in a UTF-8 database) and a reader's is checked and converted back, so a
 * value that is not UTF-8 is an error (22021) naming the record, never
 * text that the database cannot hold.  JSON is stored as jsonb's text form.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
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

/*
 * The bytes a producer's key or value stands for: a bytea as it is, text
 * and jsonb (in its text form) as UTF-8.
 */
const char *
MqDatumBytes(Datum datum, MqValueForm form, int *len)
{
	const char *data;

	if (form == MQ_FORM_BYTES)
	{
		bytea	   *b = DatumGetByteaPP(datum);

		*len = VARSIZE_ANY_EXHDR(b);
		return VARDATA_ANY(b);
	}
	if (form == MQ_FORM_TEXT)
	{
		text	   *t = DatumGetTextPP(datum);

		data = VARDATA_ANY(t);
		*len = VARSIZE_ANY_EXHDR(t);
	}
	else
	{
		Jsonb	   *j = DatumGetJsonbP(datum);

		data = JsonbToCString(NULL, &j->root, VARSIZE(j));
		*len = strlen(data);
	}
	if (GetDatabaseEncoding() != PG_UTF8)
	{
		const char *utf8 = pg_server_to_any(data, *len, PG_UTF8);

		if (utf8 != data)
			*len = strlen(utf8);
		data = utf8;
	}
	return data;
}

/*
 * Is desc the row a reader makes: the seven columns of mqlog.record, or of
 * its text and json forms, in order?  Readers write them by position, so a
 * type a superuser changed (ALTER TYPE mqlog.record or mqlog.header ADD
 * ATTRIBUTE, or DROP) would have its other columns read as whatever the
 * memory held.
 */
bool
MqIsRecordDesc(TupleDesc desc)
{
	static const Oid types[] = {TEXTOID, INT4OID, INT8OID, TIMESTAMPTZOID};
	Oid			key_type;
	Oid			value_type;
	Oid			header_type;
	TupleDesc	header_desc;
	bool		ok;

	if (desc->natts != 7)
		return false;
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attisdropped ||
			(i < lengthof(types) && TupleDescAttr(desc, i)->atttypid != types[i]))
			return false;
	key_type = TupleDescAttr(desc, 4)->atttypid;
	value_type = TupleDescAttr(desc, 5)->atttypid;
	if (!(key_type == BYTEAOID || key_type == TEXTOID) ||
		!(value_type == BYTEAOID || value_type == TEXTOID || value_type == JSONBOID))
		return false;
	/* and the headers an array of mqlog.header's (key text, value bytea) */
	header_type = get_element_type(TupleDescAttr(desc, 6)->atttypid);
	if (!OidIsValid(header_type) || get_typtype(header_type) != TYPTYPE_COMPOSITE)
		return false;
	header_desc = lookup_rowtype_tupdesc(header_type, -1);
	ok = header_desc->natts == 2 &&
		!TupleDescAttr(header_desc, 0)->attisdropped &&
		!TupleDescAttr(header_desc, 1)->attisdropped &&
		TupleDescAttr(header_desc, 0)->atttypid == TEXTOID &&
		TupleDescAttr(header_desc, 1)->atttypid == BYTEAOID;
	ReleaseTupleDesc(header_desc);
	return ok;
}

static MqValueForm
form_of_column(TupleDesc desc, int attno)
{
	Oid			type = TupleDescAttr(desc, attno)->atttypid;

	if (type == TEXTOID)
		return MQ_FORM_TEXT;
	if (type == JSONBOID)
		return MQ_FORM_JSON;
	if (type != BYTEAOID)
		elog(ERROR, "unexpected type %u of a record column", type);
	return MQ_FORM_BYTES;
}

/* what a record's key or value turned into text or jsonb is about */
typedef struct ConversionContext
{
	MqRecordOutput *out;
	int32		partition;
	int64		offset;
	const char *what;
} ConversionContext;

static void
conversion_error_context(void *arg)
{
	ConversionContext *c = (ConversionContext *) arg;

	errcontext("the %s of the record at offset " INT64_FORMAT " of partition %d of topic \"%s\"",
			   c->what, c->offset, c->partition, text_to_cstring(c->out->topic));
}

/*
 * A key or value as a reader's column: bytea, or UTF-8 checked and turned
 * into text or jsonb.  Bytes that are not UTF-8 (or not JSON) fail the read
 * with the record named: the bytes forms read every record.  A sink's row
 * lives as long as the query, so what the conversion leaves behind (the
 * converted string, jsonb_in's parse, many times the value) is made in
 * out->scratch and only the datum is kept.
 */
static Datum
column_datum(MqRecordOutput *out, MqValueForm form, int32 partition, MqRecord *rec,
			 const char *data, int len, const char *what)
{
	ConversionContext c;
	ErrorContextCallback errcb;
	char	   *s;
	Datum		result;
	MemoryContext old = NULL;

	if (form == MQ_FORM_BYTES)
		return PointerGetDatum(MqBytea(data, len));
	c.out = out;
	c.partition = partition;
	c.offset = rec->offset;
	c.what = what;
	errcb.callback = conversion_error_context;
	errcb.arg = &c;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	if (!pg_verify_mbstr(PG_UTF8, data, len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("record %s is not valid UTF-8", what),
				 errdetail("A %s read as %s must be UTF-8 text without zero bytes.",
						   what, form == MQ_FORM_TEXT ? "text" : "jsonb"),
				 errhint("Read the record's bytes with mq_fetch() or mq_poll().")));
	if (out->scratch)
		old = MemoryContextSwitchTo(out->scratch);
	s = pg_any_to_server(data, len, PG_UTF8);
	if (s == data)
		s = pnstrdup(data, len);
	if (form == MQ_FORM_TEXT)
		result = PointerGetDatum(cstring_to_text(s));
	else
		result = DirectFunctionCall1(jsonb_in, CStringGetDatum(s));
	if (out->scratch)
	{
		MemoryContextSwitchTo(old);
		result = datumCopy(result, false, -1);
		MemoryContextReset(out->scratch);
	}
	error_context_stack = errcb.previous;
	return result;
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

#define MQ_ROW_BLOCK	(64 * 1024)

static text *
text_in_context(MemoryContext cxt, const char *s)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	text	   *t = cstring_to_text(s);

	MemoryContextSwitchTo(old);
	return t;
}

/* the columns of mqlog.record (or its text and json forms), made in the current context */
static void
record_datums(MqRecordOutput *out, int32 partition, MqRecord *rec, Datum *values, bool *nulls)
{
	values[0] = PointerGetDatum(out->topic);
	values[1] = Int32GetDatum(partition);
	values[2] = Int64GetDatum(rec->offset);
	values[3] = TimestampTzGetDatum(rec->ts);
	nulls[0] = nulls[1] = nulls[2] = nulls[3] = false;
	nulls[4] = rec->key == NULL;
	if (rec->key)
		values[4] = column_datum(out, out->key_form, partition, rec, rec->key, rec->keylen, "key");
	nulls[5] = rec->value == NULL;
	if (rec->value)
		values[5] = column_datum(out, out->value_form, partition, rec, rec->value, rec->valuelen,
								 "value");
	nulls[6] = rec->nheaders == 0;
	if (rec->nheaders > 0 && out->scratch)
	{
		/* the array is kept; its elements' rows, made on the way, are not */
		MemoryContext old = MemoryContextSwitchTo(out->scratch);
		Datum		headers = MqHeadersDatum(out->header_type, out->header_desc, rec);

		MemoryContextSwitchTo(old);
		values[6] = datumCopy(headers, false, -1);
		MemoryContextReset(out->scratch);
	}
	else if (rec->nheaders > 0)
		values[6] = MqHeadersDatum(out->header_type, out->header_desc, rec);
}

/*
 * The rows kept grew past work_mem: they go to a tuplestore, which writes
 * them to a temporary file past work_mem as a Function Scan's did, and so
 * do the rows after them; a read of millions of records would otherwise
 * take their size in memory, and fail once the row array outgrew
 * MaxAllocSize.
 * The memory of the rows kept is given back: the datums past the topic
 * (key, value, headers) are each their own allocation.
 */
static void
sink_to_store(MqRecordOutput *out)
{
	MqRowSink  *sink = out->sink;
	MemoryContext old = MemoryContextSwitchTo(sink->cxt);

	sink->store = tuplestore_begin_heap(sink->random_access, false, work_mem);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < sink->nrows; i++)
	{
		Datum	   *values = &sink->values[i * sink->natts];
		bool	   *nulls = &sink->nulls[i * sink->natts];

		tuplestore_putvalues(sink->store, out->desc, values, nulls);
		for (int att = 4; att < sink->natts; att++)
			if (!nulls[att])
				pfree(DatumGetPointer(values[att]));
	}
	if (sink->values)
	{
		pfree(sink->values);
		pfree(sink->nulls);
	}
	sink->values = NULL;
	sink->nulls = NULL;
	sink->nrows = sink->maxrows = 0;
	sink->bytes = 0;
	out->store = sink->store;
	out->sink = NULL;
}

/*
 * One row kept in the sink, its datums in the sink's memory, counted as a
 * tuplestore counts its rows against work_mem.
 */
static void
emit_to_sink(MqRecordOutput *out, int32 partition, MqRecord *rec)
{
	MqRowSink  *sink = out->sink;
	MemoryContext old = MemoryContextSwitchTo(sink->cxt);
	Datum	   *values;
	bool	   *nulls;

	if (sink->nrows == sink->maxrows)
	{
		sink->maxrows = Max(64, sink->maxrows * 2);
		if (sink->values)
		{
			sink->values = repalloc(sink->values, sizeof(Datum) * sink->natts * sink->maxrows);
			sink->nulls = repalloc(sink->nulls, sizeof(bool) * sink->natts * sink->maxrows);
		}
		else
		{
			sink->values = palloc(sizeof(Datum) * sink->natts * sink->maxrows);
			sink->nulls = palloc(sizeof(bool) * sink->natts * sink->maxrows);
		}
	}
	values = &sink->values[sink->nrows * sink->natts];
	nulls = &sink->nulls[sink->nrows * sink->natts];
	record_datums(out, partition, rec, values, nulls);
	sink->nrows++;
	sink->bytes += (sizeof(Datum) + sizeof(bool)) * sink->natts;
	for (int att = 4; att < sink->natts; att++)
		if (!nulls[att])
			sink->bytes += GetMemoryChunkSpace(DatumGetPointer(values[att]));
	MemoryContextSwitchTo(old);
	/* the next doubling of the arrays must stay an ordinary allocation */
	if (sink->bytes > work_mem * (Size) 1024 ||
		(sink->nrows == sink->maxrows &&
		 sizeof(Datum) * sink->natts * sink->maxrows * 2 > MaxAllocSize))
		sink_to_store(out);
}

/*
 * One row into the result.  Its datums (copies of key and value, headers)
 * are made in rowcxt, which is reset once the rows it holds, already
 * copied by the tuplestore, fill its first block: a read of 500 records of
 * 1 KiB would otherwise take half a megabyte of fresh memory per call, and
 * pay a page fault for every few records.
 */
static void
emit_record(MqRecordOutput *out, MemoryContext *rowcxt, int32 partition, MqRecord *rec)
{
	Datum		values[7];
	bool		nulls[7];
	MemoryContext old;

	if (out->sink)
	{
		emit_to_sink(out, partition, rec);
		return;
	}
	/* made here too for a sink that went to its tuplestore in this read */
	if (*rowcxt == NULL)
		*rowcxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog record rows",
										MQ_ROW_BLOCK, MQ_ROW_BLOCK, MQ_ROW_BLOCK);
	old = MemoryContextSwitchTo(*rowcxt);

	record_datums(out, partition, rec, values, nulls);
	tuplestore_putvalues(out->store, out->desc, values, nulls);
	MemoryContextSwitchTo(old);
	if (MemoryContextMemAllocated(*rowcxt, false) > MQ_ROW_BLOCK)
		MemoryContextReset(*rowcxt);
}

/* ------------------------------------------------------------------------
 * Reading records
 * ------------------------------------------------------------------------ */

/*
 * Read up to max_records committed records at or after from_offset, and
 * at most about max_bytes of keys and values (at least one record, as in
 * Kafka).  A batch begun within max_records is read on to its end while
 * the total stays within batch_max_records (at most max_records when
 * smaller).  Returns the offset after the last record returned, or where
 * the read stopped.
 */
int64
MqReadPartition(MqTopic *topic, int32 partition, int64 from_offset,
				int max_records, int batch_max_records, int64 max_bytes,
				MqRecordOutput *out, int *nread)
{
	int64		lso,
				hw;
	MqLogIter	it;
	MqRecord   *rec;
	int64		next;
	MemoryContext rowcxt = NULL;

	MqPartitionOffsets(topic, partition, &lso, &hw);
	if (from_offset >= hw)
	{
		if (nread)
			*nread = 0;
		return from_offset;
	}
	if (out)
	{
		/* a sink's rows point to it: it lives as long as they do */
		out->topic = out->sink ? text_in_context(out->sink->cxt, topic->name)
			: cstring_to_text(topic->name);
	}
	MqLogIterBegin(&it, topic, partition, from_offset, lso, MQ_ITER_RECORDS | MQ_ITER_HIDE_KAFKA_ABORTED);
	it.max_records = max_records;
	it.batch_max_records = batch_max_records;
	it.max_bytes = max_bytes;
	while ((rec = MqLogNextRecord(&it)) != NULL)
		if (out)
			emit_record(out, &rowcxt, partition, rec);
	next = it.next;
	if (nread)
		*nread = it.nreturned;
	MqLogIterEnd(&it);
	if (rowcxt)
		MemoryContextDelete(rowcxt);
	return next;
}

/*
 * The memory of a reader's result: its tuplestore holds a copy of every
 * row, half a megabyte for a poll of 500 records of 1 KiB, and made in the
 * query's own memory those pages were fresh for every call, one page fault
 * for every four kilobytes (17 % of a 1 KiB consumer's backend).  So the
 * tuplestore is made in a context of the backend's whose first block
 * (MQ_RESULT_KEEP) stays mapped from call to call.  The query's memory
 * still decides how long it lives: a callback resets it when the query's
 * per-query memory goes (at the end of the query, or at an error).  It
 * serves the calls of one query at a time; a call from a query nested in
 * it (a function that fetches, called by a query that fetches) takes the
 * query's memory as before.
 */
#define MQ_RESULT_KEEP	(1024 * 1024)

static MemoryContext result_cxt = NULL;
static MemoryContext result_owner = NULL;	/* the per-query memory it serves */

static void
result_release(void *arg)
{
	MemoryContextReset(result_cxt);
	result_owner = NULL;
}

static MemoryContext
result_context(MemoryContext per_query)
{
	MemoryContextCallback *cb;

	if (result_owner == per_query)
		return result_cxt;
	if (result_owner != NULL)
		return per_query;
	if (result_cxt == NULL)
		result_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog result rows",
										   0, MQ_RESULT_KEEP, ALLOCSET_DEFAULT_MAXSIZE);
	cb = MemoryContextAlloc(per_query, sizeof(MemoryContextCallback));
	cb->func = result_release;
	cb->arg = NULL;
	MemoryContextRegisterResetCallback(per_query, cb);
	result_owner = per_query;
	return result_cxt;
}

/*
 * The call that sql/scan.c makes with rsinfo is to keep its rows in sink.
 * Only that call: the next MqInitRecordOutput with this rsinfo takes it,
 * and one with another (a read nested in the call, say) does not.
 */
static ReturnSetInfo *armed_rsinfo = NULL;
static MqRowSink *armed_sink = NULL;

void
MqRowSinkArm(ReturnSetInfo *rsinfo, MqRowSink *sink)
{
	armed_rsinfo = rsinfo;
	armed_sink = sink;
}

void
MqInitRecordOutput(FunctionCallInfo fcinfo, MqRecordOutput *out)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			arraytype;
	MemoryContext old;

	out->sink = NULL;
	out->scratch = NULL;
	if (rsinfo != NULL && rsinfo == armed_rsinfo)
	{
		/* the scan node's call: its result type, the rows in result memory */
		out->sink = armed_sink;
		armed_rsinfo = NULL;
		armed_sink = NULL;
		out->store = NULL;
		out->desc = rsinfo->expectedDesc;
		out->sink->natts = out->desc->natts;
		out->sink->cxt = result_context(rsinfo->econtext->ecxt_per_query_memory);
		out->scratch = AllocSetContextCreate(CurrentMemoryContext, "mqlog record temporaries",
											 ALLOCSET_DEFAULT_SIZES);
		rsinfo->returnMode = SFRM_Materialize;
	}
	else
	{
		/* its checks and result type; then the same tuplestore in result memory */
		InitMaterializedSRF(fcinfo, 0);
		tuplestore_end(rsinfo->setResult);
		old = MemoryContextSwitchTo(result_context(rsinfo->econtext->ecxt_per_query_memory));
		rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
												  false, work_mem);
		MemoryContextSwitchTo(old);
		out->store = rsinfo->setResult;
		out->desc = rsinfo->setDesc;
	}
	if (!MqIsRecordDesc(out->desc))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("result type of function %s does not match mqlog.record",
						get_func_name(fcinfo->flinfo->fn_oid)),
				 errdetail("A record reader returns the columns topic, partition, offset, ts, key, value and headers, in that order."),
				 errhint("Restore the type's attributes, or reinstall the extension.")));
	out->key_form = form_of_column(out->desc, 4);
	out->value_form = form_of_column(out->desc, 5);
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
 * '-infinity' (or any time before timestamptz's range) is before every
 * record, so it answers the first one; 'infinity' is after them all.
 */
int64
MqOffsetForTime(MqTopic *topic, int32 partition, TimestampTz ts, TimestampTz *found_ts)
{
	int64		lso,
				hw;
	int64		result = -1;
	MqLogIter	headers;

	/*
	 * Record timestamps are Kafka's milliseconds: so is the question.  The
	 * round trip saturates, so an infinite ts stays infinite.
	 */
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
