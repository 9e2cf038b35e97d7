/*-------------------------------------------------------------------------
 *
 * scan.c
 *		"Custom Scan (mqlog records)": the rows of mq_poll, mq_poll_pattern
 *		and mq_fetch (and their text and json forms) in FROM, handed to the
 *		executor as they were made, without a tuplestore.
 *
 * PostgreSQL 15 runs a function in FROM through a Function Scan, which
 * materializes every set-returning function: each row is formed into a
 * minimal tuple in a tuplestore (its key and value copied again, their
 * four-byte headers shortened to one), read back, deformed, and a value so
 * shortened is copied once more by byteasend to give it its header back.
 * For a poll of 500 records of 100 bytes that was a quarter of the
 * backend's time (doc/benchmarks.md).  The node planned here instead calls
 * the same C function with a ReturnSetInfo that records.c recognizes
 * (MqRowSinkArm), which keeps each row's datums as the reader made them,
 * and returns them as virtual tuples.
 *
 * What the Function Scan did and this node must do as well:
 *	- the function is called at the first fetch, once per execution: a
 *	  rescan or a rewind returns the same rows again (plans whose arguments
 *	  can change between rescans, with PARAM_EXEC or LATERAL references, keep
 *	  the Function Scan);
 *	- EXECUTE privilege is checked at executor start, with the object access
 *	  hook told, and the call is counted in pg_stat_user_functions;
 *	- a strict function (mq_fetch) with a null argument returns no rows;
 *	- backward scans and mark/restore (cursors, merge joins) work;
 *	- the rows take at most work_mem: past it records.c puts them in a
 *	  tuplestore, which goes to a temporary file, and the node reads that as
 *	  the Function Scan read its own.
 * A function that is SECURITY DEFINER or has SET options (a DBA's ALTER
 * FUNCTION), or one a loadable module hooks (needs_fmgr_hook), keeps the
 * Function Scan, which calls it through fmgr's wrappers; so does a result
 * type that is not mqlog.record's columns (MqIsRecordDesc), which the
 * Function Scan's call reports.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "log/records.h"
#include "sql/scan.h"

/* the readers whose rows records.c can keep (sql/groups.c, sql/fetch.c) */
extern Datum mq_poll(PG_FUNCTION_ARGS);
extern Datum mq_poll_pattern(PG_FUNCTION_ARGS);
extern Datum mq_fetch(PG_FUNCTION_ARGS);

#define RECORD_SCAN_NAME	"mqlog records"

typedef struct RecordScanState
{
	CustomScanState css;
	FuncExpr   *fexpr;
	FmgrInfo	flinfo;
	List	   *args;			/* ExprStates of fexpr's arguments */
	ReturnSetInfo rsinfo;
	bool		called;
	MqRowSink	sink;
	int			eflags;
	int			current;		/* as a tuplestore's read pointer */
	bool		eof;
	int			mark_current;
	bool		mark_eof;
	TupleTableSlot *stored;		/* a row read from sink.store */
	int			mark_ptr;		/* sink.store's read pointer of the mark, or -1 */
} RecordScanState;

static set_rel_pathlist_hook_type prev_set_rel_pathlist_hook = NULL;

static Plan *plan_record_scan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
							  List *tlist, List *clauses, List *custom_plans);
static Node *create_record_scan_state(CustomScan *cscan);
static void begin_record_scan(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *exec_record_scan(CustomScanState *node);
static void end_record_scan(CustomScanState *node);
static void rescan_record_scan(CustomScanState *node);
static void mark_record_scan(CustomScanState *node);
static void restore_record_scan(CustomScanState *node);
static void explain_record_scan(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomPathMethods record_path_methods = {
	.CustomName = RECORD_SCAN_NAME,
	.PlanCustomPath = plan_record_scan,
};

static const CustomScanMethods record_scan_methods = {
	.CustomName = RECORD_SCAN_NAME,
	.CreateCustomScanState = create_record_scan_state,
};

static const CustomExecMethods record_exec_methods = {
	.CustomName = RECORD_SCAN_NAME,
	.BeginCustomScan = begin_record_scan,
	.ExecCustomScan = exec_record_scan,
	.EndCustomScan = end_record_scan,
	.ReScanCustomScan = rescan_record_scan,
	.MarkPosCustomScan = mark_record_scan,
	.RestrPosCustomScan = restore_record_scan,
	.ExplainCustomScan = explain_record_scan,
};

/* ------------------------------------------------------------------------
 * Planning
 * ------------------------------------------------------------------------ */

/*
 * Is funcid one of mqlog's record readers, called plainly?  Told by the C
 * function it calls, whatever the SQL function's name or schema.
 */
static bool
is_record_reader(Oid funcid)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		plain;
	FmgrInfo	finfo;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	plain = proc->prolang == ClanguageId && proc->proretset && !proc->prosecdef &&
		heap_attisnull(tup, Anum_pg_proc_proconfig, NULL);
	if (plain)
	{
		/* the symbol first: no other module's library is loaded to ask it */
		bool		isnull;
		char	   *src = TextDatumGetCString(SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc,
															  &isnull));

		plain = strcmp(src, "mq_poll") == 0 || strcmp(src, "mq_poll_pattern") == 0 ||
			strcmp(src, "mq_fetch") == 0;
	}
	ReleaseSysCache(tup);
	if (!plain || FmgrHookIsNeeded(funcid))
		return false;
	fmgr_info(funcid, &finfo);
	return finfo.fn_addr == mq_poll || finfo.fn_addr == mq_poll_pattern ||
		finfo.fn_addr == mq_fetch;
}

/* an argument whose value can change between rescans of the node */
static bool
varying_arg_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind != PARAM_EXTERN)
		return true;
	if (IsA(node, Var) || IsA(node, SubPlan) || IsA(node, SubLink) ||
		IsA(node, PlaceHolderVar))
		return true;
	return expression_tree_walker(node, varying_arg_walker, context);
}

/*
 * A whole-row reference to the function's result (a row passed on as
 * such): the scan tuple has its columns only, so the Function Scan, which
 * forms the row, keeps it.
 */
static bool
needs_whole_row(RelOptInfo *rel)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;

	pull_varattnos((Node *) rel->reltarget->exprs, rel->relid, &attrs);
	foreach(lc, rel->baserestrictinfo)
		pull_varattnos((Node *) ((RestrictInfo *) lfirst(lc))->clause, rel->relid, &attrs);
	return bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, attrs);
}

static FuncExpr *
record_reader_call(RelOptInfo *rel, RangeTblEntry *rte)
{
	RangeTblFunction *rtfunc;
	FuncExpr   *fexpr;
	TupleDesc	desc;

	if (rte->rtekind != RTE_FUNCTION || rte->funcordinality ||
		list_length(rte->functions) != 1 || rel->reloptkind != RELOPT_BASEREL ||
		!bms_is_empty(rel->lateral_relids) || IS_DUMMY_REL(rel))
		return NULL;
	rtfunc = linitial(rte->functions);
	if (!IsA(rtfunc->funcexpr, FuncExpr) || rtfunc->funccolnames != NIL)
		return NULL;
	fexpr = (FuncExpr *) rtfunc->funcexpr;
	if (needs_whole_row(rel))
		return NULL;
	if (!fexpr->funcretset || varying_arg_walker((Node *) fexpr->args, NULL) ||
		!is_record_reader(fexpr->funcid))
		return NULL;
	/* a changed result type, or a scalar one: the Function Scan's call reports it */
	desc = get_expr_result_tupdesc((Node *) fexpr, true);
	if (desc == NULL || !MqIsRecordDesc(desc))
		return NULL;
	return fexpr;
}

/*
 * A call of a record reader in FROM gets this node instead of the Function
 * Scan: the one path of its relation, as it is cheaper in every way.
 */
static void
record_scan_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	CustomPath *cpath;
	Path	   *function_path;

	if (prev_set_rel_pathlist_hook)
		prev_set_rel_pathlist_hook(root, rel, rti, rte);
	if (rel->pathlist == NIL || record_reader_call(rel, rte) == NULL)
		return;
	function_path = linitial(rel->pathlist);
	cpath = makeNode(CustomPath);
	cpath->path.pathtype = T_CustomScan;
	cpath->path.parent = rel;
	cpath->path.pathtarget = rel->reltarget;
	cpath->path.param_info = NULL;
	cpath->path.parallel_aware = false;
	cpath->path.parallel_safe = false;
	cpath->path.parallel_workers = 0;
	cpath->path.rows = function_path->rows;
	cpath->path.startup_cost = function_path->startup_cost;
	cpath->path.total_cost = function_path->total_cost;
	cpath->path.pathkeys = NIL;
	cpath->flags = CUSTOMPATH_SUPPORT_BACKWARD_SCAN | CUSTOMPATH_SUPPORT_MARK_RESTORE;
	cpath->methods = &record_path_methods;
	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	add_path(rel, &cpath->path);
}

/*
 * The scan has no relation of its own (scanrelid 0): its tuple is described
 * by custom_scan_tlist, every column of the function's result in order,
 * which is what records.c fills; setrefs.c points the targetlist and quals
 * at it.
 */
static Plan *
plan_record_scan(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cscan = makeNode(CustomScan);
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	RangeTblFunction *rtfunc = linitial(rte->functions);

	cscan->scan.plan.targetlist = tlist;
	cscan->scan.plan.qual = extract_actual_clauses(clauses, false);
	cscan->scan.scanrelid = 0;
	cscan->flags = best_path->flags;
	cscan->custom_exprs = list_make1(copyObject(rtfunc->funcexpr));
	cscan->custom_scan_tlist = build_physical_tlist(root, rel);
	cscan->methods = &record_scan_methods;
	return &cscan->scan.plan;
}

/* ------------------------------------------------------------------------
 * Execution
 * ------------------------------------------------------------------------ */

static Node *
create_record_scan_state(CustomScan *cscan)
{
	RecordScanState *st = palloc0(sizeof(RecordScanState));

	NodeSetTag(st, T_CustomScanState);
	st->css.flags = cscan->flags;
	st->css.methods = &record_exec_methods;
	return (Node *) st;
}

static void
begin_record_scan(CustomScanState *node, EState *estate, int eflags)
{
	RecordScanState *st = (RecordScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	AclResult	aclresult;

	st->fexpr = linitial(cscan->custom_exprs);
	/* as ExecInitFunc does for the Function Scan's call */
	aclresult = pg_proc_aclcheck(st->fexpr->funcid, GetUserId(), ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(st->fexpr->funcid));
	InvokeFunctionExecuteHook(st->fexpr->funcid);
	fmgr_info(st->fexpr->funcid, &st->flinfo);
	fmgr_info_set_expr((Node *) st->fexpr, &st->flinfo);
	st->args = ExecInitExprList(st->fexpr->args, &node->ss.ps);
	st->eflags = eflags;
	st->called = false;
	st->current = 0;
	st->eof = false;
	st->stored = ExecInitExtraTupleSlot(estate, node->ss.ss_ScanTupleSlot->tts_tupleDescriptor,
										&TTSOpsMinimalTuple);
	st->mark_ptr = -1;
}

/* the function's one call: its rows into st->sink */
static void
call_reader(RecordScanState *st)
{
	ExprContext *econtext = st->css.ss.ps.ps_ExprContext;
	int			nargs = list_length(st->args);
	FunctionCallInfo fcinfo;
	PgStat_FunctionCallUsage fcusage;
	MemoryContext old;
	ListCell   *lc;
	int			i = 0;
	bool		has_null = false;

	st->called = true;
	memset(&st->sink, 0, sizeof(st->sink));
	st->sink.random_access = (st->eflags & (EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK)) != 0;
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	fcinfo = palloc0(SizeForFunctionCallInfo(nargs));
	memset(&st->rsinfo, 0, sizeof(st->rsinfo));
	st->rsinfo.type = T_ReturnSetInfo;
	st->rsinfo.econtext = econtext;
	st->rsinfo.expectedDesc = st->css.ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	st->rsinfo.allowedModes = (int) SFRM_Materialize;
	st->rsinfo.returnMode = SFRM_ValuePerCall;
	st->rsinfo.isDone = ExprSingleResult;
	InitFunctionCallInfoData(*fcinfo, &st->flinfo, nargs, st->fexpr->inputcollid, NULL,
							 (Node *) &st->rsinfo);
	foreach(lc, st->args)
	{
		fcinfo->args[i].value = ExecEvalExpr(lfirst(lc), econtext, &fcinfo->args[i].isnull);
		has_null |= fcinfo->args[i].isnull;
		i++;
	}
	/* a strict function called with a null returns no rows, as in a Function Scan */
	if (!(st->flinfo.fn_strict && has_null))
	{
		pgstat_init_function_usage(fcinfo, &fcusage);
		MqRowSinkArm(&st->rsinfo, &st->sink);
		PG_TRY();
		{
			(void) FunctionCallInvoke(fcinfo);
		}
		PG_FINALLY();
		{
			MqRowSinkArm(NULL, NULL);
		}
		PG_END_TRY();
		pgstat_end_function_usage(&fcusage, true);
		if (st->rsinfo.setResult != NULL)
			elog(ERROR, "mqlog: %s returned its rows in a tuplestore", get_func_name(st->fexpr->funcid));
	}
	MemoryContextSwitchTo(old);
}

/* the next row of a read past work_mem, which records.c put in sink.store */
static TupleTableSlot *
next_stored_row(RecordScanState *st, TupleTableSlot *slot, bool forward)
{
	if (!tuplestore_gettupleslot(st->sink.store, forward, false, st->stored))
		return slot;
	slot_getallattrs(st->stored);
	memcpy(slot->tts_values, st->stored->tts_values, sizeof(Datum) * slot->tts_tupleDescriptor->natts);
	memcpy(slot->tts_isnull, st->stored->tts_isnull, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	return ExecStoreVirtualTuple(slot);
}

/* the next row in the scan's direction, with a tuplestore's read semantics */
static TupleTableSlot *
next_row(ScanState *ss)
{
	RecordScanState *st = (RecordScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	int			row;

	if (!st->called)
		call_reader(st);
	ExecClearTuple(slot);
	if (st->sink.store)
		return next_stored_row(st, slot, ScanDirectionIsForward(ss->ps.state->es_direction));
	if (ScanDirectionIsForward(ss->ps.state->es_direction))
	{
		if (st->current >= st->sink.nrows)
		{
			st->eof = true;
			return slot;
		}
		row = st->current++;
	}
	else
	{
		/* the row before the one returned last; after the end, the last */
		if (st->eof)
		{
			st->current = st->sink.nrows;
			st->eof = false;
		}
		else
		{
			if (st->current <= 0)
				return slot;
			st->current--;
		}
		if (st->current <= 0)
			return slot;
		row = st->current - 1;
	}
	memcpy(slot->tts_values, &st->sink.values[row * st->sink.natts], sizeof(Datum) * st->sink.natts);
	memcpy(slot->tts_isnull, &st->sink.nulls[row * st->sink.natts], sizeof(bool) * st->sink.natts);
	return ExecStoreVirtualTuple(slot);
}

/*
 * ExecScan asks this in an EvalPlanQual recheck instead of next_row, for a
 * scan with no relation of its own (scanrelid 0), to put the row in slot
 * itself.  The node has no test tuple to give (a row lock makes the
 * planner keep the Function Scan, as it needs the row whole), so it gives
 * its rows, as the Function Scan does.  PostgreSQL 15's later minor
 * releases ask only in the recheck's own plan tree, where the node never
 * is; earlier ones asked in its subqueries too, where giving no row (the
 * empty slot) would make count(*) of mq_fetch 0 in a rechecked UPDATE.
 */
static bool
recheck_row(ScanState *ss, TupleTableSlot *slot)
{
	return !TupIsNull(next_row(ss));
}

static TupleTableSlot *
exec_record_scan(CustomScanState *node)
{
	return ExecScan(&node->ss, next_row, recheck_row);
}

/*
 * The rows live in records.c's result memory, which the query's end resets;
 * a tuplestore of rows past work_mem has a temporary file to close as well.
 */
static void
end_record_scan(CustomScanState *node)
{
	RecordScanState *st = (RecordScanState *) node;

	if (st->sink.store)
		tuplestore_end(st->sink.store);
	st->sink.store = NULL;
}

static void
rescan_record_scan(CustomScanState *node)
{
	RecordScanState *st = (RecordScanState *) node;

	ExecScanReScan(&node->ss);
	st->current = 0;
	st->eof = false;
	if (st->sink.store)
		tuplestore_rescan(st->sink.store);
}

static void
mark_record_scan(CustomScanState *node)
{
	RecordScanState *st = (RecordScanState *) node;

	st->mark_current = st->current;
	st->mark_eof = st->eof;
	if (st->sink.store)
	{
		if (st->mark_ptr < 0)
			st->mark_ptr = tuplestore_alloc_read_pointer(st->sink.store, 0);
		tuplestore_copy_read_pointer(st->sink.store, 0, st->mark_ptr);
	}
}

static void
restore_record_scan(CustomScanState *node)
{
	RecordScanState *st = (RecordScanState *) node;

	st->current = st->mark_current;
	st->eof = st->mark_eof;
	/* no read pointer of a mark: the mark was made before the call, at the start */
	if (st->sink.store && st->mark_ptr >= 0)
		tuplestore_copy_read_pointer(st->sink.store, st->mark_ptr, 0);
	else if (st->sink.store)
		tuplestore_rescan(st->sink.store);
}

/* EXPLAIN VERBOSE names the call, as it does for a Function Scan */
static void
explain_record_scan(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *context;

	if (!es->verbose)
		return;
	context = set_deparse_context_plan(es->deparse_cxt, &cscan->scan.plan, ancestors);
	ExplainPropertyText("Function Call",
						deparse_expression(linitial(cscan->custom_exprs), context, false, false),
						es);
}

void
MqRecordScanInit(void)
{
	RegisterCustomScanMethods(&record_scan_methods);
	prev_set_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = record_scan_pathlist;
}
