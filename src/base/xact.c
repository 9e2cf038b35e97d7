/*-------------------------------------------------------------------------
 *
 * xact.c
 *		One unit of a background process's work in a transaction of its
 *		own (with SPI and a snapshot), so that an error ends the unit, not
 *		the process's round: the cluster sync (workers/cluster_sync.c) and
 *		the ISR maintenance (workers/isr.c) run each topic or partition this
 *		way, the maintenance worker each step of its pass
 *		(workers/maintenance.c, the Kafka transaction coordinator's step
 *		among them), and the Kafka listener its transaction coordinator's
 *		turn (kafka/txn_coordinator.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/xact.h"

/*
 * Run fn(arg) in a transaction; true if it committed.  Otherwise the
 * transaction is rolled back and *error (in the caller's memory context)
 * says why, for the caller to log its own way.
 */
bool
MqRunInTransaction(void (*fn) (void *arg), void *arg, ErrorData **error)
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
