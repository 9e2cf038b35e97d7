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

typedef struct MqRecordOutput
{
	Tuplestorestate *store;
	TupleDesc	desc;
	Oid			header_type;	/* mqlog.header */
	TupleDesc	header_desc;
	text	   *topic;			/* set by MqReadPartition */
} MqRecordOutput;

extern bytea *MqBytea(const char *data, int len);
extern void MqInitRecordOutput(FunctionCallInfo fcinfo, MqRecordOutput *out);
extern int64 MqReadPartition(MqTopic *topic, int32 partition, int64 from_offset,
							 int max_records, int64 max_bytes, MqRecordOutput *out,
							 int *nread);
extern int64 MqOffsetForTime(MqTopic *topic, int32 partition, TimestampTz ts, TimestampTz *found_ts);
extern Datum MqHeadersDatum(Oid header_type, TupleDesc header_desc, MqRecord *rec);

#endif							/* MQLOG_RECORDS_H */
