/*-------------------------------------------------------------------------
 *
 * am.c
 *		The "mqlog" table access method of segment relations.
 *
 * Segments are written only by the append protocol (log/partition.c,
 * through store/segment.c), so the access method is mostly a set of
 * refusals: no INSERT, UPDATE, DELETE, indexes, TRUNCATE, CLUSTER, VACUUM
 * FULL or SET TABLESPACE, each with a clear feature_not_supported error.  What it does do: create the storage, let a
 * DBA look inside with a sequential scan (offset, ts, key, value, headers
 * of every committed record), report its size, and VACUUM, which freezes
 * batch fates so that relfrozenxid can advance.  COPY of a segment
 * relation is pg_dump's and pg_restore's: COPY TO writes its stored
 * batches and COPY FROM restores them into an empty segment (log/dump.c);
 * a restore may also create the segment relations in mqlog_data.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "nodes/makefuncs.h"
#include "tcop/utility.h"
#include "commands/defrem.h"
#include "funcapi.h"
#include "catalog/storage.h"
#include "catalog/pg_class.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "storage/smgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "commands/extension.h"
#include "utils/acl.h"

#include "base/spi.h"

#include "store/batch.h"
#include "store/segment.h"
#include "log/am.h"
#include "log/dump.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"

#define SEGMENT_NATTS 5

static void
refuse(Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on mqlog segment \"%s\"", what,
					rel ? RelationGetRelationName(rel) : "?"),
			 errhint("Segments are append-only logs written by mq_produce(); retention and mq_drop_topic() remove them.")));
}

/* A segment's columns are ("offset", ts, key, value, headers). */
static void
check_segment_columns(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->natts != SEGMENT_NATTS ||
		TupleDescAttr(desc, 0)->atttypid != INT8OID ||
		TupleDescAttr(desc, 1)->atttypid != TIMESTAMPTZOID ||
		TupleDescAttr(desc, 2)->atttypid != BYTEAOID ||
		TupleDescAttr(desc, 3)->atttypid != BYTEAOID)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation \"%s\" is not a valid mqlog segment", RelationGetRelationName(rel)),
				 errdetail("A segment has the columns (\"offset\" bigint, ts timestamptz, key bytea, value bytea, headers mqlog.header[]).")));
}

/* ------------------------------------------------------------------------
 * Sequential scan
 * ------------------------------------------------------------------------ */

typedef struct MqScanDesc
{
	TableScanDescData base;
	MqLogIter	it;
	bool		dump;			/* COPY TO: the dump form (log/dump.c) */
	Oid			header_type;
	TupleDesc	header_desc;
} MqScanDesc;

/* records for a DBA, or stored batches for pg_dump */
#define SCAN_FLAGS(scan) ((scan)->dump ? (MQ_ITER_BYTES | MQ_ITER_INVISIBLE) : MQ_ITER_RECORDS)

static const TupleTableSlotOps *
mqlog_slot_callbacks(Relation rel)
{
	return &TTSOpsVirtual;
}

static TableScanDesc
mqlog_scan_begin(Relation rel, Snapshot snapshot, int nkeys, struct ScanKeyData *key,
				 ParallelTableScanDesc pscan, uint32 flags)
{
	MqScanDesc *scan;
	TupleDesc	desc = RelationGetDescr(rel);

	if (pscan != NULL)
		refuse(rel, "parallel scan");
	check_segment_columns(rel);

	scan = palloc0(sizeof(MqScanDesc));
	scan->base.rs_rd = rel;
	scan->base.rs_snapshot = snapshot;
	scan->base.rs_nkeys = nkeys;
	scan->base.rs_flags = flags;
	scan->base.rs_parallel = pscan;
	scan->dump = MqDumpScanning(rel);
	if (scan->dump)
		MqDumpScanBegin(rel);
	MqLogIterBeginSegment(&scan->it, rel, SCAN_FLAGS(scan));
	scan->header_type = get_element_type(TupleDescAttr(desc, 4)->atttypid);
	if (OidIsValid(scan->header_type))
		scan->header_desc = BlessTupleDesc(lookup_rowtype_tupdesc_copy(scan->header_type, -1));
	return (TableScanDesc) scan;
}

static void
mqlog_scan_end(TableScanDesc sscan)
{
	MqScanDesc *scan = (MqScanDesc *) sscan;

	MqLogIterEnd(&scan->it);
	pfree(scan);
}

static void
mqlog_scan_rescan(TableScanDesc sscan, struct ScanKeyData *key, bool set_params,
				  bool allow_strat, bool allow_sync, bool allow_pagemode)
{
	MqScanDesc *scan = (MqScanDesc *) sscan;

	MqLogIterEnd(&scan->it);
	MqLogIterBeginSegment(&scan->it, sscan->rs_rd, SCAN_FLAGS(scan));
}

/*
 * The records of committed batches, until the first batch of a transaction
 * still running (or, for pg_dump, the batches themselves).  Forward only:
 * the log is read batch after batch, and a cursor that moves back (FETCH
 * BACKWARD or PRIOR; PostgreSQL lets a plain cursor over a sequential scan
 * do that) is refused, where it used to get the next records instead of the
 * previous ones (sql/segment_scan_backward.sql).  FETCH FIRST rewinds, a
 * rescan from the start, and works.
 */
static bool
mqlog_scan_getnextslot(TableScanDesc sscan, ScanDirection direction, TupleTableSlot *slot)
{
	MqScanDesc *scan = (MqScanDesc *) sscan;
	MqRecord   *rec;

	if (ScanDirectionIsBackward(direction))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog segment \"%s\" can only be scanned forward",
						RelationGetRelationName(sscan->rs_rd)),
				 errhint("Fetch forward, or FETCH FIRST to read again from the start; mq_fetch() reads from any offset.")));
	ExecClearTuple(slot);
	if (scan->dump)
		return MqDumpNextRow(&scan->it, slot);
	rec = MqLogNextRecord(&scan->it);
	if (rec == NULL)
		return false;
	memset(slot->tts_isnull, 0, sizeof(bool) * SEGMENT_NATTS);
	slot->tts_values[0] = Int64GetDatum(rec->offset);
	slot->tts_values[1] = TimestampTzGetDatum(rec->ts);
	if (rec->key)
		slot->tts_values[2] = PointerGetDatum(MqBytea(rec->key, rec->keylen));
	else
		slot->tts_isnull[2] = true;
	if (rec->value)
		slot->tts_values[3] = PointerGetDatum(MqBytea(rec->value, rec->valuelen));
	else
		slot->tts_isnull[3] = true;
	if (rec->nheaders > 0 && OidIsValid(scan->header_type))
		slot->tts_values[4] = MqHeadersDatum(scan->header_type, scan->header_desc, rec);
	else
		slot->tts_isnull[4] = true;
	ExecStoreVirtualTuple(slot);
	return true;
}

/* ------------------------------------------------------------------------
 * Refused operations
 * ------------------------------------------------------------------------ */

static Size
mqlog_parallelscan_estimate(Relation rel)
{
	refuse(rel, "parallel scan");
	return 0;
}

static Size
mqlog_parallelscan_initialize(Relation rel, ParallelTableScanDesc pscan)
{
	refuse(rel, "parallel scan");
	return 0;
}

static void
mqlog_parallelscan_reinitialize(Relation rel, ParallelTableScanDesc pscan)
{
	refuse(rel, "parallel scan");
}

static struct IndexFetchTableData *
mqlog_index_fetch_begin(Relation rel)
{
	refuse(rel, "an index");
	return NULL;
}

static void
mqlog_index_fetch_reset(struct IndexFetchTableData *data)
{
}

static void
mqlog_index_fetch_end(struct IndexFetchTableData *data)
{
}

static bool
mqlog_index_fetch_tuple(struct IndexFetchTableData *scan, ItemPointer tid, Snapshot snapshot,
						TupleTableSlot *slot, bool *call_again, bool *all_dead)
{
	refuse(NULL, "an index");
	return false;
}

static bool
mqlog_tuple_fetch_row_version(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot *slot)
{
	refuse(rel, "fetching a row by ctid");
	return false;
}

static bool
mqlog_tuple_tid_valid(TableScanDesc scan, ItemPointer tid)
{
	return false;
}

static void
mqlog_tuple_get_latest_tid(TableScanDesc scan, ItemPointer tid)
{
}

static bool
mqlog_tuple_satisfies_snapshot(Relation rel, TupleTableSlot *slot, Snapshot snapshot)
{
	return true;
}

static TransactionId
mqlog_index_delete_tuples(Relation rel, TM_IndexDeleteOp *delstate)
{
	refuse(rel, "an index");
	return InvalidTransactionId;
}

/* rows reach a segment only in a restore: COPY FROM of its dump form */
static void
mqlog_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid, int options,
				   struct BulkInsertStateData *bistate)
{
	if (!MqRestoring(RelationGetRelid(rel)))
		refuse(rel, "INSERT");
	MqRestoreRows(rel, &slot, 1);
}

static void
mqlog_tuple_insert_speculative(Relation rel, TupleTableSlot *slot, CommandId cid, int options,
							   struct BulkInsertStateData *bistate, uint32 specToken)
{
	refuse(rel, "INSERT ... ON CONFLICT");
}

static void
mqlog_tuple_complete_speculative(Relation rel, TupleTableSlot *slot, uint32 specToken, bool succeeded)
{
	refuse(rel, "INSERT ... ON CONFLICT");
}

static void
mqlog_multi_insert(Relation rel, TupleTableSlot **slots, int nslots, CommandId cid, int options,
				   struct BulkInsertStateData *bistate)
{
	if (!MqRestoring(RelationGetRelid(rel)))
		refuse(rel, "COPY FROM");
	MqRestoreRows(rel, slots, nslots);
}

static TM_Result
mqlog_tuple_delete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot,
				   Snapshot crosscheck, bool wait, TM_FailureData *tmfd, bool changingPart)
{
	refuse(rel, "DELETE");
	return TM_Ok;
}

static TM_Result
mqlog_tuple_update(Relation rel, ItemPointer otid, TupleTableSlot *slot, CommandId cid,
				   Snapshot snapshot, Snapshot crosscheck, bool wait, TM_FailureData *tmfd,
				   LockTupleMode *lockmode, bool *update_indexes)
{
	refuse(rel, "UPDATE");
	return TM_Ok;
}

static TM_Result
mqlog_tuple_lock(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot *slot,
				 CommandId cid, LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
				 TM_FailureData *tmfd)
{
	refuse(rel, "SELECT ... FOR UPDATE/SHARE");
	return TM_Ok;
}

/* ------------------------------------------------------------------------
 * Storage
 * ------------------------------------------------------------------------ */

/* a relation of this access method made other than by mqlog's functions */
static void
refuse_create(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("relations using access method \"mqlog\" are created by mqlog only"),
			 errhint("Create a topic with mq_create_topic(); its segments are made for it.")));
}

/* CREATE TABLE of a segment by a restore is running (mqlog_utility) */
static bool restore_creating = false;

/*
 * Called when a segment is created, and by TRUNCATE: a segment may only be
 * emptied in the (sub)transaction that created it, since its offsets are
 * referenced by consumers, or by a restore about to fill it (log/dump.c).
 * TRUNCATE of a segment that holds nothing changes nothing and is let
 * through for its owner: pg_restore -j runs one before each COPY of a
 * table it created.
 */
static void
mqlog_relation_set_new_filenode(Relation rel, const RelFileNode *newrnode, char persistence,
								TransactionId *freezeXid, MultiXactId *minmulti)
{
	SMgrRelation srel;
	bool		creating = rel->rd_createSubid != InvalidSubTransactionId;

	if (!creating &&
		rel->rd_firstRelfilenodeSubid == InvalidSubTransactionId &&
		!MqRestoring(RelationGetRelid(rel)) &&
		!MqSegmentCutting(RelationGetRelid(rel)) &&
		!(MqSegmentUsedBlocks(rel) == 0 && pg_class_ownercheck(RelationGetRelid(rel), GetUserId())))
		refuse(rel, "TRUNCATE");

	if (persistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mqlog segments must be permanent relations"),
				 errdetail("Unlogged and temporary segments would not be replayed on a standby.")));
	/*
	 * Every way of making a relation of this access method ends here (CREATE
	 * TABLE ... USING, default_table_access_method, CREATE TABLE AS, SELECT
	 * INTO): only mqlog's own functions make segments.
	 */
	if (creating && !mqlog_allow_segment_ddl && !restore_creating)
		refuse_create();

	*freezeXid = RecentXmin;
	*minmulti = GetOldestMultiXactId();
	srel = RelationCreateStorage(*newrnode, persistence, true);
	smgrclose(srel);
}

static void
mqlog_relation_nontransactional_truncate(Relation rel)
{
	/* pages extended ahead of an appender hold nothing */
	if (MqSegmentUsedBlocks(rel) > 0)
		refuse(rel, "TRUNCATE");
}

static void
mqlog_relation_copy_data(Relation rel, const RelFileNode *newrnode)
{
	refuse(rel, "SET TABLESPACE");
}

static void
mqlog_relation_copy_for_cluster(Relation OldTable, Relation NewTable, Relation OldIndex,
								bool use_sort, TransactionId OldestXmin,
								TransactionId *xid_cutoff, MultiXactId *multi_cutoff,
								double *num_tuples, double *tups_vacuumed,
								double *tups_recently_dead)
{
	refuse(OldTable, "CLUSTER or VACUUM FULL");
}

/*
 * VACUUM of a segment removes nothing (retention drops whole segments) but
 * records the fate of every batch whose transaction is over, then advances
 * relfrozenxid to the oldest xid still needing the clog.
 */
static void
mqlog_relation_vacuum(Relation rel, struct VacuumParams *params, BufferAccessStrategy bstrategy)
{
	TransactionId horizon = GetOldestNonRemovableTransactionId(rel);
	TransactionId oldest;
	bool		frozenxid_updated,
				minmulti_updated;

	MqSegmentFreeze(rel, horizon, &oldest);
	vac_update_relstats(rel, MqSegmentUsedBlocks(rel), -1, 0, false,
						oldest, GetOldestMultiXactId(),
						&frozenxid_updated, &minmulti_updated, false);
}

static bool
mqlog_scan_analyze_next_block(TableScanDesc scan, BlockNumber blockno, BufferAccessStrategy bstrategy)
{
	return false;
}

static bool
mqlog_scan_analyze_next_tuple(TableScanDesc scan, TransactionId OldestXmin, double *liverows,
							  double *deadrows, TupleTableSlot *slot)
{
	return false;
}

static double
mqlog_index_build_range_scan(Relation table_rel, Relation index_rel, struct IndexInfo *index_info,
							 bool allow_sync, bool anyvisible, bool progress,
							 BlockNumber start_blockno, BlockNumber numblocks,
							 IndexBuildCallback callback, void *callback_state, TableScanDesc scan)
{
	refuse(table_rel, "an index");
	return 0;
}

static void
mqlog_index_validate_scan(Relation table_rel, Relation index_rel, struct IndexInfo *index_info,
						  Snapshot snapshot, struct ValidateIndexState *state)
{
	refuse(table_rel, "an index");
}

static bool
mqlog_relation_needs_toast_table(Relation rel)
{
	return false;
}

static void
mqlog_relation_estimate_size(Relation rel, int32 *attr_widths, BlockNumber *pages,
							 double *tuples, double *allvisfrac)
{
	/* the pages a scan reads: not those extended ahead of the appender */
	*pages = MqSegmentUsedBlocks(rel);
	/* assume records of about 100 bytes */
	*tuples = (double) *pages * (MQ_PAGE_DATA / 110);
	*allvisfrac = 0;
}

static bool
mqlog_scan_bitmap_next_block(TableScanDesc scan, struct TBMIterateResult *tbmres)
{
	refuse(scan->rs_rd, "a bitmap scan");
	return false;
}

static bool
mqlog_scan_bitmap_next_tuple(TableScanDesc scan, struct TBMIterateResult *tbmres, TupleTableSlot *slot)
{
	return false;
}

static bool
mqlog_scan_sample_next_block(TableScanDesc scan, struct SampleScanState *scanstate)
{
	refuse(scan->rs_rd, "TABLESAMPLE");
	return false;
}

static bool
mqlog_scan_sample_next_tuple(TableScanDesc scan, struct SampleScanState *scanstate, TupleTableSlot *slot)
{
	return false;
}

static const TableAmRoutine mqlog_methods = {
	.type = T_TableAmRoutine,

	.slot_callbacks = mqlog_slot_callbacks,
	.scan_begin = mqlog_scan_begin,
	.scan_end = mqlog_scan_end,
	.scan_rescan = mqlog_scan_rescan,
	.scan_getnextslot = mqlog_scan_getnextslot,

	.parallelscan_estimate = mqlog_parallelscan_estimate,
	.parallelscan_initialize = mqlog_parallelscan_initialize,
	.parallelscan_reinitialize = mqlog_parallelscan_reinitialize,

	.index_fetch_begin = mqlog_index_fetch_begin,
	.index_fetch_reset = mqlog_index_fetch_reset,
	.index_fetch_end = mqlog_index_fetch_end,
	.index_fetch_tuple = mqlog_index_fetch_tuple,

	.tuple_fetch_row_version = mqlog_tuple_fetch_row_version,
	.tuple_tid_valid = mqlog_tuple_tid_valid,
	.tuple_get_latest_tid = mqlog_tuple_get_latest_tid,
	.tuple_satisfies_snapshot = mqlog_tuple_satisfies_snapshot,
	.index_delete_tuples = mqlog_index_delete_tuples,

	.tuple_insert = mqlog_tuple_insert,
	.tuple_insert_speculative = mqlog_tuple_insert_speculative,
	.tuple_complete_speculative = mqlog_tuple_complete_speculative,
	.multi_insert = mqlog_multi_insert,
	.tuple_delete = mqlog_tuple_delete,
	.tuple_update = mqlog_tuple_update,
	.tuple_lock = mqlog_tuple_lock,

	.relation_set_new_filenode = mqlog_relation_set_new_filenode,
	.relation_nontransactional_truncate = mqlog_relation_nontransactional_truncate,
	.relation_copy_data = mqlog_relation_copy_data,
	.relation_copy_for_cluster = mqlog_relation_copy_for_cluster,
	.relation_vacuum = mqlog_relation_vacuum,
	.scan_analyze_next_block = mqlog_scan_analyze_next_block,
	.scan_analyze_next_tuple = mqlog_scan_analyze_next_tuple,
	.index_build_range_scan = mqlog_index_build_range_scan,
	.index_validate_scan = mqlog_index_validate_scan,

	.relation_size = table_block_relation_size,
	.relation_needs_toast_table = mqlog_relation_needs_toast_table,

	.relation_estimate_size = mqlog_relation_estimate_size,

	.scan_bitmap_next_block = mqlog_scan_bitmap_next_block,
	.scan_bitmap_next_tuple = mqlog_scan_bitmap_next_tuple,
	.scan_sample_next_block = mqlog_scan_sample_next_block,
	.scan_sample_next_tuple = mqlog_scan_sample_next_tuple,
};

/* what the access method's handler returns (sql/table_am.c) */
const TableAmRoutine *
MqTableAmRoutine(void)
{
	return &mqlog_methods;
}

/* ------------------------------------------------------------------------
 * Refusing DML before it starts
 *
 * The tuple callbacks above only fire when there is a row to change, so an
 * UPDATE of an empty segment would pass silently.  The permission check
 * hook sees every INSERT, UPDATE, DELETE and COPY FROM target up front.
 * ------------------------------------------------------------------------ */

static ExecutorCheckPerms_hook_type prev_check_perms = NULL;
static ProcessUtility_hook_type prev_utility = NULL;

bool
MqIsSegment(Oid relid)
{
	Oid			amoid = get_table_am_oid("mqlog", true);
	HeapTuple	tup;
	bool		result = false;

	if (!OidIsValid(amoid) || !OidIsValid(relid))
		return false;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (HeapTupleIsValid(tup))
	{
		result = ((Form_pg_class) GETSTRUCT(tup))->relam == amoid;
		ReleaseSysCache(tup);
	}
	return result;
}

/*
 * Open a relation that a caller claims is a segment: refused, before it is
 * opened, unless it is one.  NULL if it does not exist (any more).
 */
Relation
MqSegmentOpen(Oid relid, LOCKMODE lockmode)
{
	if (!MqIsSegment(relid) && get_rel_name(relid) == NULL)
		return NULL;
	MqCheckSegment(relid);
	return try_table_open(relid, lockmode);
}

/* Refuse a relation an internal function was given that is not a segment. */
void
MqCheckSegment(Oid relid)
{
	char	   *name;

	if (MqIsSegment(relid))
		return;
	name = get_rel_name(relid);
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 name ? errmsg("relation \"%s\" is not an mqlog segment", name) :
			 errmsg("relation %u is not an mqlog segment", relid),
			 errhint("Segments are the relations listed in mqlog.segments.")));
}

static bool
mqlog_check_perms(List *rangeTable, bool ereport_on_violation)
{
	ListCell   *lc;

	foreach(lc, rangeTable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION &&
			(rte->requiredPerms & (ACL_INSERT | ACL_UPDATE | ACL_DELETE)) != 0 &&
			MqIsSegment(rte->relid) &&
			!(rte->requiredPerms == ACL_INSERT && MqRestoring(rte->relid)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s is not supported on mqlog segment \"%s\"",
							(rte->requiredPerms & ACL_INSERT) ? "INSERT" :
							(rte->requiredPerms & ACL_UPDATE) ? "UPDATE" : "DELETE",
							get_rel_name(rte->relid)),
					 errhint("Segments are append-only logs: produce with mq_produce() or mq_produce_batch().")));
	}
	if (prev_check_perms)
		return prev_check_perms(rangeTable, ereport_on_violation);
	return true;
}

/* every table and materialized view of the database except segments */
static List *
vacuum_full_targets(void)
{
	Oid			amoid = get_table_am_oid("mqlog", true);
	List	   *rels = NIL;
	Relation	pgclass = table_open(RelationRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(pgclass, 0, NULL);
	HeapTuple	tup;

	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_class cls = (Form_pg_class) GETSTRUCT(tup);

		if ((cls->relkind == RELKIND_RELATION || cls->relkind == RELKIND_MATVIEW) &&
			cls->relam != amoid)
			rels = lappend(rels, makeVacuumRelation(NULL, cls->oid, NIL));
	}
	table_endscan(scan);
	table_close(pgclass, AccessShareLock);
	return rels;
}

static bool
vacuum_is_full(VacuumStmt *vac)
{
	ListCell   *lc;
	bool		full = false;

	foreach(lc, vac->options)
	{
		DefElem    *opt = lfirst(lc);

		if (strcmp(opt->defname, "full") == 0)
			full = (opt->arg == NULL) || defGetBoolean(opt);
	}
	return full;
}

/*
 * pg_dump writes segments as tables of schema mqlog_data (SET
 * default_table_access_method = mqlog; CREATE TABLE ...), and a restore
 * runs that as the schema's owner (the extension owner) or a superuser:
 * then a relation of the access method may be made outside mqlog's
 * functions.  It belongs to no chain until the restore loads mqlog.segment,
 * and the orphan sweep leaves it alone (it drops only what mqlog unlinked).
 */
static bool
restore_create(CreateStmt *cs)
{
	const char *am = cs->accessMethod ? cs->accessMethod : default_table_access_method;
	Oid			nsp;

	if (am == NULL || strcmp(am, "mqlog") != 0 || cs->relation == NULL)
		return false;
	nsp = RangeVarGetCreationNamespace(cs->relation);
	return OidIsValid(nsp) && nsp == get_namespace_oid("mqlog_data", true) &&
		pg_namespace_ownercheck(nsp, GetUserId());
}

/* the segment that a COPY of the table form (pg_dump's) names, or InvalidOid */
static Oid
copied_segment(Node *stmt)
{
	CopyStmt   *cs = (CopyStmt *) stmt;
	Oid			relid;

	if (!IsA(stmt, CopyStmt) || cs->relation == NULL || cs->query != NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(cs->relation, NoLock, true);
	return MqIsSegment(relid) ? relid : InvalidOid;
}

static void run_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
						ProcessUtilityContext context, ParamListInfo params,
						QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc,
						Oid copied, bool creating);

static void
refuse_ddl(const char *what, RangeVar *rv)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on mqlog segment \"%s\"", what, rv->relname),
			 errhint("Segments are append-only logs written by mq_produce(); retention and mq_drop_topic() remove them.")));
}

/*
 * DROP TABLE, ALTER TABLE and RENAME of a segment would break the segment
 * chain behind the log's offsets, so they are refused unless mqlog itself
 * does them (its functions SET mqlog.allow_segment_ddl).  SET TABLESPACE and
 * SET UNLOGGED reach the access method, which refuses them more precisely.
 */
static void
mqlog_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			  ProcessUtilityContext context, ParamListInfo params,
			  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		pushed = false;

	/* waiting consumers hold locks DROP EXTENSION mqlog needs: wake them */
	if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_EXTENSION)
	{
		DropStmt   *drop = (DropStmt *) stmt;
		ListCell   *lc;

		/* only for who may drop it: an announcement makes polls give way */
		foreach(lc, drop->objects)
			if (strcmp(strVal(lfirst(lc)), "mqlog") == 0 &&
				OidIsValid(get_extension_oid("mqlog", true)) &&
				pg_extension_ownercheck(get_extension_oid("mqlog", true), GetUserId()))
			{
				MqAnnounceDdl(0);
				/* thousands of segments: dropped first, in bounded transactions (extdrop.c) */
				MqDropExtensionPrepare(drop->behavior == DROP_CASCADE,
									   list_length(drop->objects) == 1 &&
									   context == PROCESS_UTILITY_TOPLEVEL &&
									   !IsTransactionBlock() && !IsSubTransaction() &&
									   (MyXactFlags & XACT_FLAGS_PIPELINING) == 0,
									   &pushed);
			}
	}

	if (!mqlog_allow_segment_ddl)
	{
		if (IsA(stmt, DropStmt) && ((DropStmt *) stmt)->removeType == OBJECT_TABLE)
		{
			ListCell   *lc;

			foreach(lc, ((DropStmt *) stmt)->objects)
			{
				RangeVar   *rv = makeRangeVarFromNameList((List *) lfirst(lc));

				if (MqIsSegment(RangeVarGetRelid(rv, NoLock, true)))
					refuse_ddl("DROP TABLE", rv);
			}
		}
		else if (IsA(stmt, AlterTableStmt))
		{
			AlterTableStmt *at = (AlterTableStmt *) stmt;
			ListCell   *lc;

			if (MqIsSegment(RangeVarGetRelid(at->relation, NoLock, true)))
				foreach(lc, at->cmds)
				{
					AlterTableCmd *cmd = lfirst(lc);

					/* a restore gives a segment to the extension owner, as mqlog made it */
					if (cmd->subtype == AT_ChangeOwner &&
						get_rolespec_oid(cmd->newowner, false) != MqExtensionOwner())
						ereport(ERROR,
								(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
								 errmsg("mqlog segment \"%s\" must be owned by the owner of extension mqlog",
										at->relation->relname),
								 errdetail("mqlog's functions act on segments as the extension owner, %s.",
										   GetUserNameFromId(MqExtensionOwner(), false)),
								 errhint("Restore as the role that owns the extension's objects, or with pg_restore --no-owner.")));
					if (cmd->subtype != AT_SetTableSpace && cmd->subtype != AT_SetUnLogged &&
						cmd->subtype != AT_SetLogged && cmd->subtype != AT_ChangeOwner)
						refuse_ddl("ALTER TABLE", at->relation);
				}
		}
		else if (IsA(stmt, RenameStmt) && ((RenameStmt *) stmt)->relation &&
				 MqIsSegment(RangeVarGetRelid(((RenameStmt *) stmt)->relation, NoLock, true)))
			refuse_ddl("ALTER TABLE", ((RenameStmt *) stmt)->relation);
		else if (IsA(stmt, AlterObjectSchemaStmt) && ((AlterObjectSchemaStmt *) stmt)->relation &&
				 MqIsSegment(RangeVarGetRelid(((AlterObjectSchemaStmt *) stmt)->relation, NoLock, true)))
			refuse_ddl("ALTER TABLE SET SCHEMA", ((AlterObjectSchemaStmt *) stmt)->relation);
		else if (IsA(stmt, RuleStmt) &&
				 MqIsSegment(RangeVarGetRelid(((RuleStmt *) stmt)->relation, NoLock, true)))
			refuse_ddl("CREATE RULE", ((RuleStmt *) stmt)->relation);
		else if (IsA(stmt, CreateTrigStmt) &&
				 MqIsSegment(RangeVarGetRelid(((CreateTrigStmt *) stmt)->relation, NoLock, true)))
			refuse_ddl("CREATE TRIGGER", ((CreateTrigStmt *) stmt)->relation);
		else if (IsA(stmt, ClusterStmt) && ((ClusterStmt *) stmt)->relation &&
				 MqIsSegment(RangeVarGetRelid(((ClusterStmt *) stmt)->relation, NoLock, true)))
			refuse_ddl("CLUSTER or VACUUM FULL", ((ClusterStmt *) stmt)->relation);
		else if (IsA(stmt, VacuumStmt) && ((VacuumStmt *) stmt)->is_vacuumcmd &&
				 vacuum_is_full((VacuumStmt *) stmt))
		{
			ListCell   *lc;

			foreach(lc, ((VacuumStmt *) stmt)->rels)
			{
				VacuumRelation *vr = lfirst(lc);

				if (vr->relation && MqIsSegment(RangeVarGetRelid(vr->relation, NoLock, true)))
					refuse_ddl("CLUSTER or VACUUM FULL", vr->relation);
			}
		}
		else if (IsA(stmt, CreatePolicyStmt) &&
				 MqIsSegment(RangeVarGetRelid(((CreatePolicyStmt *) stmt)->table, NoLock, true)))
			refuse_ddl("CREATE POLICY", ((CreatePolicyStmt *) stmt)->table);
		else if (IsA(stmt, CreateStmt))
		{
			CreateStmt *cs = (CreateStmt *) stmt;
			ListCell   *lc;

			if (cs->accessMethod && strcmp(cs->accessMethod, "mqlog") == 0 && !restore_create(cs))
				refuse_create();
			foreach(lc, cs->inhRelations)
				if (MqIsSegment(RangeVarGetRelid(lfirst(lc), NoLock, true)))
					refuse_ddl("CREATE TABLE ... INHERITS", lfirst(lc));
		}
	}

	/*
	 * A database-wide VACUUM FULL would stop with an error at the first
	 * segment; instead it goes over every other table, as if they had been
	 * listed.  (A plain VACUUM does visit segments: that freezes them.)
	 */
	if (IsA(stmt, VacuumStmt) && ((VacuumStmt *) stmt)->is_vacuumcmd &&
		((VacuumStmt *) stmt)->rels == NIL && OidIsValid(get_table_am_oid("mqlog", true)))
	{
		if (vacuum_is_full((VacuumStmt *) stmt))
		{
			PlannedStmt *copy = copyObject(pstmt);

			((VacuumStmt *) copy->utilityStmt)->rels = vacuum_full_targets();
			pstmt = copy;
			readOnlyTree = false;
		}
	}

	run_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc,
				copied_segment(stmt), IsA(stmt, CreateStmt) && restore_create((CreateStmt *) stmt));
	if (pushed && ActiveSnapshotSet())
		PopActiveSnapshot();
}

/*
 * The statement itself, with pg_dump's COPY of a segment (copied) and
 * pg_restore's COPY and CREATE TABLE (creating) of one set up around it
 * (log/dump.c).
 */
static void
run_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			ProcessUtilityContext context, ParamListInfo params,
			QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc,
			Oid copied, bool creating)
{
	Node	   *stmt = pstmt->utilityStmt;

	PG_TRY();
	{
		if (OidIsValid(copied))
			MqDumpCopyStart((CopyStmt *) stmt, copied);
		restore_creating = creating;
		if (prev_utility)
			prev_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
		restore_creating = false;
		if (creating)
		{
			Relation	rel = relation_openrv(((CreateStmt *) stmt)->relation, NoLock);

			check_segment_columns(rel);
			relation_close(rel, NoLock);
		}
	}
	PG_CATCH();
	{
		restore_creating = false;
		MqDumpCopyEnd();
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (OidIsValid(copied))
		MqDumpCopyEnd();
}

void
MqAmInitHooks(void)
{
	prev_check_perms = ExecutorCheckPerms_hook;
	ExecutorCheckPerms_hook = mqlog_check_perms;
	prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = mqlog_utility;
}
