/*-------------------------------------------------------------------------
 *
 * txn.c
 *		One unit of a worker's work in a transaction of its own (with SPI
 *		and a snapshot), so that an error ends the unit, not the worker's
 *		round: the cluster sync (cluster_sync.c) and the ISR maintenance
 *		(isr.c) run each topic or partition this way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "workers/workers.h"

/*
 * Run fn(arg) in a transaction; true if it committed.  Otherwise the
 * transaction is rolled back and *error (in the caller's memory context)
 * says why, for the caller to log its own way.
 */
bool
MqWorkerRunInTransaction(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	MemoryContext outer = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		fn(arg);
		PopActiveSnapshot();
		SPI_finish();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(outer);
		*error = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(outer);
	return ok;
}
