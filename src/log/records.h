/*-------------------------------------------------------------------------
 *
 * records.h
 *		Records as SQL rows, and the record readers behind mq_fetch, mq_poll
 *		and offsets for times (records.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_RECORDS_H
#define MQLOG_RECORDS_H

#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/tuplestore.h"

#include "log/topic.h"
#include "store/batch.h"

/*
 * How a key or value is given to a producer or shown to a reader: as the
 * bytes themselves (bytea), or as UTF-8 text read as text or jsonb.  A
 * reader's form follows the column type of its result (mqlog.record,
 * mqlog.text_record, mqlog.json_record), so mq_fetch_text is mq_fetch with
 * another result type, not a second reader.
 */
typedef enum MqValueForm
{
	MQ_FORM_BYTES,
	MQ_FORM_TEXT,
	MQ_FORM_JSON
} MqValueForm;

/*
 * The rows of one read kept for sql/scan.c's executor node instead of a
 * tuplestore: each row's datums as the reader made them (a bytea with a
 * four-byte header, which the output function sends without a copy), in
 * memory that lives as long as the query's.  Rows beyond work_mem go to a
 * tuplestore instead, as a Function Scan's would: then store holds them
 * all and values none.
 */
typedef struct MqRowSink
{
	bool		random_access;	/* set by the caller: read backward or from a mark */
	int			natts;
	int			nrows;
	int			maxrows;
	Datum	   *values;			/* nrows * natts */
	bool	   *nulls;
	Size		bytes;			/* kept in values and their datums */
	Tuplestorestate *store;		/* or NULL */
	MemoryContext cxt;			/* the rows and their datums */
} MqRowSink;

typedef struct MqRecordOutput
{
	Tuplestorestate *store;		/* NULL when the rows go to sink */
	MqRowSink  *sink;
	TupleDesc	desc;
	MqValueForm key_form;		/* of column 5 */
	MqValueForm value_form;		/* of column 6 */
	Oid			header_type;	/* mqlog.header */
	TupleDesc	header_desc;
	text	   *topic;			/* set by MqReadPartition */
	MemoryContext scratch;		/* a sink's text, json and header temporaries */
} MqRecordOutput;

extern bytea *MqBytea(const char *data, int len);
extern const char *MqDatumBytes(Datum datum, MqValueForm form, int *len);
extern bool MqIsRecordDesc(TupleDesc desc);
extern void MqInitRecordOutput(FunctionCallInfo fcinfo, MqRecordOutput *out);
struct ReturnSetInfo;
extern void MqRowSinkArm(struct ReturnSetInfo *rsinfo, MqRowSink *sink);
extern int64 MqReadPartition(MqTopic *topic, int32 partition, int64 from_offset,
							 int max_records, int batch_max_records, int64 max_bytes,
							 MqRecordOutput *out, int *nread);
extern int64 MqOffsetForTime(MqTopic *topic, int32 partition, TimestampTz ts, TimestampTz *found_ts);
extern Datum MqHeadersDatum(Oid header_type, TupleDesc header_desc, MqRecord *rec);

#endif							/* MQLOG_RECORDS_H */
