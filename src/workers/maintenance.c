/*-------------------------------------------------------------------------
 *
 * maintenance.c
 *		The maintenance workers: a launcher, and one worker per database
 *		that runs mq_run_maintenance() every mqlog.maintenance_naptime.
 *
 * The launcher connects to no database (it reads only the shared catalog
 * pg_database) and, every naptime, starts one short-lived worker per
 * database that allows connections, as the autovacuum launcher does.  Each
 * worker runs one pass (nothing if mqlog is not installed there) and exits,
 * so no worker stays connected: DROP DATABASE is not held up, and CREATE
 * EXTENSION needs no restart.  The launcher loop follows
 * contrib/pg_prewarm/autoprewarm.c: latch, SIGTERM, SIGHUP, postmaster
 * death.  An error in a pass ends only that pass.  mqlog._debug_pause is
 * where the tests stop a pass between two of its steps.
 *
 * A regular pass also runs the step a layer beside this one hands it at
 * load time (MqMaintenanceSetStep; mqlog.c hands it the Kafka transaction
 * coordinator's MqKafkaTxnMaintain: the transactions past their
 * transaction.timeout.ms and the expired transactional ids of this
 * database, whether the Kafka listener runs or not).  The dependency
 * stays one way: workers/ calls a function pointer and includes nothing
 * of kafka/, whose listener is a sibling of these workers.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "base/xact.h"
#include "log/partition.h"
#include "workers/workers.h"

int			mqlog_maintenance_naptime = 10;
int			mqlog_debug_pause_step = 0;

PGDLLEXPORT void mqlog_launcher_main(Datum main_arg);
PGDLLEXPORT void mqlog_maintenance_main(Datum main_arg);

#define MAX_DB_WORKERS 256

typedef struct DbWorker
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
	TimestampTz last_start;		/* of its last regular pass */
	TimestampTz last_urgent;	/* of its last roll-ahead pass */
} DbWorker;

/* roll-ahead passes of one database start at most this often */
#define MQ_ROLL_AHEAD_SPACING_MS	100

/* the launcher: it reads the shared catalog pg_database, in no database */
void
MqMaintenanceRegister(void)
{
	MqRegisterWorker("mqlog_launcher_main", "mqlog maintenance launcher", true, 5);
}

static void
sleep_naptime(bool soon)
{
	MqWorkerNap(soon ? MQ_ROLL_AHEAD_SPACING_MS : mqlog_maintenance_naptime * 1000L);
}

/* databases that accept connections and are not templates */
static List *
list_databases(void)
{
	List	   *result = NIL;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	MemoryContext outer = CurrentMemoryContext;

	StartTransactionCommand();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
		{
			MemoryContext old = MemoryContextSwitchTo(outer);

			result = lappend_oid(result, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return result;
}

void
mqlog_launcher_main(Datum main_arg)
{
	DbWorker	workers[MAX_DB_WORKERS];
	int			nworkers = 0;
	bool		first_round = true;

	MqWorkerSetupSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	MqWorkerPinSearchPath();
	MqSetMaintenanceLatch(MyLatch);

	/*
	 * The latch is also set whenever one of our workers starts or stops, so
	 * each database is started at most once per naptime, whatever wakes us.
	 */
	while (!ShutdownRequestPending)
	{
		List	   *dbs = list_databases();
		ListCell   *lc;
		TimestampTz now = GetCurrentTimestamp();

		/* an appender that rolled, or needs a spare, wants its pass now */
		Oid			urgent = MqTakeMaintenanceRequest();
		bool		urgent_started = false;

		foreach(lc, dbs)
		{
			Oid			dboid = lfirst_oid(lc);
			DbWorker   *w = NULL;
			pid_t		pid;
			BackgroundWorker worker;
			bool		regular_due;

			for (int i = 0; i < nworkers; i++)
				if (workers[i].dboid == dboid)
					w = &workers[i];
			if (w == NULL)
			{
				if (nworkers == MAX_DB_WORKERS)
				{
					ereport(WARNING,
							(errmsg("mqlog maintenance covers at most %d databases; database %u is skipped",
									MAX_DB_WORKERS, dboid)));
					continue;
				}
				w = &workers[nworkers++];
				w->dboid = dboid;
				w->handle = NULL;

				/*
				 * At start-up every database gets a pass at once; one that
				 * appears later gets its first a naptime after we see it
				 * (a roll-ahead pass it asks for meanwhile does not count).
				 */
				w->last_start = first_round ? 0 : now;
				w->last_urgent = 0;
			}
			if (w->handle != NULL &&
				GetBackgroundWorkerPid(w->handle, &pid) != BGWH_STOPPED)
				continue;		/* its last pass is still running */
			regular_due = TimestampDifferenceExceeds(w->last_start, now,
													 mqlog_maintenance_naptime * 1000);
			if (!regular_due &&
				(dboid != urgent ||
				 !TimestampDifferenceExceeds(w->last_urgent, now, MQ_ROLL_AHEAD_SPACING_MS)))
				continue;
			if (w->handle != NULL)
			{
				pfree(w->handle);
				w->handle = NULL;
			}

			MqWorkerInit(&worker, "mqlog_maintenance_main", "mqlog maintenance", true);
			snprintf(worker.bgw_name, BGW_MAXLEN, "mqlog maintenance of database %u", dboid);
			worker.bgw_main_arg = ObjectIdGetDatum(dboid);
			worker.bgw_notify_pid = MyProcPid;
			/* a pass an appender asked for before the next regular one: rolls only */
			if (!regular_due)
			{
				worker.bgw_extra[0] = 'r';
				snprintf(worker.bgw_name, BGW_MAXLEN, "mqlog roll-ahead of database %u", dboid);
			}

			/* no free slot: the handle stays NULL and the next round retries */
			if (RegisterDynamicBackgroundWorker(&worker, &w->handle))
			{
				if (regular_due)
					w->last_start = now;
				else
					w->last_urgent = now;
				if (dboid == urgent)
					urgent_started = true;
			}
			else
				w->handle = NULL;
		}
		/* a request that found the database's pass still running waits for it to end */
		if (OidIsValid(urgent) && !urgent_started)
			MqRepostMaintenanceRequest(urgent);
		/* forget databases that are gone, once their last pass is over */
		{
			int			keep = 0;
			pid_t		pid;

			for (int i = 0; i < nworkers; i++)
			{
				if (!list_member_oid(dbs, workers[i].dboid) &&
					(workers[i].handle == NULL ||
					 GetBackgroundWorkerPid(workers[i].handle, &pid) == BGWH_STOPPED))
				{
					if (workers[i].handle)
						pfree(workers[i].handle);
					continue;
				}
				workers[keep++] = workers[i];
			}
			nworkers = keep;
		}
		list_free(dbs);
		first_round = false;
		sleep_naptime(OidIsValid(urgent) && !urgent_started);
	}
	proc_exit(0);
}

#define MQ_SWEEP_ROUNDS	100		/* 20,000 orphans (or rolls of a topic) per pass at most */

/* a step's error, which ends only that step */
static void
log_step_failure(const char *what, ErrorData *e)
{
	ereport(LOG,
			(errmsg("mqlog maintenance: the pass over %s failed and goes on with the rest: %s",
					what, e->message)));
	FreeErrorData(e);
}

/* the step handed by mqlog.c (MqMaintenanceSetStep), and what to call it in the log */
static MqMaintenanceStepFn extra_step = NULL;
static const char *extra_step_what = NULL;

void
MqMaintenanceSetStep(MqMaintenanceStepFn step, const char *what)
{
	extra_step = step;
	extra_step_what = what;
}

static void
extra_step_work(void *arg)
{
	int		   *round = arg;

	*round = extra_step(*round) ? 1 : 0;
}

/*
 * The handed step, each round in a transaction of its own, again while it
 * says there is more (at most MQ_SWEEP_ROUNDS rounds); an error ends it
 * for this pass and is logged as a step's.
 */
static void
run_extra_step(void)
{
	if (extra_step == NULL)
		return;
	for (int i = 0; i < MQ_SWEEP_ROUNDS; i++)
	{
		int			r = i;
		ErrorData  *e;

		if (!MqRunInTransaction(extra_step_work, &r, &e))
		{
			log_step_failure(extra_step_what, e);
			return;
		}
		if (r == 0)
			return;
	}
}

/* a step's query, and the count it selected */
typedef struct Step
{
	const char *q;
	int64		n;
} Step;

static void
step_work(void *arg)
{
	Step	   *st = arg;
	bool		isnull;

	if (SPI_execute(st->q, false, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog maintenance: pass failed");
	st->n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * One step of a pass in a transaction of its own; returns the count it
 * selected, or -1 after an error.  An error in one topic (a segment some
 * role's object depends on, a lock that cannot be had) is logged and the
 * pass goes on with the next: one topic must not stop retention for the
 * others.
 */
static int64
run_step(const char *q, const char *what)
{
	Step		st = {q, -1};
	ErrorData  *e;

	if (MqRunInTransaction(step_work, &st, &e))
		return st.n;
	log_step_failure(what, e);
	return -1;
}

/*
 * A pass over every topic, each topic in its own transaction: a roll keeps
 * producers of its partition out until its transaction commits, so those
 * transactions must be short.  Returns false if mqlog is not installed.
 */
/*
 * The partitions of this database's topics against mqlog.max_partitions,
 * whose shared memory is fixed at server start: a DBA learns it from the
 * log before producers and consumers fail with 53400.  (Inside the pass's
 * first transaction, connected to SPI.)
 */
static void
check_sizing(void)
{
	bool		isnull;
	int64		total;

	if (SPI_execute("SELECT pg_catalog.sum(t.partitions)::pg_catalog.int8 FROM mqlog.topic t",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog maintenance: counting partitions failed");
	total = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull || total <= mqlog_max_partitions || !MqSizingWarningDue())
		return;
	ereport(WARNING,
			(errmsg("mqlog: the topics of database \"%s\" have " INT64_FORMAT " partitions, more than mqlog.max_partitions (%d)",
					get_database_name(MyDatabaseId), total, mqlog_max_partitions),
			 errdetail("Shared memory holds the state of mqlog.max_partitions partitions, across all databases, fixed at server start; using more at once fails with 53400."),
			 errhint("Raise mqlog.max_partitions to at least " INT64_FORMAT " and restart; mqlog.shared_memory shows what it costs.", total)));
}

static bool
maintenance_pass(bool roll_ahead_only)
{
	char	   *nsp = NULL;
	List	   *topics = NIL;
	ListCell   *lc;
	MemoryContext outer = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "mqlog maintenance");
	if (SPI_execute("SELECT n.nspname FROM pg_catalog.pg_extension e"
					" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace"
					" WHERE e.extname OPERATOR(pg_catalog.=) 'mqlog'"
					" AND pg_catalog.to_regprocedure(pg_catalog.quote_ident(n.nspname)"
					" OPERATOR(pg_catalog.||) '.mq_run_maintenance(text)') IS NOT NULL",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog maintenance: extension lookup failed");
	if (SPI_processed == 1)
	{
		MemoryContext old = MemoryContextSwitchTo(outer);

		nsp = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		MemoryContextSwitchTo(old);
	}
	/* a roll-ahead pass works on the partitions that asked, not on every topic */
	if (nsp != NULL && !roll_ahead_only)
	{
		MemoryContext old;

		if (SPI_execute("SELECT t.name FROM mqlog.topic t ORDER BY t.topic_id", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog maintenance: topic list failed");
		old = MemoryContextSwitchTo(outer);
		for (uint64 i = 0; i < SPI_processed; i++)
			topics = lappend(topics, pstrdup(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
		MemoryContextSwitchTo(old);
		check_sizing();
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (nsp == NULL)
	{
		pgstat_report_activity(STATE_IDLE, NULL);
		return false;
	}

	/*
	 * A pass an appender asked for: record the rolls appenders made and
	 * prepare the segments they will roll into next, for the partitions
	 * that want it, and nothing else.
	 */
	if (roll_ahead_only)
	{
		/* first the pages appenders are about to need, then the segments */
		(void) run_step("SELECT mqlog._extend_ahead()", "segments extended ahead");
		for (int i = 0; i < MQ_SWEEP_ROUNDS; i++)
			if (run_step("SELECT mqlog._roll_ahead()", "segments prepared ahead") <= 0)
				break;
		pgstat_report_stat(false);
		pgstat_report_activity(STATE_IDLE, NULL);
		return true;
	}

	/*
	 * First the handed step (Kafka transactions past their timeout hold
	 * their partitions' last stable offset: they should not wait for every
	 * topic's retention).  Then each topic, then the sweep of orphaned
	 * segments (the full pass), in batches: a dropped topic of thousands of
	 * partitions leaves that many.  A sweep that drops less than a full
	 * batch has found them all.
	 */
	run_extra_step();
	foreach(lc, topics)
	{
		char	   *topic = lfirst(lc);
		char	   *q = psprintf("SELECT pg_catalog.count(*) FILTER (WHERE m.action OPERATOR(pg_catalog.=) 'more')"
								 " FROM %s.mq_run_maintenance(%s) m",
								 quote_identifier(nsp), quote_literal_cstr(topic));

		/* again while a call says its relation budget ran out ('more') */
		for (int i = 0; i < MQ_SWEEP_ROUNDS; i++)
			if (run_step(q, psprintf("topic \"%s\"", topic)) <= 0)
				break;
	}
	(void) run_step("SELECT mqlog._extend_ahead()", "segments extended ahead");
	for (int i = 0; i < MQ_SWEEP_ROUNDS; i++)
		if (run_step("SELECT CASE WHEN pg_catalog.count(*) OPERATOR(pg_catalog.>=) mqlog._drop_batch()"
					 " THEN 1::pg_catalog.int8 ELSE 0::pg_catalog.int8 END FROM mqlog._drop_orphans()",
					 "orphaned segments") <= 0)
			break;
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return true;
}

void
mqlog_maintenance_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);

	MqWorkerSetupSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	MqWorkerPinSearchPath();
	(void) maintenance_pass(MyBgworkerEntry->bgw_extra[0] == 'r');
	proc_exit(0);
}

/*
 * mqlog._debug_pause(step), through sql/segments.c: a point between two
 * steps of a maintenance pass (mq_run_maintenance calls it after each
 * change it makes: a roll recorded, a segment unlinked, a segment
 * dropped, ...).  With
 * mqlog.debug_pause_step at n, the n-th such point of a transaction logs
 * which step it is and waits there until the query is cancelled, the
 * server shuts down or the postmaster dies: how test/perl/031_retention_crash.pl
 * kills the server at every step of retention.  0 (the default): nothing.
 */
void
MqMaintenanceDebugPause(const char *step)
{
	static LocalTransactionId lxid = InvalidLocalTransactionId;
	static int	steps = 0;

	if (mqlog_debug_pause_step <= 0)
		return;
	if (lxid != MyProc->lxid)
	{
		lxid = MyProc->lxid;
		steps = 0;
	}
	if (++steps != mqlog_debug_pause_step)
		return;
	ereport(LOG,
			(errmsg("mqlog maintenance paused at step %d (%s)",
					steps, step)));
	while (!ShutdownRequestPending)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}
