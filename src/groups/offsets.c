/*-------------------------------------------------------------------------
 *
 * offsets.c
 *		The committed-offset store: consumer groups' offsets in the ordinary
 *		table mqlog.committed_offset, read and written as the extension
 *		owner in the caller's transaction, and the WAL message that carries
 *		each offset of a replicated topic to the other nodes.
 *
 * An offset is transactional with the caller's work: that is what makes
 * consume-transform-produce exactly-once.  A commit writes only if the row
 * still holds the offset its member started from (UPDATE ... WHERE
 * committed_offset = expected, or an insert that must find no row), so of
 * two members that both believe they own a partition one fails.  Nothing
 * here checks who calls: positions.c and reset.c do, before they come here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "base/spi.h"
#include "cluster/metadata.h"
#include "store/wal.h"
#include "log/topic.h"
#include "groups/offsets.h"

/*
 * Committed offsets of replicated topics go to every other node: an mqlog
 * message record (store/wal.c: only mqlog writes those, so nobody can
 * forge one), decoded with the commit that wrote the offset (and never if
 * it aborts), which each node's apply worker from this one writes into its
 * own mqlog.committed_offset (workers/apply.c).  A group survives the loss
 * of the node it was coordinated on.  offset < 0: the group's offset of
 * that partition was deleted.  The bytes after the group name, if any, are
 * the commit's metadata string (a Kafka client's, MqOffsetSetMetadata);
 * none: the row's metadata is null.
 *
 * Each write carries its stamp: the newest etcd revision this node saw
 * under its lease (cluster/lease.c), or the row's stamp if that is higher
 * (an offset applied from the coordinator, on a node whose sync has not
 * read etcd since, or not at all since it started: a reset or delete
 * there must still reach the others), kept in the row
 * (mqlog.committed_offset.etcd_revision); a node applies a replicated
 * write only if its stamp is not below the row's.  Why: a coordinator
 * killed with commits not yet streamed sends them when it comes back, after
 * the group's new coordinator, which claimed it at a later revision, wrote
 * newer ones; applied, they would move the group back (167_kafka_faults
 * saw a resumption 210 records below an acknowledged commit).  The old
 * coordinator's row holds its own last stamp (the new one's commits
 * reached it only after), so the row's stamp does not lift it.
 */
static int64
offset_stamp(int32 topic_id)
{
	return MqTopicLookupById(topic_id)->uuid == NULL ? 0 : MqClusterRevisionSeen();
}

static void
replicate_offset(int32 topic_id, int32 partition, const char *group, int64 offset,
				 const char *metadata, int64 stamp)
{
	MqTopic    *topic = MqTopicLookupById(topic_id);
	MqOffsetMark mark;
	StringInfoData buf;

	if (topic->uuid == NULL)
		return;					/* a topic of this node only */
	memset(&mark, 0, sizeof(mark));
	strlcpy(mark.uuid, topic->uuid, sizeof(mark.uuid));
	mark.partition = partition;
	mark.group_len = strlen(group);
	mark.offset = offset;
	mark.etcd_revision = stamp;
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (const char *) &mark, sizeof(mark));
	appendBinaryStringInfo(&buf, group, mark.group_len);
	if (metadata != NULL)
		appendBinaryStringInfo(&buf, metadata, strlen(metadata));
	(void) MqLogMessage(MQ_MSG_OFFSET, buf.data, buf.len);
	pfree(buf.data);
}

/*
 * The statements on the offsets table run on every poll that takes over a
 * partition and on every commit, so their plans are prepared once per
 * backend and kept.
 */
enum
{
	Q_READ,
	Q_READ_TOPIC,
	Q_INSERT_IF_ABSENT,
	Q_UPDATE_IF,
	Q_UPSERT,
	NUM_QUERIES
};

static const char *const query_text[NUM_QUERIES] = {
	"SELECT c.committed_offset FROM mqlog.committed_offset c"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
	" AND c.partition OPERATOR(pg_catalog.=) $3",
	"SELECT c.partition, c.committed_offset FROM mqlog.committed_offset c"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2",
	"INSERT INTO mqlog.committed_offset (group_id, topic_id, partition, committed_offset, etcd_revision)"
	" VALUES ($1, $2, $3, $4, $6) ON CONFLICT DO NOTHING RETURNING etcd_revision",
	"UPDATE mqlog.committed_offset c SET committed_offset = $4, committed_at = pg_catalog.now(),"
	" metadata = NULL, etcd_revision = GREATEST(c.etcd_revision, $6)"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
	" AND c.partition OPERATOR(pg_catalog.=) $3 AND c.committed_offset OPERATOR(pg_catalog.=) $5"
	" RETURNING c.etcd_revision",
	"INSERT INTO mqlog.committed_offset AS c (group_id, topic_id, partition, committed_offset, etcd_revision)"
	" VALUES ($1, $2, $3, $4, $6) ON CONFLICT (group_id, topic_id, partition)"
	" DO UPDATE SET committed_offset = $4, committed_at = pg_catalog.now(), metadata = NULL,"
	" etcd_revision = GREATEST(c.etcd_revision, $6) RETURNING c.etcd_revision",
};

static SPIPlanPtr query_plan[NUM_QUERIES];

/*
 * Run one of the statements with (group, topic, partition, offset,
 * expected, stamp).
 */
static int
run_query(int q, const char *group, int32 topic_id, int32 partition,
		  int64 offset, int64 expected, int64 stamp)
{
	Oid			types[6] = {TEXTOID, INT4OID, INT4OID, INT8OID, INT8OID, INT8OID};
	Datum		vals[6];
	int			nargs = (q == Q_READ_TOPIC) ? 2 : (q == Q_READ) ? 3 : 6;

	if (query_plan[q] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(query_text[q], nargs, types);

		if (plan == NULL)
			elog(ERROR, "mqlog: could not prepare \"%s\": %s", query_text[q],
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		query_plan[q] = plan;
	}
	vals[0] = CStringGetTextDatum(group);
	vals[1] = Int32GetDatum(topic_id);
	vals[2] = Int32GetDatum(partition);
	vals[3] = Int64GetDatum(offset);
	vals[4] = Int64GetDatum(expected);
	vals[5] = Int64GetDatum(stamp);
	return SPI_execute_plan(query_plan[q], vals, NULL, q == Q_READ || q == Q_READ_TOPIC,
							q == Q_READ ? 1 : 0);
}

int64
MqOffsetRead(const char *group, int32 topic_id, int32 partition)
{
	MqSpi		spi;
	int64		result = -1;
	int			ret;

	MqSpiBegin(&spi, true);

	/*
	 * With a fresh snapshot: a poll that waited (for a handover, or in its
	 * timeout while a forced reset committed) must see what committed
	 * meanwhile, not what its statement's snapshot saw when it started.
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	ret = run_query(Q_READ, group, topic_id, partition, 0, 0, 0);
	PopActiveSnapshot();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: reading committed offsets failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		bool		isnull;

		result = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	return result;
}

/*
 * The committed offsets of a group on every partition of a topic below
 * npartitions, -1 where there is none, into offsets[]: one index range
 * scan where MqOffsetRead would take one per partition (a member's first
 * poll over 512 partitions spent 11 ms on them).  Read as MqOffsetRead
 * reads, with a fresh snapshot.
 */
void
MqOffsetReadTopic(const char *group, int32 topic_id, int32 npartitions, int64 *offsets)
{
	MqSpi		spi;
	int			ret;

	for (int i = 0; i < npartitions; i++)
		offsets[i] = -1;
	MqSpiBegin(&spi, true);
	PushActiveSnapshot(GetLatestSnapshot());
	ret = run_query(Q_READ_TOPIC, group, topic_id, 0, 0, 0, 0);
	PopActiveSnapshot();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: reading committed offsets failed: %s", SPI_result_code_string(ret));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int32		p = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull));
		int64		o = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &isnull));

		if (p >= 0 && p < npartitions)
			offsets[p] = o;
	}
	MqSpiEnd(&spi);
}

/*
 * one of the writes, *stamp raised to the row's if that was higher;
 * false if the row did not hold what the write expected
 */
static bool
write_offset(int q, const char *group, int32 topic_id, int32 partition,
			 int64 expected, int64 offset, int64 *stamp)
{
	MqSpi		spi;
	int			ret;
	bool		ok;

	MqSpiBegin(&spi, true);
	ret = run_query(q, group, topic_id, partition, offset, expected, *stamp);
	if (ret != SPI_OK_INSERT_RETURNING && ret != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "mqlog: writing committed offsets failed: %s", SPI_result_code_string(ret));
	ok = (SPI_processed == 1);
	if (ok)
	{
		bool		isnull;

		*stamp = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	return ok;
}

/*
 * Q_UPDATE_IF without the executor: every mq_commit after a partition's
 * first runs it, and through SPI its executor start, scan and GUC switch
 * cost three times what the commit's row change does (8 % of a consumer
 * of 100-byte records).  It does what that UPDATE does under the caller's
 * isolation level: the row as the statement's snapshot sees it, locked
 * and, in READ COMMITTED, followed to its newest version and checked again
 * (what the executor's EvalPlanQual does); a concurrent change in
 * REPEATABLE READ or SERIALIZABLE is a serialization failure.  The row is
 * changed with CatalogTupleUpdate (heap update, WAL, index entries when
 * not HOT).  What that bypasses is the executor's triggers, rules and
 * row security: the table's own trigger (the topic's lock, see
 * "References inside the catalog" in the install script) watches inserts
 * only, as an offset update never changes topic_id; a table
 * given other UPDATE triggers, rules or row security (a DBA's audit,
 * test/perl's history of writes) is updated by the UPDATE itself (*done
 * false).  So is a table given a CHECK constraint, a stored generated
 * column, or an index that CatalogTupleUpdate cannot maintain (one on an
 * expression, a partial one, an exclusion constraint, a deferred unique
 * key): it forms index entries from plain columns only, ignores
 * predicates and checks nothing (sql/offset_commit_dba.sql,
 * sql/offset_commit.sql).
 */
static bool
needs_executor(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	List	   *indexes;
	ListCell   *lc;
	bool		result = false;

	if (rel->rd_rel->relrowsecurity || rel->rd_rel->relhasrules)
		return true;
	if (constr != NULL && (constr->num_check > 0 || constr->has_generated_stored))
		return true;
	for (int i = 0; td != NULL && i < td->numtriggers; i++)
		if (TRIGGER_FOR_UPDATE(td->triggers[i].tgtype) &&
			td->triggers[i].tgfoid != F_RI_FKEY_CHECK_UPD)
			return true;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), RowExclusiveLock);
		Form_pg_index form = idx->rd_index;

		if (!heap_attisnull(idx->rd_indextuple, Anum_pg_index_indexprs, NULL) ||
			!heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL) ||
			form->indisexclusion || !form->indimmediate)
			result = true;
		index_close(idx, NoLock);
		if (result)
			break;
	}
	list_free(indexes);
	return result;
}

static bool
update_if(const char *group, int32 topic_id, int32 partition, int64 expected, int64 offset,
		  int64 *stamp, bool *done)
{
	Oid			relid = get_relname_relid("committed_offset", get_namespace_oid("mqlog", false));
	Relation	rel;
	Relation	idx;
	ScanKeyData keys[3];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	AttrNumber	offset_att;
	AttrNumber	at_att;
	AttrNumber	meta_att;
	AttrNumber	stamp_att;
	bool		found;
	bool		ok = false;

	if (!OidIsValid(relid))
		elog(ERROR, "mqlog: table mqlog.committed_offset is missing");
	PreventCommandIfReadOnly("UPDATE");
	PreventCommandIfParallelMode("UPDATE");
	offset_att = get_attnum(relid, "committed_offset");
	at_att = get_attnum(relid, "committed_at");
	meta_att = get_attnum(relid, "metadata");
	stamp_att = get_attnum(relid, "etcd_revision");

	/* as a statement of its own: after what this transaction did so far */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();	/* REPEATABLE READ's snapshot too */
	snapshot = GetActiveSnapshot();

	rel = table_open(relid, RowExclusiveLock);
	*done = !needs_executor(rel);
	if (!*done)
	{
		table_close(rel, NoLock);
		PopActiveSnapshot();
		return false;
	}
	idx = index_open(RelationGetPrimaryKeyIndex(rel), RowExclusiveLock);
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   idx->rd_indcollation[0], F_TEXTEQ, CStringGetTextDatum(group));
	ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   idx->rd_indcollation[1], F_INT4EQ, Int32GetDatum(topic_id));
	ScanKeyEntryInitialize(&keys[2], 0, 3, BTEqualStrategyNumber, InvalidOid,
						   idx->rd_indcollation[2], F_INT4EQ, Int32GetDatum(partition));
	slot = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, idx, snapshot, 3, 0);
	index_rescan(scan, keys, 3, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);

	if (found)
	{
		TM_FailureData tmfd;
		TM_Result	res;

		res = table_tuple_lock(rel, &slot->tts_tid, snapshot, slot,
							   GetCurrentCommandId(false), LockTupleExclusive, LockWaitBlock,
							   IsolationUsesXactSnapshot() ? 0 : TUPLE_LOCK_FLAG_FIND_LAST_VERSION,
							   &tmfd);
		switch (res)
		{
			case TM_Ok:
				break;
			case TM_Updated:
			case TM_Deleted:
				if (IsolationUsesXactSnapshot())
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not serialize access due to concurrent update")));
				found = false;	/* deleted meanwhile: no row, as for UPDATE */
				break;
			case TM_SelfModified:
				/* by this very command: nothing here does that */
			default:
				elog(ERROR, "mqlog: unexpected result %d locking a committed offset", (int) res);
		}
	}
	if (found)
	{
		bool		isnull;
		int64		now_at = DatumGetInt64(slot_getattr(slot, offset_att, &isnull));

		ok = !isnull && now_at == expected;
		if (ok)
		{
			TupleDesc	desc = RelationGetDescr(rel);
			Datum	   *values = palloc0(sizeof(Datum) * desc->natts);
			bool	   *nulls = palloc0(sizeof(bool) * desc->natts);
			bool	   *replace = palloc0(sizeof(bool) * desc->natts);
			bool		shouldfree;
			HeapTuple	old = ExecFetchSlotHeapTuple(slot, false, &shouldfree);
			HeapTuple	tup;

			values[offset_att - 1] = Int64GetDatum(offset);
			replace[offset_att - 1] = true;
			values[at_att - 1] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
			replace[at_att - 1] = true;
			/* a new offset has no metadata: a Kafka commit's is set after */
			nulls[meta_att - 1] = true;
			replace[meta_att - 1] = true;
			/* the row's stamp, if higher (see replicate_offset) */
			*stamp = Max(*stamp, DatumGetInt64(slot_getattr(slot, stamp_att, &isnull)));
			values[stamp_att - 1] = Int64GetDatum(*stamp);
			replace[stamp_att - 1] = true;
			tup = heap_modify_tuple(old, desc, values, nulls, replace);
			CatalogTupleUpdate(rel, &slot->tts_tid, tup);
			heap_freetuple(tup);
			if (shouldfree)
				heap_freetuple(old);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	PopActiveSnapshot();
	/* what follows in this transaction sees the new offset */
	CommandCounterIncrement();
	return ok;
}

bool
MqOffsetWriteIf(const char *group, int32 topic_id, int32 partition,
				int64 expected, int64 offset)
{
	bool		ok;
	bool		done = false;
	int64		stamp = offset_stamp(topic_id);

	if (expected >= 0)
		ok = update_if(group, topic_id, partition, expected, offset, &stamp, &done);
	if (!done)
		ok = write_offset(expected < 0 ? Q_INSERT_IF_ABSENT : Q_UPDATE_IF,
						  group, topic_id, partition, expected, offset, &stamp);
	if (ok)
		replicate_offset(topic_id, partition, group, offset, NULL, stamp);
	return ok;
}

/* whatever the row holds: an offset reset */
void
MqOffsetWrite(const char *group, int32 topic_id, int32 partition, int64 offset)
{
	int64		stamp = offset_stamp(topic_id);

	if (write_offset(Q_UPSERT, group, topic_id, partition, -1, offset, &stamp))
		replicate_offset(topic_id, partition, group, offset, NULL, stamp);
}

int64
MqOffsetsDelete(const char *group)
{
	MqSpi		spi;
	Oid			type = TEXTOID;
	Datum		val = CStringGetTextDatum(group);
	int64		n;
	SPITupleTable *rows;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.committed_offset c WHERE c.group_id OPERATOR(pg_catalog.=) $1"
							  " RETURNING c.topic_id, c.partition, c.etcd_revision",
							  1, &type, &val, NULL, false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "mqlog: deleting committed offsets failed");
	n = SPI_processed;
	rows = SPI_tuptable;

	/* the other nodes forget these offsets, of replicated topics, and no others */
	{
		int32	   *tids = palloc(sizeof(int32) * (n + 1));
		int32	   *parts = palloc(sizeof(int32) * (n + 1));
		int64	   *stamps = palloc(sizeof(int64) * (n + 1));

		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;

			tids[i] = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
			parts[i] = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
			stamps[i] = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 3, &isnull));
		}
		for (uint64 i = 0; i < n; i++)
			replicate_offset(tids[i], parts[i], group, -1, NULL,
							 Max(offset_stamp(tids[i]), stamps[i]));
	}
	MqSpiEnd(&spi);
	return n;
}

/* ------------------------------------------------------------------------
 * The commit's metadata string, a partition's offset deleted, and every
 * offset of a group: the Kafka listener's OffsetCommit, OffsetDelete and
 * OffsetFetch of all topics (groups/listing.c checks the caller first)
 * ------------------------------------------------------------------------ */

/*
 * sql with its first nargs of (group, topic_id, partition, metadata), inside
 * the caller's MqSpi; returns the rows it processed
 */
static uint64
run_keyed(const char *sql, int nargs, const char *group, int32 topic_id, int32 partition,
		  const char *metadata, int expect)
{
	Oid			types[4] = {TEXTOID, INT4OID, INT4OID, TEXTOID};
	Datum		vals[4];
	char		nulls[4] = {' ', ' ', ' ', metadata ? ' ' : 'n'};
	int			ret;

	vals[0] = CStringGetTextDatum(group);
	vals[1] = Int32GetDatum(topic_id);
	vals[2] = Int32GetDatum(partition);
	vals[3] = metadata ? CStringGetTextDatum(metadata) : (Datum) 0;
	ret = SPI_execute_with_args(sql, nargs, types, vals, nulls,
								expect == SPI_OK_SELECT, 0);
	if (ret != expect)
		elog(ERROR, "mqlog: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
	return SPI_processed;
}

/*
 * The metadata of the row the caller's commit just wrote (MqOffsetWrite
 * left it null), replicated with the offset; NULL or empty: none.
 */
void
MqOffsetSetMetadata(const char *group, int32 topic_id, int32 partition, const char *metadata)
{
	MqSpi		spi;
	int64		offset = -1;
	int64		stamp = 0;

	if (metadata == NULL || metadata[0] == '\0')
		return;
	MqSpiBegin(&spi, true);
	if (run_keyed("UPDATE mqlog.committed_offset c SET metadata = $4"
				  " WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
				  " AND c.partition OPERATOR(pg_catalog.=) $3 RETURNING c.committed_offset, c.etcd_revision",
				  4, group, topic_id, partition, metadata, SPI_OK_UPDATE_RETURNING) == 1)
	{
		bool		isnull;

		offset = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		/* the stamp the offset's write just gave the row */
		stamp = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	MqSpiEnd(&spi);
	if (offset >= 0)
		replicate_offset(topic_id, partition, group, offset, metadata, stamp);
}

/* the row's metadata, NULL if it has none (or there is no row) */
char *
MqOffsetReadMetadata(const char *group, int32 topic_id, int32 partition)
{
	MqSpi		spi;
	MemoryContext outer = CurrentMemoryContext;
	char	   *result = NULL;

	MqSpiBegin(&spi, true);
	if (run_keyed("SELECT c.metadata FROM mqlog.committed_offset c"
				  " WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
				  " AND c.partition OPERATOR(pg_catalog.=) $3",
				  3, group, topic_id, partition, NULL, SPI_OK_SELECT) == 1)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (v != NULL)
			result = MemoryContextStrdup(outer, v);
	}
	MqSpiEnd(&spi);
	return result;
}

/* one partition's offset of the group goes (Kafka's OffsetDelete); false: none */
bool
MqOffsetDelete(const char *group, int32 topic_id, int32 partition)
{
	MqSpi		spi;
	uint64		n;
	int64		stamp = 0;

	MqSpiBegin(&spi, true);
	n = run_keyed("DELETE FROM mqlog.committed_offset c"
				  " WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
				  " AND c.partition OPERATOR(pg_catalog.=) $3 RETURNING c.etcd_revision",
				  3, group, topic_id, partition, NULL, SPI_OK_DELETE_RETURNING);
	if (n > 0)
	{
		bool		isnull;

		stamp = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	if (n > 0)
		replicate_offset(topic_id, partition, group, -1, NULL, Max(offset_stamp(topic_id), stamp));
	return n > 0;
}

/*
 * Every committed offset of the group, by topic id and partition, in the
 * caller's memory context; returns how many.
 */
int
MqOffsetReadGroup(const char *group, MqOffsetRow **rows)
{
	MqSpi		spi;
	MemoryContext outer = CurrentMemoryContext;
	int			n;

	MqSpiBegin(&spi, true);
	n = (int) run_keyed("SELECT c.topic_id, c.partition, c.committed_offset, c.metadata"
						" FROM mqlog.committed_offset c WHERE c.group_id OPERATOR(pg_catalog.=) $1"
						" ORDER BY c.topic_id, c.partition",
						1, group, 0, 0, NULL, SPI_OK_SELECT);
	*rows = MemoryContextAllocZero(outer, sizeof(MqOffsetRow) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *meta = SPI_getvalue(t, d, 4);

		(*rows)[i].topic_id = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		(*rows)[i].partition = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		(*rows)[i].offset = DatumGetInt64(SPI_getbinval(t, d, 3, &isnull));
		(*rows)[i].metadata = meta ? MemoryContextStrdup(outer, meta) : NULL;
	}
	MqSpiEnd(&spi);
	return n;
}
