/*-------------------------------------------------------------------------
 *
 * bgworker.c
 *		What mqlog's background workers share, beginning with how they are
 *		registered: MqRegisterWorker for the ones that start with the
 *		server (from _PG_init), MqWorkerInit for the ones a launcher starts
 *		on demand (RegisterDynamicBackgroundWorker).
 *
 * Every mqlog worker lives in this library, attaches to shared memory and
 * starts once recovery has finished (a standby runs none of them).  What
 * differs is its entry point, its name, whether it connects to a
 * database, and whether and when the postmaster restarts it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/bgworker.h"

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
