/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *		What mqlog's background workers share: how they are registered
 *		(MqRegisterWorker for the ones that start with the server, from
 *		_PG_init; MqWorkerInit for the ones a launcher starts on demand),
 *		the signals and the nap of their loops, and the log of a round that
 *		keeps failing.
 *
 * Every mqlog worker lives in this library, attaches to shared memory and
 * starts once recovery has finished (a standby runs none of them).  What
 * differs is its entry point, its name, whether it connects to a
 * database, and whether and when the postmaster restarts it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "workers/workers.h"

/*
 * Fill in worker for one of mqlog's workers: its entry point function (in
 * this library), its bgw_type type (also its bgw_name, which the caller
 * may make more precise), a database connection if database; never
 * restarted, nothing to notify and no argument until the caller says
 * otherwise.
 */
void
MqWorkerInit(BackgroundWorker *worker, const char *function, const char *type,
			 bool database)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS;
	if (database)
		worker->bgw_flags |= BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker->bgw_library_name, "mqlog", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker->bgw_name, type, BGW_MAXLEN);
	strlcpy(worker->bgw_type, type, BGW_MAXLEN);
}

/*
 * Register, from _PG_init, a worker that starts with the server, named
 * type, and that the postmaster starts again restart_s seconds after it
 * ends.
 */
void
MqRegisterWorker(const char *function, const char *type, bool database, int restart_s)
{
	BackgroundWorker worker;

	MqWorkerInit(&worker, function, type, database);
	worker.bgw_restart_time = restart_s;
	RegisterBackgroundWorker(&worker);
}

/* SIGTERM asks the loop to end, SIGHUP to reload (autoprewarm.c's way) */
void
MqWorkerSetupSignals(void)
{
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
}

/*
 * Sleep ms (at least 10), or until the latch is set; then reload the
 * configuration if SIGHUP asked for it.  Postmaster death ends the process.
 */
void
MqWorkerNap(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 Max(ms, 10), PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/*
 * Log a failure of a round, unless the same one was logged less than
 * MQ_RETRY_LOG_MS ago: etcd down must not write a line a second.
 */
void
MqRetryLogFailure(MqRetryLog *rl, const char *who, ErrorData *e)
{
	TimestampTz now = GetCurrentTimestamp();

	if (rl->failing && strcmp(rl->last_message, e->message) == 0 &&
		!TimestampDifferenceExceeds(rl->last_logged, now, MQ_RETRY_LOG_MS))
		return;
	ereport(LOG,
			(errmsg("%s: %s; retrying every second", who, e->message),
			 e->detail ? errdetail_internal("%s", e->detail) : 0,
			 e->hint ? errhint("%s", e->hint) : 0));
	rl->failing = true;
	rl->last_logged = now;
	strlcpy(rl->last_message, e->message, sizeof(rl->last_message));
}

/* a round succeeded: say so if the ones before failed (their etcd requests) */
void
MqRetryLogSuccess(MqRetryLog *rl, const char *who)
{
	if (rl->failing)
		ereport(LOG, (errmsg("%s: etcd requests succeed again", who)));
	rl->failing = false;
}
