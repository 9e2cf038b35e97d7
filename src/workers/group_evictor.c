/*-------------------------------------------------------------------------
 *
 * group_evictor.c
 *		The group evictor background worker ("mqlog group evictor"): evicts
 *		the members of SQL consumer groups that stopped polling.
 *
 * Polls rebalance their group inline when they notice a membership change,
 * and an exiting backend removes its own memberships, so the evictor's
 * job is what no session will do: evict members that stopped polling for
 * max.poll.interval.ms and rebalance the groups they leave behind.  (Kafka
 * clients' groups are coordinated by the Kafka listener, kafka/api_groups.c,
 * which times out their members itself.)  It needs shared memory only, no
 * database connection.  The loop follows contrib/pg_prewarm/autoprewarm.c:
 * a latch, SIGTERM, SIGHUP and postmaster death.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "groups/groups.h"
#include "workers/workers.h"

PGDLLEXPORT void mqlog_group_evictor_main(Datum main_arg);

/* shared memory only, no database; restarted a second after it ends */
void
MqGroupEvictorRegister(void)
{
	MqRegisterWorker("mqlog_group_evictor_main", "mqlog group evictor", false, 1);
}

void
mqlog_group_evictor_main(Datum main_arg)
{
	MemoryContext cxt;

	MqWorkerSetupSignals();

	cxt = AllocSetContextCreate(TopMemoryContext, "mqlog group evictor", ALLOCSET_DEFAULT_SIZES);
	MqGroupsSetEvictorLatch(MyLatch);

	while (!ShutdownRequestPending)
	{
		MemoryContext old;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		old = MemoryContextSwitchTo(cxt);
		(void) MqGroupsEvictIdle();
		MemoryContextSwitchTo(old);
		MemoryContextReset(cxt);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	MqGroupsSetEvictorLatch(NULL);
	proc_exit(0);
}
