/*-------------------------------------------------------------------------
 *
 * wal.c
 *		mqlog's custom WAL resource manager: redo, desc, identify and mask
 *		for segment pages, and rm_decode, which hands appends to logical
 *		decoding (the output plugin is log/output_plugin.c).
 *
 * PostgreSQL 15 lets an extension register a resource manager under an id
 * from 128 up.  mqlog uses RM_EXPERIMENTAL_ID (128), the id reserved for
 * development; a production deployment that shares a cluster with another
 * custom rmgr must get a permanent id registered with the PostgreSQL
 * project (see doc/architecture.md).  WAL that holds mqlog records can only
 * be replayed by a server that preloads mqlog.
 *
 * Records:
 *	APPEND		one chunk of a batch: an xl_mqlog_append header and the chunk's
 *				bytes in the main data (so a full-page image never hides the
 *				bytes decoding needs), and up to MQ_WAL_MAX_BLOCKS block
 *				references.  A page the chunk starts at its data start is
 *				initialized by redo (REGBUF_WILL_INIT), others are standard
 *				pages that may carry a full-page image after a checkpoint.
 *	APPEND_WHOLE	the same for a batch that fits one record, with a short
 *				header (wal.h); redo and decoding see both through
 *				MqWalReadAppend.
 *	APPEND_PACKED	the same for a new batch, with nothing that the record
 *				or the batch says twice (wal.h): what most appends write.
 *				MqWalReadAppend rebuilds the batch byte for byte.
 *	TRUNCATE	cuts a torn batch off the page it began on.
 *	FREEZE		records the fate of batches in their headers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/bufmask.h"
#include "access/xlog_internal.h"
#include "access/xlogutils.h"
#include "access/xact.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/reorderbuffer.h"
#include "replication/snapbuild.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "utils/memutils.h"

#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"

/* ------------------------------------------------------------------------
 * The three forms of an append record
 * ------------------------------------------------------------------------ */

/*
 * The packed form's header (wal.h) into packed, which XLogInsert reads
 * later; its length, or -1 when the batch is not a new one of this
 * transaction.  No allocation: the caller is in a critical section.
 */
static int
pack_append(const xl_mqlog_append *xlrec, const char *chunk, char *packed)
{
	char	   *p = packed;
	int			n;

	p += MqVarintPut(p, xlrec->topic_id);
	p += MqVarintPut(p, xlrec->partition);
	p += MqVarintPut(p, xlrec->first_pos);
	p += MqVarintPut(p, xlrec->base_offset - xlrec->lso);
	n = MqBatchPackHeader(chunk, xlrec->chunk_length, GetCurrentTransactionIdIfAny(), p);
	return n < 0 ? -1 : (int) (p - packed) + n;
}

uint8
MqWalRegisterAppend(const xl_mqlog_append *xlrec, const char *chunk)
{
	/* XLogInsert reads these later */
	static xl_mqlog_append_whole whole;
	static char packed[4 * MQ_VARINT_MAX + MQ_PACKED_HEADER_MAX];

	if (xlrec->chunk_start == 0 && xlrec->chunk_length == xlrec->batch_length &&
		xlrec->first_pos == xlrec->batch_pos && xlrec->lso >= 0 &&
		xlrec->lso <= xlrec->base_offset && xlrec->base_offset - xlrec->lso <= PG_UINT32_MAX)
	{
		int			n = (xlrec->flags == 0 && xlrec->format == MQ_SEGMENT_FORMAT) ?
			pack_append(xlrec, chunk, packed) : -1;

		if (n > 0)
		{
			XLogRegisterData(packed, n);
			XLogRegisterData((char *) chunk + MQ_BATCH_HEADER_SIZE,
							 xlrec->chunk_length - MQ_BATCH_HEADER_SIZE);
			return XLOG_MQLOG_APPEND_PACKED;
		}
		whole.topic_id = xlrec->topic_id;
		whole.partition = xlrec->partition;
		whole.lso_lag = (uint32) (xlrec->base_offset - xlrec->lso);
		whole.first_pos = xlrec->first_pos;
		whole.flags = xlrec->flags;
		whole.format = xlrec->format;
		XLogRegisterData((char *) &whole, SizeOfMqlogAppendWhole);
		XLogRegisterData((char *) chunk, xlrec->chunk_length);
		return XLOG_MQLOG_APPEND_WHOLE;
	}
	/* the caller's header, which it keeps until XLogInsert */
	XLogRegisterData((char *) xlrec, SizeOfMqlogAppend);
	XLogRegisterData((char *) chunk, xlrec->chunk_length);
	return XLOG_MQLOG_APPEND;
}

/* the packed form (wal.h), its batch rebuilt in scratch */
static const char *
read_packed(XLogReaderState *record, xl_mqlog_append *xlrec, StringInfo scratch)
{
	const char *p = XLogRecGetData(record);
	const char *end = p + XLogRecGetDataLen(record);
	int64		topic_id,
				partition,
				first_pos,
				lso_lag;
	MqBatchHeader hdr;
	BlockNumber blkno;

	if (!MqVarintGet(&p, end, &topic_id) || !MqVarintGet(&p, end, &partition) ||
		!MqVarintGet(&p, end, &first_pos) || !MqVarintGet(&p, end, &lso_lag) ||
		topic_id < PG_INT32_MIN || topic_id > PG_INT32_MAX ||
		partition < PG_INT32_MIN || partition > PG_INT32_MAX ||
		first_pos < MQ_PAGE_DATA_START || first_pos >= MQ_PAGE_DATA_END ||
		lso_lag < 0 || lso_lag > PG_UINT32_MAX ||
		!MqBatchUnpack(p, end - p, XLogRecGetXid(record), scratch) ||
		!MqBatchParseHeader(scratch->data, scratch->len, &hdr) ||
		!XLogRecGetBlockTagExtended(record, 0, NULL, NULL, &blkno, NULL))
		return NULL;
	xlrec->topic_id = (int32) topic_id;
	xlrec->partition = (int32) partition;
	xlrec->base_offset = hdr.base_offset;
	xlrec->lso = hdr.base_offset - lso_lag;
	xlrec->batch_length = hdr.length;
	xlrec->chunk_start = 0;
	xlrec->chunk_length = hdr.length;
	xlrec->batch_block = blkno;
	xlrec->batch_pos = (uint16) first_pos;
	xlrec->first_pos = (uint16) first_pos;
	xlrec->flags = 0;
	xlrec->format = MQ_SEGMENT_FORMAT;
	return scratch->data;
}

const char *
MqWalReadAppend(XLogReaderState *record, xl_mqlog_append *xlrec, StringInfo scratch)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	const char *data = XLogRecGetData(record);
	Size		len = XLogRecGetDataLen(record);

	memset(xlrec, 0, sizeof(*xlrec));
	if (info == XLOG_MQLOG_APPEND_PACKED)
		return read_packed(record, xlrec, scratch);
	if (info == XLOG_MQLOG_APPEND)
	{
		if (len < SizeOfMqlogAppend)
			return NULL;
		memcpy(xlrec, data, SizeOfMqlogAppend);
		if (len != SizeOfMqlogAppend + xlrec->chunk_length ||
			xlrec->format != MQ_SEGMENT_FORMAT)
			return NULL;
		return data + SizeOfMqlogAppend;
	}
	if (info == XLOG_MQLOG_APPEND_WHOLE)
	{
		xl_mqlog_append_whole whole;
		MqBatchHeader hdr;
		const char *batch = data + SizeOfMqlogAppendWhole;
		BlockNumber blkno;

		if (len < SizeOfMqlogAppendWhole)
			return NULL;
		memcpy(&whole, data, SizeOfMqlogAppendWhole);
		if (whole.format != MQ_SEGMENT_FORMAT ||
			!MqBatchParseHeader(batch, len - SizeOfMqlogAppendWhole, &hdr) ||
			hdr.length != len - SizeOfMqlogAppendWhole ||
			!XLogRecGetBlockTagExtended(record, 0, NULL, NULL, &blkno, NULL))
			return NULL;
		xlrec->topic_id = whole.topic_id;
		xlrec->partition = whole.partition;
		xlrec->base_offset = hdr.base_offset;
		xlrec->lso = hdr.base_offset - whole.lso_lag;
		xlrec->batch_length = hdr.length;
		xlrec->chunk_start = 0;
		xlrec->chunk_length = hdr.length;
		xlrec->batch_block = blkno;
		xlrec->batch_pos = whole.first_pos;
		xlrec->first_pos = whole.first_pos;
		xlrec->flags = whole.flags;
		xlrec->format = whole.format;
		return batch;
	}
	return NULL;
}

/* the startup process's scratch for packed batches, kept across records */
static StringInfoData redo_scratch;

static void
redo_append(XLogReaderState *record)
{
	XLogRecPtr	lsn = record->EndRecPtr;
	xl_mqlog_append xlrec;
	const char *data;
	uint32		off = 0;

	if (redo_scratch.data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		initStringInfo(&redo_scratch);
		MemoryContextSwitchTo(old);
	}
	data = MqWalReadAppend(record, &xlrec, &redo_scratch);

	/*
	 * WAL of another segment format (mqlog 0.1.0 wrote a shorter header and
	 * its own batches) cannot be replayed into this format's pages: stop
	 * rather than misread it.
	 */
	if (data == NULL)
		elog(PANIC, "mqlog WAL append record at %X/%X is not of segment format %d; replay it with the mqlog build that wrote it",
			 LSN_FORMAT_ARGS(record->ReadRecPtr), MQ_SEGMENT_FORMAT);
	for (int block_id = 0; block_id <= XLogRecMaxBlockId(record); block_id++)
	{
		BlockNumber blkno;
		uint16		pos = (block_id == 0) ? xlrec.first_pos : MQ_PAGE_DATA_START;
		uint32		n = Min((uint32) (MQ_PAGE_DATA_END - pos), xlrec.chunk_length - off);
		bool		init = (pos == MQ_PAGE_DATA_START);
		Buffer		buf;
		XLogRedoAction action;

		XLogRecGetBlockTag(record, block_id, NULL, NULL, &blkno);
		if (init)
		{
			buf = XLogInitBufferForRedo(record, block_id);
			action = BLK_NEEDS_REDO;
		}
		else
			action = XLogReadBufferForRedo(record, block_id, &buf);

		if (action == BLK_NEEDS_REDO)
		{
			Page		page = BufferGetPage(buf);

			MqPageWriteChunk(page, blkno, init, &xlrec, pos, data + off, n);
			PageSetLSN(page, lsn);
			MarkBufferDirty(buf);
		}
		if (BufferIsValid(buf))
			UnlockReleaseBuffer(buf);
		off += n;
	}
	if (off != xlrec.chunk_length)
		elog(PANIC, "mqlog append record covers %u of %u bytes", off, xlrec.chunk_length);
}

static void
redo_truncate(XLogReaderState *record)
{
	xl_mqlog_truncate *xlrec = (xl_mqlog_truncate *) XLogRecGetData(record);
	Buffer		buf;

	if (XLogReadBufferForRedo(record, 0, &buf) == BLK_NEEDS_REDO)
	{
		Page		page = BufferGetPage(buf);

		memset((char *) page + xlrec->end_pos, 0, MQ_PAGE_DATA_END - xlrec->end_pos);
		((PageHeader) page)->pd_lower = xlrec->end_pos;
		PageSetLSN(page, record->EndRecPtr);
		MarkBufferDirty(buf);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

static void
redo_freeze(XLogReaderState *record)
{
	xl_mqlog_freeze xlrec;
	const char *items = XLogRecGetData(record) + sizeof(xl_mqlog_freeze);
	Buffer		buf;

	memcpy(&xlrec, XLogRecGetData(record), sizeof(xlrec));
	if (XLogReadBufferForRedo(record, 0, &buf) == BLK_NEEDS_REDO)
	{
		Page		page = BufferGetPage(buf);

		for (int i = 0; i < xlrec.nbatches; i++)
		{
			MqFreezeItem item;

			memcpy(&item, items + i * sizeof(MqFreezeItem), sizeof(MqFreezeItem));
			((char *) page)[item.pos] |= item.flags;
		}
		PageSetLSN(page, record->EndRecPtr);
		MarkBufferDirty(buf);
	}
	if (BufferIsValid(buf))
		UnlockReleaseBuffer(buf);
}

static void
mqlog_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;

	switch (info)
	{
		case XLOG_MQLOG_APPEND:
		case XLOG_MQLOG_APPEND_WHOLE:
		case XLOG_MQLOG_APPEND_PACKED:
			redo_append(record);
			break;
		case XLOG_MQLOG_TRUNCATE:
			redo_truncate(record);
			break;
		case XLOG_MQLOG_FREEZE:
			redo_freeze(record);
			break;
		case XLOG_MQLOG_MESSAGE:
			break;				/* for logical decoding only */
		default:
			elog(PANIC, "mqlog_redo: unknown op code %u", info);
	}
}

static void
mqlog_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	char	   *rec = XLogRecGetData(record);

	if (info == XLOG_MQLOG_APPEND || info == XLOG_MQLOG_APPEND_WHOLE ||
		info == XLOG_MQLOG_APPEND_PACKED)
	{
		xl_mqlog_append xlrec;
		StringInfoData scratch;

		initStringInfo(&scratch);
		if (MqWalReadAppend(record, &xlrec, &scratch) == NULL)
			appendStringInfoString(buf, "not of this build's segment format");
		else
			appendStringInfo(buf, "topic %d partition %d base_offset " INT64_FORMAT
							 " bytes %u..%u of %u lso " INT64_FORMAT,
							 xlrec.topic_id, xlrec.partition, xlrec.base_offset,
							 xlrec.chunk_start, xlrec.chunk_start + xlrec.chunk_length,
							 xlrec.batch_length, xlrec.lso);
		pfree(scratch.data);
	}
	else if (info == XLOG_MQLOG_TRUNCATE)
		appendStringInfo(buf, "end_pos %u", ((xl_mqlog_truncate *) rec)->end_pos);
	else if (info == XLOG_MQLOG_FREEZE)
		appendStringInfo(buf, "batches %u", ((xl_mqlog_freeze *) rec)->nbatches);
	else if (info == XLOG_MQLOG_MESSAGE)
	{
		xl_mqlog_message hdr;

		memcpy(&hdr, rec, SizeOfMqlogMessage);
		appendStringInfo(buf, "%s, %u bytes",
						 hdr.kind == MQ_MSG_LSO ? "lso" : "offset", hdr.length);
	}
}

static const char *
mqlog_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_MQLOG_APPEND:
			return "APPEND";
		case XLOG_MQLOG_APPEND_WHOLE:
			return "APPEND_WHOLE";
		case XLOG_MQLOG_APPEND_PACKED:
			return "APPEND_PACKED";
		case XLOG_MQLOG_TRUNCATE:
			return "TRUNCATE";
		case XLOG_MQLOG_FREEZE:
			return "FREEZE";
		case XLOG_MQLOG_MESSAGE:
			return "MESSAGE";
	}
	return NULL;
}

/*
 * For wal_consistency_checking: segment pages carry no hint bits (a batch's
 * fate is only ever set with WAL), so only the LSN, the checksum and the
 * unused part of the data area may differ.
 */
static void
mqlog_mask(char *pagedata, BlockNumber blkno)
{
	mask_page_lsn_and_checksum(pagedata);
	mask_unused_space(pagedata);
}

static RmgrData mqlog_rmgr = {
	.rm_name = "mqlog",
	.rm_redo = mqlog_redo,
	.rm_desc = mqlog_desc,
	.rm_identify = mqlog_identify,
	.rm_startup = NULL,
	.rm_cleanup = NULL,
	.rm_mask = mqlog_mask,
	.rm_decode = MqlogDecode,
};

void
MqlogRegisterRmgr(void)
{
	RegisterCustomRmgr(RM_MQLOG_ID, &mqlog_rmgr);
}

/* ------------------------------------------------------------------------
 * rm_decode
 * ------------------------------------------------------------------------ */

/*
 * The decoding context (and its plugin's state, so that a new context at a
 * freed one's address does not inherit the mode) that asked for replica
 * mode.  A process decodes one slot at a time.
 */
static LogicalDecodingContext *replica_ctx = NULL;
static void *replica_state = NULL;

/*
 * Messages are not signed by who wrote them: any role may call
 * pg_logical_emit_message() with mqlog's prefixes.  So the plugin takes a
 * message as mqlog's only if rm_decode queued it.  A non-transactional one
 * is delivered while rm_decode runs, so the record being decoded is
 * mqlog's; a transactional one is delivered at commit with the LSN
 * rm_decode gave it, which is the end of an mqlog record and is kept here
 * until then.  Decoding starts again from the slot's restart LSN in a new
 * process, and so re-queues and re-registers everything it will deliver.
 */
static HTAB *own_lsns = NULL;
static LogicalDecodingContext *own_ctx = NULL;

#define MQ_OWN_LSNS_PURGE	65536

static void
own_register(LogicalDecodingContext *ctx, XLogRecPtr lsn)
{
	bool		found;

	if (own_lsns == NULL || own_ctx != ctx)
	{
		HASHCTL		hctl;

		if (own_lsns != NULL)
			hash_destroy(own_lsns);
		memset(&hctl, 0, sizeof(hctl));
		hctl.keysize = sizeof(XLogRecPtr);
		hctl.entrysize = sizeof(XLogRecPtr);
		own_lsns = hash_create("mqlog own decoding messages", 1024, &hctl,
							   HASH_ELEM | HASH_BLOBS);
		own_ctx = ctx;
	}
	/* markers of aborted transactions are never delivered: drop the old */
	if (hash_get_num_entries(own_lsns) >= MQ_OWN_LSNS_PURGE)
	{
		HASH_SEQ_STATUS seq;
		XLogRecPtr *e;
		XLogRecPtr	horizon = ctx->slot->data.restart_lsn;

		hash_seq_init(&seq, own_lsns);
		while ((e = hash_seq_search(&seq)) != NULL)
			if (*e < horizon)
				(void) hash_search(own_lsns, e, HASH_REMOVE, NULL);
	}
	(void) hash_search(own_lsns, &lsn, HASH_ENTER, &found);
}

bool
MqDecodedOwnMessage(LogicalDecodingContext *ctx, bool transactional, XLogRecPtr lsn)
{
	bool		found = false;

	if (!transactional)
		return ctx->reader->record != NULL && XLogRecGetRmid(ctx->reader) == RM_MQLOG_ID;
	if (own_lsns != NULL && own_ctx == ctx)
		(void) hash_search(own_lsns, &lsn, HASH_REMOVE, &found);
	return found;
}

void
MqSetReplicaDecoding(LogicalDecodingContext *ctx, void *plugin_state)
{
	replica_ctx = ctx;
	replica_state = plugin_state;
}

/* a message record (LSO mark, committed offset) into the replica stream */
static void
decode_message(LogicalDecodingContext *ctx, XLogRecordBuffer *buf)
{
	SnapBuild  *builder = ctx->snapshot_builder;
	XLogReaderState *r = buf->record;
	TransactionId xid = XLogRecGetXid(r);
	xl_mqlog_message hdr;
	const char *data = XLogRecGetData(r) + SizeOfMqlogMessage;
	const char *prefix;
	Snapshot	snapshot;

	if (XLogRecGetDataLen(r) < SizeOfMqlogMessage)
		return;
	memcpy(&hdr, XLogRecGetData(r), SizeOfMqlogMessage);
	if (hdr.dbid != ctx->slot->data.database ||
		XLogRecGetDataLen(r) != SizeOfMqlogMessage + hdr.length)
		return;
	/* only a replica stream wants them */
	if (!(ctx == replica_ctx && ctx->output_plugin_private == replica_state))
		return;
	prefix = hdr.kind == MQ_MSG_LSO ? MQLOG_LSO_PREFIX : MQLOG_OFFSET_PREFIX;
	if (hdr.kind == MQ_MSG_OFFSET)
	{
		/* with its transaction's commit, never for an abort */
		if (!SnapBuildProcessChange(builder, xid, buf->origptr))
			return;
		snapshot = SnapBuildGetOrBuildSnapshot(builder, xid);
		own_register(ctx, buf->endptr);
		ReorderBufferQueueMessage(ctx->reorder, xid, snapshot, buf->endptr, true,
								  prefix, hdr.length, data);
	}
	else if (SnapBuildCurrentState(builder) == SNAPBUILD_CONSISTENT &&
			 !SnapBuildXactNeedsSkip(builder, buf->origptr))
	{
		snapshot = SnapBuildGetOrBuildSnapshot(builder, xid);
		ReorderBufferQueueMessage(ctx->reorder, xid, snapshot, buf->origptr, false,
								  prefix, hdr.length, data);
	}
}

static void decode_append(LogicalDecodingContext *ctx, XLogRecordBuffer *buf);

void
MqlogDecode(LogicalDecodingContext *ctx, XLogRecordBuffer *buf)
{
	SnapBuild  *builder = ctx->snapshot_builder;
	XLogReaderState *r = buf->record;
	TransactionId xid = XLogRecGetXid(r);
	uint8		info = XLogRecGetInfo(r) & ~XLR_INFO_MASK;
	RepOriginId origin_id = XLogRecGetOrigin(r);

	ReorderBufferProcessXid(ctx->reorder, xid, buf->origptr);

	if (info != XLOG_MQLOG_APPEND && info != XLOG_MQLOG_APPEND_WHOLE &&
		info != XLOG_MQLOG_APPEND_PACKED && info != XLOG_MQLOG_MESSAGE)
		return;
	if (SnapBuildCurrentState(builder) < SNAPBUILD_FULL_SNAPSHOT)
		return;
	if (ctx->fast_forward)
		return;
	/* core does not check for a missing callback here, so we do */
	if (ctx->callbacks.filter_by_origin_cb != NULL &&
		filter_by_origin_cb_wrapper(ctx, origin_id))
		return;
	if (info == XLOG_MQLOG_MESSAGE)
	{
		decode_message(ctx, buf);
		return;
	}
	decode_append(ctx, buf);
}

/*
 * An append record as the decoding messages carry it, whatever its form
 * in WAL: the full xl_mqlog_append, then the chunk.
 */
static void
decode_append(LogicalDecodingContext *ctx, XLogRecordBuffer *buf)
{
	SnapBuild  *builder = ctx->snapshot_builder;
	XLogReaderState *r = buf->record;
	TransactionId xid = XLogRecGetXid(r);
	xl_mqlog_append xlrec;
	const char *chunk;
	RelFileNode rnode;
	Snapshot	snapshot;
	char	   *message;
	Size		message_size;
	StringInfoData scratch;

	/* only appends in the slot's database */
	XLogRecGetBlockTag(r, 0, &rnode, NULL, NULL);
	if (rnode.dbNode != ctx->slot->data.database)
		return;

	initStringInfo(&scratch);
	chunk = MqWalReadAppend(r, &xlrec, &scratch);
	if (chunk == NULL)
		elog(ERROR, "mqlog WAL append record at %X/%X is not of segment format %d",
			 LSN_FORMAT_ARGS(r->ReadRecPtr), MQ_SEGMENT_FORMAT);
	/* compaction and a restore write records the log already had */
	if (xlrec.flags & (XLMQ_COMPACTION | XLMQ_RESTORE))
	{
		pfree(scratch.data);
		return;
	}

	message_size = SizeOfMqlogAppend + xlrec.chunk_length;
	message = palloc(message_size);
	memcpy(message, &xlrec, SizeOfMqlogAppend);
	memcpy(message + SizeOfMqlogAppend, chunk, xlrec.chunk_length);

	if (ctx == replica_ctx && ctx->output_plugin_private == replica_state)
	{
		/* the raw append now, as core decodes a non-transactional message */
		if (SnapBuildCurrentState(builder) == SNAPBUILD_CONSISTENT &&
			!SnapBuildXactNeedsSkip(builder, buf->origptr))
		{
			snapshot = SnapBuildGetOrBuildSnapshot(builder, xid);
			ReorderBufferQueueMessage(ctx->reorder, xid, snapshot, buf->origptr, false,
									  MQLOG_APPEND_PREFIX, message_size, message);
		}
		/* and its commit marker, at commit */
		if (xlrec.chunk_start == 0 && SnapBuildProcessChange(builder, xid, buf->origptr))
		{
			snapshot = SnapBuildGetOrBuildSnapshot(builder, xid);
			own_register(ctx, buf->endptr);
			ReorderBufferQueueMessage(ctx->reorder, xid, snapshot, buf->endptr, true,
									  MQLOG_COMMIT_PREFIX, SizeOfMqlogAppend, message);
		}
	}
	else if (SnapBuildProcessChange(builder, xid, buf->origptr))
	{
		snapshot = SnapBuildGetOrBuildSnapshot(builder, xid);
		own_register(ctx, buf->endptr);
		ReorderBufferQueueMessage(ctx->reorder, xid, snapshot, buf->endptr, true,
								  MQLOG_MESSAGE_PREFIX, message_size, message);
	}
	pfree(message);
	pfree(scratch.data);
}

/*
 * Log a message for the replica streams as an mqlog record, which only
 * mqlog's C code can write (unlike pg_logical_emit_message): an LSO mark
 * at once, a committed offset with its transaction.
 */
XLogRecPtr
MqLogMessage(uint16 kind, const char *data, uint32 len)
{
	xl_mqlog_message hdr;

	memset(&hdr, 0, sizeof(hdr));
	hdr.dbid = MyDatabaseId;
	hdr.kind = kind;
	hdr.length = len;
	/* a transactional one belongs to the transaction: it needs its xid */
	if (kind == MQ_MSG_OFFSET)
		(void) GetCurrentTransactionId();
	XLogBeginInsert();
	XLogRegisterData((char *) &hdr, SizeOfMqlogMessage);
	XLogRegisterData((char *) data, len);
	return XLogInsert(RM_MQLOG_ID, XLOG_MQLOG_MESSAGE);
}
