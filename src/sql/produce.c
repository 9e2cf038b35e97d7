/*-------------------------------------------------------------------------
 *
 * produce.c
 *		The SQL entry points that write: mq_produce (and its text and jsonb
 *		forms), mq_produce_batch and mq_produce_kafka_batch validate their
 *		arguments, choose partitions
 *		(Kafka's murmur2 for keys) and append one batch per partition
 *		through the service API (log/append.c).
 *
 * Everything that can fail on bad input is checked before the partition
 * lock is taken and before any byte is written, so a failed call leaves the
 * log as it was.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "store/batch.h"
#include "log/append.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/topic.h"
#include "acl/acl.h"

PG_FUNCTION_INFO_V1(mq_produce);
PG_FUNCTION_INFO_V1(mq_produce_text);
PG_FUNCTION_INFO_V1(mq_produce_json);
PG_FUNCTION_INFO_V1(mq_produce_batch);
PG_FUNCTION_INFO_V1(mq_produce_kafka_batch);
PG_FUNCTION_INFO_V1(mq_murmur2);
PG_FUNCTION_INFO_V1(mq_partition_for_key);

/* null-key records go to one partition per call, round robin across calls */
static uint32 sticky_counter = 0;
static bool sticky_seeded = false;

static int32
sticky_partition(MqTopic *topic)
{
	if (!sticky_seeded)
	{
		sticky_counter = (uint32) MyProcPid;
		sticky_seeded = true;
	}
	if (topic->replicas != NULL)
	{
		/* a replicated topic: the partitions this node leads, if any */
		for (int i = 0; i < topic->partitions; i++)
		{
			int32		p = (int32) (sticky_counter++ % (uint32) topic->partitions);

			if (MqTopicLeadsHere(topic, p))
				return p;
		}
	}
	return (int32) (sticky_counter++ % (uint32) topic->partitions);
}

static int32
key_partition(const char *key, int keylen, int partitions)
{
	return (MqMurmur2(key, keylen) & 0x7fffffff) % partitions;
}

static void
check_writable(const char *fn)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot produce to mqlog during recovery"),
				 errhint("Produce on the primary server.")));
	PreventCommandIfReadOnly(fn);
}

static TimestampTz
record_timestamp(MqTopic *topic, bool ts_null, TimestampTz ts, TimestampTz now)
{
	if (topic->log_append_time || ts_null)
		return now;
	/* what a batch cannot carry would make the partition unreadable */
	if (TIMESTAMP_NOT_FINITE(ts) || ts < MIN_TIMESTAMP || ts >= END_TIMESTAMP)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("record timestamp out of range"),
				 errdetail("A record's timestamp must be a finite time that timestamptz can hold.")));
	return ts;
}

/* mqlog.header[] -> MqHeaderKV[] */
static int
parse_header_array(ArrayType *arr, MqHeaderKV **out)
{
	Oid			elemtype = ARR_ELEMTYPE(arr);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	TupleDesc	desc;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a one-dimensional array")));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign, &elems, &nulls, &n);
	desc = lookup_rowtype_tupdesc(elemtype, -1);
	*out = n > 0 ? palloc(sizeof(MqHeaderKV) * n) : NULL;
	for (int i = 0; i < n; i++)
	{
		HeapTupleHeader th;
		HeapTupleData tup;
		bool		knull,
					vnull;
		Datum		k,
					v;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("record header %d is null", i + 1),
					 errhint("Each header is a (key, value) pair; only the value may be null.")));
		th = DatumGetHeapTupleHeader(elems[i]);
		tup.t_len = HeapTupleHeaderGetDatumLength(th);
		tup.t_data = th;
		k = heap_getattr(&tup, 1, desc, &knull);
		v = heap_getattr(&tup, 2, desc, &vnull);
		if (knull)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("record header %d has a null key", i + 1),
					 errhint("Header keys are strings; only the value may be null.")));
		(*out)[i].key = VARDATA_ANY(DatumGetTextPP(k));
		(*out)[i].keylen = VARSIZE_ANY_EXHDR(DatumGetTextPP(k));
		if (vnull)
		{
			(*out)[i].value = NULL;
			(*out)[i].valuelen = 0;
		}
		else
		{
			bytea	   *b = DatumGetByteaPP(v);

			(*out)[i].value = VARDATA_ANY(b);
			(*out)[i].valuelen = VARSIZE_ANY_EXHDR(b);
		}
	}
	ReleaseTupleDesc(desc);
	return n;
}

/*
 * One record's headers from jsonb: [["key", "value"], ["k2", null], ...],
 * or an object {"key": "value", ...} when keys are unique.
 */
static int
parse_header_jsonb(JsonbValue *jv, int recno, MqHeaderKV **out)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0,
				max = 8;
	bool		is_object;
	int			depth = 0;
	char	   *pendingkey = NULL;
	int			pendingkeylen = 0;
	int			npair = 0;

	if (jv->type == jbvNull)
	{
		*out = NULL;
		return 0;
	}
	if (jv->type != jbvBinary)
		goto bad;
	*out = palloc(sizeof(MqHeaderKV) * max);
	it = JsonbIteratorInit(jv->val.binary.data);
	tok = JsonbIteratorNext(&it, &v, false);
	if (tok != WJB_BEGIN_ARRAY && tok != WJB_BEGIN_OBJECT)
		goto bad;
	is_object = (tok == WJB_BEGIN_OBJECT);
	depth = 1;
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (n == max)
		{
			max *= 2;
			*out = repalloc(*out, sizeof(MqHeaderKV) * max);
		}
		if (is_object)
		{
			if (tok == WJB_KEY)
			{
				pendingkey = v.val.string.val;
				pendingkeylen = v.val.string.len;
			}
			else if (tok == WJB_VALUE)
			{
				if (v.type != jbvString && v.type != jbvNull)
					goto bad;
				(*out)[n].key = pendingkey;
				(*out)[n].keylen = pendingkeylen;
				(*out)[n].value = v.type == jbvNull ? NULL : v.val.string.val;
				(*out)[n].valuelen = v.type == jbvNull ? 0 : v.val.string.len;
				n++;
			}
			else if (tok == WJB_END_OBJECT)
				break;
			else
				goto bad;
			continue;
		}
		/* array of [key, value] pairs */
		if (tok == WJB_BEGIN_ARRAY && depth == 1)
		{
			depth = 2;
			npair = 0;
		}
		else if (tok == WJB_ELEM && depth == 2)
		{
			if (npair == 0)
			{
				if (v.type != jbvString)
					goto bad;
				(*out)[n].key = v.val.string.val;
				(*out)[n].keylen = v.val.string.len;
			}
			else if (npair == 1)
			{
				if (v.type != jbvString && v.type != jbvNull)
					goto bad;
				(*out)[n].value = v.type == jbvNull ? NULL : v.val.string.val;
				(*out)[n].valuelen = v.type == jbvNull ? 0 : v.val.string.len;
			}
			else
				goto bad;
			npair++;
		}
		else if (tok == WJB_END_ARRAY && depth == 2)
		{
			if (npair != 2)
				goto bad;
			n++;
			depth = 1;
		}
		else if (tok == WJB_END_ARRAY && depth == 1)
			break;
		else
			goto bad;
	}
	return n;

bad:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("malformed headers for record %d", recno),
			 errhint("Give each record's headers as an array of [key, value] pairs of strings (the value may be null), for example '[[\"trace\", \"abc\"]]'.")));
	return 0;
}

/*
 * mq_produce, mq_produce_text and mq_produce_json: one record, its value and
 * key given as bytes (bytea) or as text (text, jsonb; stored as UTF-8), its
 * headers as mqlog.header[] or, beside text, as jsonb in mq_produce_batch's
 * form for one record.  The three differ only in how their arguments become
 * bytes; everything after is the one produce path.
 */
static Datum
produce_record(FunctionCallInfo fcinfo, const char *fn, MqValueForm value_form,
			   MqValueForm key_form)
{
	MqTopic    *topic;
	MqRecord	rec;
	int32		partition;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		offset;
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic must not be null")));
	check_writable(fn);
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	topic = MqTopicLookup(name, false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_PRODUCE);

	memset(&rec, 0, sizeof(rec));
	if (!PG_ARGISNULL(1))
		rec.value = MqDatumBytes(PG_GETARG_DATUM(1), value_form, &rec.valuelen);
	if (!PG_ARGISNULL(2))
		rec.key = MqDatumBytes(PG_GETARG_DATUM(2), key_form, &rec.keylen);
	if (!PG_ARGISNULL(3) && value_form == MQ_FORM_BYTES)
		rec.nheaders = parse_header_array(PG_GETARG_ARRAYTYPE_P(3), &rec.headers);
	else if (!PG_ARGISNULL(3))
	{
		Jsonb	   *hj = PG_GETARG_JSONB_P(3);
		JsonbValue	jv;

		jv.type = jbvBinary;
		jv.val.binary.data = &hj->root;
		jv.val.binary.len = VARSIZE(hj) - VARHDRSZ;
		rec.nheaders = parse_header_jsonb(&jv, 1, &rec.headers);
	}
	rec.ts = record_timestamp(topic, PG_ARGISNULL(5), PG_ARGISNULL(5) ? 0 : PG_GETARG_TIMESTAMPTZ(5),
							  GetCurrentTimestamp());

	if (!PG_ARGISNULL(4))
	{
		partition = PG_GETARG_INT32(4);
		MqCheckPartition(topic, partition);
	}
	else if (rec.key)
		partition = key_partition(rec.key, rec.keylen, topic->partitions);
	else
		partition = sticky_partition(topic);
	MqCheckRecord(topic, &rec);

	offset = MqLogAppend(&topic, partition, &rec, 1);

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "%s must return a composite type", fn);
	desc = BlessTupleDesc(desc);
	values[0] = Int32GetDatum(partition);
	values[1] = Int64GetDatum(offset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

Datum
mq_produce(PG_FUNCTION_ARGS)
{
	return produce_record(fcinfo, "mq_produce", MQ_FORM_BYTES, MQ_FORM_BYTES);
}

Datum
mq_produce_text(PG_FUNCTION_ARGS)
{
	return produce_record(fcinfo, "mq_produce_text", MQ_FORM_TEXT, MQ_FORM_TEXT);
}

Datum
mq_produce_json(PG_FUNCTION_ARGS)
{
	return produce_record(fcinfo, "mq_produce_json", MQ_FORM_JSON, MQ_FORM_TEXT);
}

static int
cmp_int32(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

Datum
mq_produce_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MqTopic    *topic;
	ArrayType  *varr;
	Datum	   *vals;
	bool	   *vnulls;
	int			n;
	Datum	   *keys = NULL;
	bool	   *knulls = NULL;
	int			nkeys = 0;
	Datum	   *tss = NULL;
	bool	   *tsnulls = NULL;
	int			nts = 0;
	MqRecord   *recs;
	int32	   *parts;
	int32	   *order;
	int32		fixed = -1;
	int32		sticky = -1;
	TimestampTz now;
	MemoryContext cxt,
				old;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("values must not be null"),
				 errhint("Pass an array of bytea values; an element may be null (a tombstone).")));
	check_writable("mq_produce_batch");
	topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_PRODUCE);
	InitMaterializedSRF(fcinfo, 0);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "mq_produce_batch", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);

	varr = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(varr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("values must be a one-dimensional array")));
	deconstruct_array(varr, BYTEAOID, -1, false, TYPALIGN_INT, &vals, &vnulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("values must not be empty")));
	if (!PG_ARGISNULL(2))
	{
		ArrayType  *karr = PG_GETARG_ARRAYTYPE_P(2);

		if (ARR_NDIM(karr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("keys must be a one-dimensional array")));
		deconstruct_array(karr, BYTEAOID, -1, false, TYPALIGN_INT, &keys, &knulls, &nkeys);
		if (nkeys != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("keys and values differ in length (%d and %d)", nkeys, n),
					 errhint("Pass one key per value; a key may be null.")));
	}
	if (!PG_ARGISNULL(4))
	{
		fixed = PG_GETARG_INT32(4);
		MqCheckPartition(topic, fixed);
	}
	if (!PG_ARGISNULL(5))
	{
		ArrayType  *tarr = PG_GETARG_ARRAYTYPE_P(5);

		if (ARR_NDIM(tarr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timestamps must be a one-dimensional array")));
		deconstruct_array(tarr, TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, &tss, &tsnulls, &nts);
		if (nts != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("timestamps and values differ in length (%d and %d)", nts, n),
					 errhint("Pass one timestamp per value; a null one means now.")));
	}

	recs = palloc0(sizeof(MqRecord) * n);
	parts = palloc(sizeof(int32) * n);
	now = GetCurrentTimestamp();
	for (int i = 0; i < n; i++)
	{
		MqRecord   *rec = &recs[i];

		if (!vnulls[i])
			rec->value = MqDatumBytes(vals[i], MQ_FORM_BYTES, &rec->valuelen);
		if (keys && !knulls[i])
			rec->key = MqDatumBytes(keys[i], MQ_FORM_BYTES, &rec->keylen);
		rec->ts = record_timestamp(topic, tss == NULL || tsnulls[i],
								   tss == NULL || tsnulls[i] ? 0 : DatumGetTimestampTz(tss[i]), now);
		if (fixed >= 0)
			parts[i] = fixed;
		else if (rec->key)
			parts[i] = key_partition(rec->key, rec->keylen, topic->partitions);
		else
		{
			if (sticky < 0)
				sticky = sticky_partition(topic);
			parts[i] = sticky;
		}
	}
	if (!PG_ARGISNULL(3))
	{
		Jsonb	   *hj = PG_GETARG_JSONB_P(3);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		int			i = 0;

		if (!JB_ROOT_IS_ARRAY(hj) || JB_ROOT_IS_SCALAR(hj))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("headers must be a JSON array with one element per value"),
					 errhint("For example '[[[\"trace\", \"abc\"]], null]' for two records.")));
		if (JB_ROOT_COUNT(hj) != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("headers and values differ in length (%d and %d)", JB_ROOT_COUNT(hj), n),
					 errhint("Pass one element per value; use null for a record without headers.")));
		it = JsonbIteratorInit(&hj->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			recs[i].nheaders = parse_header_jsonb(&v, i + 1, &recs[i].headers);
			i++;
		}
	}
	for (int i = 0; i < n; i++)
		MqCheckRecord(topic, &recs[i]);

	/* one batch per partition, records in their input order */
	order = palloc(sizeof(int32) * n);
	memcpy(order, parts, sizeof(int32) * n);
	qsort(order, n, sizeof(int32), cmp_int32);
	{
		MqPartition **touched = palloc(sizeof(MqPartition *) * n);
		int			ntouched = 0;

		for (int i = 0; i < n; i++)
			if (i == 0 || order[i - 1] != order[i])
				touched[ntouched++] = MqTopicPartition(topic, order[i]);
		MqPartitionCheckInflightRoom(touched, ntouched);
	}
	for (int i = 0; i < n; i++)
	{
		int32		p = order[i];
		MqRecord   *group;
		int			ng = 0;
		int64		base;
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		if (i > 0 && order[i - 1] == p)
			continue;
		group = palloc(sizeof(MqRecord) * n);
		for (int j = 0; j < n; j++)
			if (parts[j] == p)
				group[ng++] = recs[j];
		base = MqLogAppend(&topic, p, group, ng);
		values[0] = Int32GetDatum(p);
		values[1] = Int64GetDatum(base);
		values[2] = Int32GetDatum(ng);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		pfree(group);
	}

	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return (Datum) 0;
}

/*
 * mq_produce_kafka_batch(topic, partition, batch): append a record batch v2
 * that a Kafka producer encoded, as a broker does with a Produce request:
 * the log assigns the offsets and returns the base offset.
 */
Datum
mq_produce_kafka_batch(PG_FUNCTION_ARGS)
{
	MqTopic    *topic;
	int32		partition = PG_GETARG_INT32(1);
	bytea	   *batch = PG_GETARG_BYTEA_PP(2);

	check_writable("mq_produce_kafka_batch");
	topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_PRODUCE);
	MqCheckPartition(topic, partition);
	PG_RETURN_INT64(MqLogAppendKafka(&topic, partition, VARDATA_ANY(batch),
									 VARSIZE_ANY_EXHDR(batch), -1, -1, NULL, false, false));
}

Datum
mq_murmur2(PG_FUNCTION_ARGS)
{
	bytea	   *data = PG_GETARG_BYTEA_PP(0);

	PG_RETURN_INT32(MqMurmur2(VARDATA_ANY(data), VARSIZE_ANY_EXHDR(data)));
}

Datum
mq_partition_for_key(PG_FUNCTION_ARGS)
{
	bytea	   *key = PG_GETARG_BYTEA_PP(0);
	int32		partitions = PG_GETARG_INT32(1);

	if (partitions < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of partitions must be at least 1")));
	PG_RETURN_INT32(key_partition(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key), partitions));
}
