/*-------------------------------------------------------------------------
 *
 * dump.c
 *		A segment's dump form: what pg_dump writes of a segment relation and
 *		pg_restore loads back, through COPY.
 *
 * Segment relations are created by mqlog at run time, so they are not
 * members of the extension: pg_dump writes each one's CREATE TABLE and its
 * data with "COPY mqlog_data.<segment> (...) TO stdout", and a restore runs
 * the same COPY ... FROM stdin into the relation it has just created.  The
 * catalog (topics, chains, offsets, grants) travels as the data of the
 * extension's configuration tables (pg_extension_config_dump).
 *
 * A segment's records, as the sequential scan shows them to a DBA, do not
 * carry its log: batch boundaries, codecs, producer fields, CRCs and the
 * holes left by aborted transactions would all be lost, and with the holes
 * the log end offset that consumers committed against.  So COPY TO of a
 * segment relation (the table form, which is what pg_dump runs; SELECT and
 * COPY (SELECT ...) keep showing records) writes one row per stored batch,
 * in the same columns:
 *
 *		"offset"	the batch's base offset
 *		ts			its baseTimestamp
 *		key			null
 *		value		the stored batch: mqlog's 8-byte prefix with the batch's
 *					fate (MQ_BATCH_COMMITTED or MQ_BATCH_ABORTED) and xid 0,
 *					then Kafka's record batch v2 byte for byte
 *		headers		null
 *
 * from the first batch to the first one whose transaction is still running
 * (as the DBA's scan stops there), aborted batches included.
 *
 * COPY FROM into a segment relation is a restore.  It is accepted only from
 * the segment's owner (the extension owner) or a superuser, only into an
 * empty segment, and only for rows of the dump form, checked one by one
 * (prefix, header, CRC, offsets that only grow and stay within the chain's
 * range for the segment).  The utility hook takes AccessExclusiveLock on the
 * segment and gives it a new relfilenode, as TRUNCATE does, before the COPY
 * runs: nobody reads or appends to it meanwhile, and a COPY that fails
 * leaves it empty, so the restore can be run again.  Each batch is appended
 * at its place with mqlog's own WAL (flagged XLMQ_RESTORE: logical decoding
 * skips it, the records are not new), keeping its fate from the dump in the
 * prefix, as a follower keeps its leader's.  If the segment is already a
 * partition's active one, the partition's tail in shared memory is
 * forgotten, so that the next append reads it from disk: the log continues
 * at the old log end offset.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "base/spi.h"
#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/dump.h"
#include "log/partition.h"
#include "log/topic.h"

#define DUMP_NATTS 5

/* the COPY TO in progress: its segment */
static Oid	dump_relid = InvalidOid;

/* the COPY FROM in progress */
typedef struct MqRestore
{
	Oid			relid;			/* InvalidOid: none */
	int32		topic_id;		/* from the chain, 0 when not listed (yet) */
	int32		partition;
	int64		next;			/* the next batch starts at or after it */
	int64		limit;			/* and ends at or before it */
	uint64		lpos;			/* where it goes */
	StringInfoData buf;
} MqRestore;

static MqRestore restore;

/* The segment's place in a chain, if mqlog.segment lists it already. */
static bool
segment_place(Oid relid, int32 *topic_id, int32 *partition, int64 *base,
			  bool *sealed, int64 *next_offset)
{
	MqSpi		spi;
	Oid			argtype = OIDOID;
	Datum		arg = ObjectIdGetDatum(relid);
	bool		found = false;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT s.topic_id, s.\"partition\", s.base_offset, s.sealed, s.next_offset"
							  " FROM mqlog.segment s WHERE s.relid OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: segment lookup failed");
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		*topic_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		*partition = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		*base = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		*sealed = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		d = SPI_getbinval(tup, desc, 5, &isnull);
		*next_offset = isnull ? -1 : DatumGetInt64(d);
		found = true;
	}
	MqSpiEnd(&spi);
	return found;
}

/*
 * COPY FROM into a segment: refused before any lock is taken unless the
 * caller owns the segment (so that nobody else can hold it up), then the
 * segment is locked, checked empty and given a new relfilenode.
 */
static void
restore_begin(Oid relid)
{
	Relation	rel;
	int32		topic_id = 0,
				partition = 0;
	int64		base = -1,
				next_offset = -1;
	bool		sealed = false;

	if (!pg_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to restore mqlog segment \"%s\"", get_rel_name(relid)),
				 errdetail("COPY FROM into a segment restores the batches pg_dump wrote of it; only its owner (the owner of extension mqlog) or a superuser may do that."),
				 errhint("Produce with mq_produce() or mq_produce_batch().")));

	rel = table_open(relid, AccessExclusiveLock);
	if (MqSegmentUsedBlocks(rel) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mqlog segment \"%s\" is not empty", RelationGetRelationName(rel)),
				 errdetail("COPY FROM restores a segment from pg_dump's data into the empty relation a restore created; it never adds to a log."),
				 errhint("Produce with mq_produce() or mq_produce_batch().")));

	memset(&restore, 0, sizeof(restore));
	restore.relid = relid;
	/* as TRUNCATE does: a failed COPY leaves the old, empty file */
	RelationSetNewRelfilenode(rel, rel->rd_rel->relpersistence);
	CommandCounterIncrement();
	table_close(rel, NoLock);

	restore.next = 0;
	restore.limit = PG_INT64_MAX;
	if (segment_place(relid, &topic_id, &partition, &base, &sealed, &next_offset))
	{
		restore.topic_id = topic_id;
		restore.partition = partition;
		if (base >= 0)
			restore.next = base;
		if (sealed && next_offset >= 0)
			restore.limit = next_offset;
		/*
		 * A partition's active segment: its tail is read again from disk.
		 * A parallel restore (pg_restore -j) may load the chain's row before
		 * the topic's: then no partition of the topic has state to forget.
		 */
		if (!sealed)
		{
			MqTopic    *topic = MqTopicFindById(topic_id);

			if (topic != NULL)
				MqPartitionForgetTail(MqTopicPartition(topic, partition));
		}
	}
	initStringInfo(&restore.buf);
}

void
MqDumpCopyStart(CopyStmt *stmt, Oid relid)
{
	if (stmt->is_from)
		restore_begin(relid);
	else
		dump_relid = relid;
}

void
MqDumpCopyEnd(void)
{
	dump_relid = InvalidOid;
	memset(&restore, 0, sizeof(restore));
}

bool
MqDumpScanning(Relation rel)
{
	return OidIsValid(dump_relid) && RelationGetRelid(rel) == dump_relid;
}

/*
 * A replicated topic's log lives on every replica and its metadata in
 * etcd: pg_dump leaves its catalog rows out (the filters of
 * pg_extension_config_dump), and COPY of its segments is refused, naming
 * every replicated topic for pg_dump's --exclude-table.  Checked once the
 * COPY has passed its privilege checks, so it tells nothing to a role that
 * may not read the segment.
 */
void
MqDumpScanBegin(Relation rel)
{
	MqSpi		spi;
	Oid			argtype = OIDOID;
	Datum		arg = ObjectIdGetDatum(RelationGetRelid(rel));
	char	   *topic = NULL;
	char	   *excludes = NULL;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT t.name, (SELECT pg_catalog.string_agg(pg_catalog.format('--exclude-table=''mqlog_data.\"%s\"-[0-9]*''', t2.name), ' ' ORDER BY t2.name)"
							  "   FROM mqlog.topic t2 JOIN mqlog.replicated_topic r2 ON r2.topic_id OPERATOR(pg_catalog.=) t2.topic_id)"
							  " FROM mqlog.segment s JOIN mqlog.topic t ON t.topic_id OPERATOR(pg_catalog.=) s.topic_id"
							  " JOIN mqlog.replicated_topic r ON r.topic_id OPERATOR(pg_catalog.=) t.topic_id"
							  " WHERE s.relid OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: segment lookup failed");
	if (SPI_processed == 1)
	{
		topic = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		excludes = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
	}
	MqSpiEnd(&spi);
	if (topic)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("segment \"%s\" of replicated topic \"%s\" cannot be dumped",
						RelationGetRelationName(rel), topic),
				 errdetail("pg_dump keeps single-node topics only: a replicated topic's log lives on its replicas, its metadata in etcd."),
				 errhint("Leave out the segments of replicated topics: pg_dump %s", excludes)));
}

/* The next row of the dump form: one stored batch, its fate in the prefix. */
bool
MqDumpNextRow(MqLogIter *it, TupleTableSlot *slot)
{
	bytea	   *value;
	char	   *data;
	TransactionId none = InvalidTransactionId;

	if (!MqLogNextBatch(it))
		return false;
	value = (bytea *) palloc(VARHDRSZ + it->hdr.length);
	SET_VARSIZE(value, VARHDRSZ + it->hdr.length);
	data = VARDATA(value);
	memcpy(data, it->stored, it->hdr.length);
	data[0] = (char) (it->fate == MQ_FATE_VISIBLE ? MQ_BATCH_COMMITTED : MQ_BATCH_ABORTED);
	memcpy(data + 4, &none, sizeof(TransactionId));

	memset(slot->tts_isnull, 0, sizeof(bool) * DUMP_NATTS);
	slot->tts_values[0] = Int64GetDatum(it->hdr.base_offset);
	slot->tts_values[1] = TimestampTzGetDatum(it->hdr.first_timestamp);
	slot->tts_isnull[2] = true;
	slot->tts_values[3] = PointerGetDatum(value);
	slot->tts_isnull[4] = true;
	ExecStoreVirtualTuple(slot);
	return true;
}

bool
MqRestoring(Oid relid)
{
	return OidIsValid(restore.relid) && restore.relid == relid;
}

static void
bad_row(Relation rel, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
			 errmsg("row is not a batch of the dump form of mqlog segment \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("%s", detail),
			 errhint("COPY FROM into a segment takes only what COPY TO of a segment wrote (pg_dump's data): one stored batch per row.")));
}

/* Rows of the dump form, checked, appended where they were. */
void
MqRestoreRows(Relation rel, TupleTableSlot **slots, int nslots)
{
	Assert(MqRestoring(RelationGetRelid(rel)));
	(void) GetCurrentTransactionId();

	for (int i = 0; i < nslots; i++)
	{
		TupleTableSlot *slot = slots[i];
		bytea	   *value;
		const char *data;
		Size		len;
		uint8		fate;
		MqBatchHeader hdr;
		int64		offset;

		slot_getallattrs(slot);
		if (slot->tts_isnull[0] || slot->tts_isnull[3])
			bad_row(rel, "Its \"offset\" or its value is null.");
		if (!slot->tts_isnull[2] || !slot->tts_isnull[4])
			bad_row(rel, "Its key and headers must be null: the value holds the whole batch.");
		offset = DatumGetInt64(slot->tts_values[0]);
		value = DatumGetByteaPP(slot->tts_values[3]);
		data = VARDATA_ANY(value);
		len = VARSIZE_ANY_EXHDR(value);
		if (len < MQ_BATCH_HEADER_SIZE || (uint8) data[1] != MQ_PREFIX_MAGIC)
			bad_row(rel, "Its value is not a stored batch.");
		fate = (uint8) data[0];
		if (fate != MQ_BATCH_COMMITTED && fate != MQ_BATCH_ABORTED)
			bad_row(rel, "Its batch does not say whether it was committed or aborted.");

		/* this transaction's xid, as the one that wrote it; the fate decides */
		resetStringInfo(&restore.buf);
		MqBatchWrapKafka(&restore.buf, data + MQ_PREFIX_SIZE, (uint32) (len - MQ_PREFIX_SIZE),
						 GetCurrentTransactionId());
		restore.buf.data[0] = (char) fate;
		if (!MqBatchParseHeader(restore.buf.data, restore.buf.len, &hdr) ||
			hdr.length != (uint32) restore.buf.len || hdr.last_offset_delta < 0 ||
			hdr.record_count < 0 || hdr.base_offset < 0)
			bad_row(rel, "Its batch header is not valid.");
		if (!MqBatchCheckCrc(restore.buf.data, restore.buf.len))
			bad_row(rel, psprintf("The CRC of its batch at offset " INT64_FORMAT " does not match.",
								  hdr.base_offset));
		if (hdr.base_offset != offset)
			bad_row(rel, psprintf("Its \"offset\" " INT64_FORMAT " is not its batch's base offset " INT64_FORMAT ".",
								  offset, hdr.base_offset));
		if (!slot->tts_isnull[1] && DatumGetTimestampTz(slot->tts_values[1]) != hdr.first_timestamp)
			bad_row(rel, "Its ts is not its batch's base timestamp.");
		if (hdr.base_offset < restore.next)
			bad_row(rel, psprintf("Its batch at offset " INT64_FORMAT " would come before offset " INT64_FORMAT ", where the segment goes on.",
								  hdr.base_offset, restore.next));
		if (MqBatchNextOffset(&hdr) > restore.limit)
			bad_row(rel, psprintf("Its batch at offset " INT64_FORMAT " ends past offset " INT64_FORMAT ", where the next segment of the chain starts.",
								  hdr.base_offset, restore.limit));

		MqSegmentAppend(rel, restore.topic_id, restore.partition, restore.lpos,
						restore.buf.data, restore.buf.len, -1, XLMQ_RESTORE);
		restore.lpos += restore.buf.len;
		restore.next = MqBatchNextOffset(&hdr);
		slot->tts_tableOid = RelationGetRelid(rel);
	}
}
