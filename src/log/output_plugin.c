/*-------------------------------------------------------------------------
 *
 * output_plugin.c
 *		The "mqlog" logical decoding output plugin: one text row per record
 *		of the appends rm_decode (store/wal.c) queues.
 *
 * rm_decode queues every append record of a decodable transaction as a
 * transactional logical message with prefix "mqlog" whose content is the
 * WAL record's main data: the xl_mqlog_append header (topic id, partition,
 * base offset, chunk position, LSO at append time, format) followed by the
 * chunk's bytes, which are the stored batch exactly as the leader stored
 * it (mqlog's prefix and Kafka's record batch v2).  Messages are delivered
 * at commit in WAL order, which is offset order within a partition, and
 * never for an aborted transaction or subtransaction.  Any consumer of the
 * "mqlog" prefix (pgoutput with messages 'true' too) sees the same bytes.
 *
 * This plugin turns those messages into rows:
 *
 *		topic orders partition 0 offset 5 key 'customer-7' value '{"id":1}'
 *
 * Keys and values print as quoted text when they are printable UTF-8,
 * otherwise as unquoted \x hex.  Batches larger than one WAL record arrive
 * in several messages and are reassembled first; compressed batches are
 * decompressed.  A message of another format version is refused.
 *
 * A Kafka transaction's records print as SQL readers see them
 * (read_committed): nothing at their batches' own commits, all of them at
 * the commit of the transaction's COMMIT marker, read back from the log
 * (emit_committed_transaction), and nothing for an ABORT.  Read back, not
 * held: an open transaction costs no memory here, and a decoding session
 * that starts between the batches and the marker still prints them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/xlog_internal.h"
#include "catalog/namespace.h"
#include "commands/defrem.h"
#include "mb/pg_wchar.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"
#include "replication/snapbuild.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "log/logiter.h"
#include "log/topic.h"
#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"


/* ------------------------------------------------------------------------
 * Output plugin
 * ------------------------------------------------------------------------ */

typedef struct MqOutputState
{
	MemoryContext cxt;			/* reset after each batch */
	StringInfoData batch;		/* reassembled batch */
	bool		include_xids;
	bool		replica;		/* binary replica stream (see below) */
} MqOutputState;

extern void _PG_output_plugin_init(OutputPluginCallbacks *cb);

static void
out_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	MqOutputState *st = MemoryContextAllocZero(ctx->context, sizeof(MqOutputState));
	ListCell   *lc;

	st->cxt = AllocSetContextCreate(ctx->context, "mqlog output", ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&st->batch);
	foreach(lc, ctx->output_plugin_options)
	{
		DefElem    *elem = lfirst(lc);

		if (strcmp(elem->defname, "include-xids") == 0)
			st->include_xids = elem->arg == NULL || defGetBoolean(elem);
		else if (strcmp(elem->defname, "replica") == 0)
			st->replica = elem->arg == NULL || defGetBoolean(elem);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" is not recognized by the mqlog output plugin", elem->defname),
					 errhint("Valid options are: include-xids, replica.")));
	}
	ctx->output_plugin_private = st;
	MqSetReplicaDecoding(st->replica ? ctx : NULL, st->replica ? st : NULL);
	opt->output_type = st->replica ? OUTPUT_PLUGIN_BINARY_OUTPUT : OUTPUT_PLUGIN_TEXTUAL_OUTPUT;
	opt->receive_rewrites = false;
}

static void
out_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
}

static void
out_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
}

static void
out_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, Relation rel, ReorderBufferChange *change)
{
	/* ordinary table changes are not part of the log */
}

/* Topic name from the catalog, read with the historic snapshot. */
static char *
topic_name(int32 topic_id)
{
	Oid			nsp = get_namespace_oid("mqlog", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("topic", nsp) : InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *name = NULL;

	if (!OidIsValid(relid))
		return psprintf("%d", topic_id);
	rel = table_open(relid, AccessShareLock);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(topic_id));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		if (!isnull)
			name = TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return name ? name : psprintf("%d", topic_id);
}

static void
append_bytes(StringInfo out, const char *data, int len)
{
	bool		printable = pg_verifymbstr(data, len, true);

	for (int i = 0; printable && i < len; i++)
		if ((unsigned char) data[i] < 0x20 || data[i] == 0x7f)
			printable = false;
	if (printable)
	{
		appendStringInfoChar(out, '\'');
		for (int i = 0; i < len; i++)
		{
			if (data[i] == '\'')
				appendStringInfoChar(out, '\'');
			appendStringInfoChar(out, data[i]);
		}
		appendStringInfoChar(out, '\'');
	}
	else
	{
		static const char hex[] = "0123456789abcdef";

		/* unquoted, so that it cannot be mistaken for text */
		appendStringInfoString(out, "\\x");
		for (int i = 0; i < len; i++)
		{
			appendStringInfoChar(out, hex[((unsigned char) data[i]) >> 4]);
			appendStringInfoChar(out, hex[((unsigned char) data[i]) & 0xf]);
		}
	}
}

/*
 * The replica stream: one binary message per decoding message, a type byte
 * and the message's content as rm_decode (or mqlog._replica_mark) wrote
 * it, in native byte order (followers run the same build):
 *
 *		'A' xl_mqlog_append + chunk	an append, at once, aborted ones too
 *		'C' xl_mqlog_append			its transaction committed
 *		'L' MqLsoMark				the leader's LSO of one partition
 *		'O' MqOffsetMark + group	a group's committed offset, at commit
 *
 * The follower (workers/apply.c) gets each message's LSN in the stream's
 * XLogData header.
 */
static void
replica_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr lsn,
				bool transactional, const char *prefix, Size message_size,
				const char *message)
{
	char		type;

	/* what pg_logical_emit_message() wrote under our prefixes is not ours */
	if (!MqDecodedOwnMessage(ctx, transactional, lsn))
		return;

	if (strcmp(prefix, MQLOG_APPEND_PREFIX) == 0 && message_size >= SizeOfMqlogAppend)
		type = 'A';
	else if (strcmp(prefix, MQLOG_COMMIT_PREFIX) == 0 && message_size >= SizeOfMqlogAppend)
		type = 'C';
	else if (strcmp(prefix, MQLOG_LSO_PREFIX) == 0 && message_size == sizeof(MqLsoMark))
		type = 'L';
	else if (strcmp(prefix, MQLOG_OFFSET_PREFIX) == 0 && message_size >= sizeof(MqOffsetMark))
		type = 'O';
	else
		return;
	if ((type == 'A' || type == 'C') &&
		((const xl_mqlog_append *) message)->format != MQ_SEGMENT_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog decoding message is in format %u, this mqlog streams format %d",
						((const xl_mqlog_append *) message)->format, MQ_SEGMENT_FORMAT)));
	OutputPluginPrepareWrite(ctx, true);
	appendStringInfoChar(ctx->out, type);
	appendBinaryStringInfo(ctx->out, message, message_size);
	OutputPluginWrite(ctx, true);
}

/* one text row per record of recs */
static void
emit_records(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, const char *name,
			 int32 partition, MqRecord *recs, int n)
{
	MqOutputState *st = ctx->output_plugin_private;

	for (int i = 0; i < n; i++)
	{
		OutputPluginPrepareWrite(ctx, i == n - 1);
		appendStringInfo(ctx->out, "topic %s partition %d offset " INT64_FORMAT,
						 name, partition, recs[i].offset);
		if (st->include_xids)
			appendStringInfo(ctx->out, " xid %u", txn->xid);
		appendStringInfoString(ctx->out, " key ");
		if (recs[i].key)
			append_bytes(ctx->out, recs[i].key, recs[i].keylen);
		else
			appendStringInfoString(ctx->out, "null");
		appendStringInfoString(ctx->out, " value ");
		if (recs[i].value)
			append_bytes(ctx->out, recs[i].value, recs[i].valuelen);
		else
			appendStringInfoString(ctx->out, "null");
		for (int h = 0; h < recs[i].nheaders; h++)
		{
			appendStringInfoString(ctx->out, h == 0 ? " headers " : ", ");
			append_bytes(ctx->out, recs[i].headers[h].key, recs[i].headers[h].keylen);
			appendStringInfoChar(ctx->out, '=');
			if (recs[i].headers[h].value)
				append_bytes(ctx->out, recs[i].headers[h].value, recs[i].headers[h].valuelen);
			else
				appendStringInfoString(ctx->out, "null");
		}
		OutputPluginWrite(ctx, i == n - 1);
	}
}

/* a Kafka transaction's batch, held back until its marker (not the marker) */
static bool
kafka_transactional(const MqBatchHeader *hdr)
{
	return (hdr->attributes & MQ_ATTR_TRANSACTIONAL) && !(hdr->attributes & MQ_ATTR_CONTROL) &&
		hdr->producer_id >= 0;
}

/* is this control batch a COMMIT marker (control record key: version, type 1)? */
static bool
commit_marker(const char *batch, const MqBatchHeader *hdr)
{
	MqRecord   *recs;
	int			n = MqBatchDecodeAll(batch, hdr, PG_INT64_MIN, hdr->record_count, &recs);

	return n > 0 && recs[0].key != NULL && recs[0].keylen >= 4 &&
		recs[0].key[2] == 0 && recs[0].key[3] == 1;
}

/*
 * A Kafka transaction committed on this partition: its records, read back
 * from the log, emitted now.  They are its producer's transactional
 * batches below the marker and after that producer's previous marker; the
 * first of them is at or after lso, the partition's last stable offset
 * when the marker was appended, which the transaction's own hold kept at
 * or below its first offset.  Two passes over [lso, marker): headers to
 * find the producer's previous marker, then the batches, one in memory at
 * a time, so a transaction of any size costs a batch's memory.  Nothing
 * removes them while the transaction is open: retention and
 * mq_delete_records stop at the LSO it holds, and compaction waits for
 * it.  A batch removed after the transaction ended, before a lagging slot
 * got here, is not emitted (no reader can see it any more).
 */
static void
emit_committed_transaction(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, const char *name,
						   int32 topic_id, int32 partition, int64 producer_id,
						   int64 marker, int64 lso)
{
	MqTopic    *topic = MqTopicFindById(topic_id);
	MqLogIter	it;
	int64		from = lso;

	if (topic == NULL || lso < 0 || lso >= marker)
		return;

	/*
	 * A walsender's cache may hold the segment chain of an earlier point
	 * of the WAL, loaded after the generation it was checked against
	 * moved: the chain as of this marker, read again.
	 */
	topic = MqTopicRefresh(topic->name);
	if (partition >= topic->partitions)
		return;
	MqLogIterBegin(&it, topic, partition, from, -1, MQ_ITER_ANY_FATE);
	while (MqLogNextBatch(&it) && it.hdr.base_offset < marker)
		if (it.hdr.producer_id == producer_id && (it.hdr.attributes & MQ_ATTR_CONTROL))
			from = MqBatchNextOffset(&it.hdr);
	MqLogIterEnd(&it);

	MqLogIterBegin(&it, topic, partition, from, -1, MQ_ITER_ANY_FATE | MQ_ITER_RECORDS);
	while (MqLogNextBatch(&it) && it.hdr.base_offset < marker)
	{
		MemoryContext old;
		MqRecord   *recs;
		int			n;

		if (it.hdr.producer_id != producer_id || !kafka_transactional(&it.hdr) ||
			MqBatchGetFate(&it.hdr, marker) != MQ_FATE_VISIBLE)
			continue;
		old = MemoryContextSwitchTo(it.cxt);
		n = MqBatchDecodeAll(it.stored, &it.hdr, from, it.hdr.record_count, &recs);
		emit_records(ctx, txn, name, partition, recs, n);
		MemoryContextSwitchTo(old);
		MemoryContextReset(it.cxt);
	}
	MqLogIterEnd(&it);
}

/*
 * One decoded append.  A SQL reader's rule (read_committed's) holds here
 * too: a Kafka transaction's batches are not emitted at their own
 * PostgreSQL commit, when their fate is not known, but at the commit of
 * their COMMIT marker, read back from the log; an ABORT marker emits
 * nothing, and neither does a marker itself.
 */
static void
out_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr message_lsn,
			bool transactional, const char *prefix, Size message_size, const char *message)
{
	MqOutputState *st = ctx->output_plugin_private;
	xl_mqlog_append xlrec;
	MemoryContext old;
	MqRecord   *recs;
	MqBatchHeader hdr;
	char	   *name;
	int			n;

	if (st->replica)
	{
		replica_message(ctx, txn, message_lsn, transactional, prefix, message_size, message);
		return;
	}
	if (strcmp(prefix, MQLOG_MESSAGE_PREFIX) != 0 || message_size < SizeOfMqlogAppend ||
		!MqDecodedOwnMessage(ctx, transactional, message_lsn))
		return;
	memcpy(&xlrec, message, SizeOfMqlogAppend);
	if (xlrec.format != MQ_SEGMENT_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog decoding message of partition %d is in format %u, this mqlog reads format %d",
						xlrec.partition, xlrec.format, MQ_SEGMENT_FORMAT)));
	if (xlrec.chunk_start == 0)
		resetStringInfo(&st->batch);
	if (st->batch.len != (int) xlrec.chunk_start)
		return;					/* decoding started in the middle of a batch */
	appendBinaryStringInfo(&st->batch, message + SizeOfMqlogAppend, xlrec.chunk_length);
	if (xlrec.chunk_start + xlrec.chunk_length < xlrec.batch_length)
		return;

	if (!MqBatchCheckCrc(st->batch.data, st->batch.len))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("CRC mismatch in decoded mqlog batch at offset " INT64_FORMAT " of partition %d",
						xlrec.base_offset, xlrec.partition)));
	/* a follower writes the leader's aborted batches too, marked so */
	if (((unsigned char) st->batch.data[0]) & MQ_BATCH_ABORTED)
	{
		resetStringInfo(&st->batch);
		return;
	}
	old = MemoryContextSwitchTo(st->cxt);
	(void) MqBatchParseHeader(st->batch.data, st->batch.len, &hdr);
	if (hdr.attributes & MQ_ATTR_CONTROL)
	{
		if (hdr.producer_id >= 0 && commit_marker(st->batch.data, &hdr))
			emit_committed_transaction(ctx, txn, topic_name(xlrec.topic_id), xlrec.topic_id,
									   xlrec.partition, hdr.producer_id, hdr.base_offset, xlrec.lso);
	}
	else if (!kafka_transactional(&hdr))
	{
		name = topic_name(xlrec.topic_id);
		n = MqBatchDecodeAll(st->batch.data, &hdr, PG_INT64_MIN, hdr.record_count, &recs);
		emit_records(ctx, txn, name, xlrec.partition, recs, n);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->cxt);
	resetStringInfo(&st->batch);
}

static void
out_shutdown(LogicalDecodingContext *ctx)
{
	MqOutputState *st = ctx->output_plugin_private;

	if (st && st->replica)
		MqSetReplicaDecoding(NULL, NULL);
}

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = out_startup;
	cb->begin_cb = out_begin;
	cb->change_cb = out_change;
	cb->commit_cb = out_commit;
	cb->message_cb = out_message;
	cb->shutdown_cb = out_shutdown;
}
