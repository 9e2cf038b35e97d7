/*-------------------------------------------------------------------------
 *
 * apply_launcher.c
 *		The apply workers' launcher: their slots in shared memory, one per
 *		node followed, and starting the workers that do not run
 *		(MqApplyEnsureWorkers, which the cluster sync worker calls every
 *		round).  The worker itself is apply.c.
 *
 * As PostgreSQL keeps its logical replication launcher (launcher.c) apart
 * from the apply worker (worker.c).  Here the launcher is no process of
 * its own: the cluster sync worker knows which nodes this one follows and
 * starts their workers as dynamic background workers, never restarted by
 * the postmaster: a worker that ended is started again by the next round,
 * at most every MQ_APPLY_RESTART_MS per node.  A worker takes its slot at
 * start (MqApplyAttach), which names the node it follows, and frees it at
 * exit; it ends by itself when its node leaves the cluster.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"
#include "workers/workers.h"

#define MQ_MAX_APPLY_WORKERS	64

/* a worker that ended starts again at most this often */
#define MQ_APPLY_RESTART_MS		2000

typedef struct MqApplySlot
{
	char		leader[MQ_NODE_NAME_LEN];	/* "" = free */
	pid_t		pid;			/* 0 while not running */
	TimestampTz last_start;
} MqApplySlot;

typedef struct MqApplyShared
{
	LWLock	   *lock;
	MqApplySlot slots[MQ_MAX_APPLY_WORKERS];
} MqApplyShared;

static MqApplyShared *apply_shared = NULL;

Size
MqApplyShmemSize(void)
{
	return MAXALIGN(sizeof(MqApplyShared));
}

void
MqApplyShmemInit(void)
{
	bool		found;

	apply_shared = ShmemInitStruct("mqlog apply workers", MqApplyShmemSize(), &found);
	if (!found)
	{
		memset(apply_shared, 0, sizeof(MqApplyShared));
		apply_shared->lock = &(GetNamedLWLockTranche("mqlog apply"))->lock;
	}
}

void
MqApplyRequestLWLocks(void)
{
	RequestNamedLWLockTranche("mqlog apply", 1);
}

static bool
start_worker(int slot, const char *leader)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	MqWorkerInit(&worker, "mqlog_apply_main", "mqlog apply", true);
	snprintf(worker.bgw_name, BGW_MAXLEN, "mqlog apply from %s", leader);
	worker.bgw_main_arg = Int32GetDatum(slot);
	return RegisterDynamicBackgroundWorker(&worker, &handle);
}

/*
 * Make sure an apply worker follows each node named: start the ones that
 * do not run (at most every MQ_APPLY_RESTART_MS per node).  A worker ends
 * by itself when its node is no longer in the cluster's node list.
 */
void
MqApplyEnsureWorkers(List *leaders)
{
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(apply_shared->lock, LW_EXCLUSIVE);
	foreach(lc, leaders)
	{
		const char *leader = lfirst(lc);
		int			slot = -1;

		for (int i = 0; i < MQ_MAX_APPLY_WORKERS; i++)
		{
			if (strcmp(apply_shared->slots[i].leader, leader) == 0)
			{
				slot = i;
				break;
			}
			if (slot < 0 && apply_shared->slots[i].leader[0] == '\0')
				slot = i;
		}
		if (slot < 0)
		{
			ereport(WARNING,
					(errmsg("mqlog cannot follow leader \"%s\": all %d apply worker slots are taken",
							leader, MQ_MAX_APPLY_WORKERS)));
			continue;
		}
		if (apply_shared->slots[slot].pid != 0 ||
			(strcmp(apply_shared->slots[slot].leader, leader) == 0 &&
			 !TimestampDifferenceExceeds(apply_shared->slots[slot].last_start, now,
										 MQ_APPLY_RESTART_MS)))
			continue;
		strlcpy(apply_shared->slots[slot].leader, leader, MQ_NODE_NAME_LEN);
		apply_shared->slots[slot].last_start = now;
		if (!start_worker(slot, leader))
			ereport(WARNING,
					(errmsg("mqlog could not start the apply worker for leader \"%s\"", leader),
					 errhint("Raise max_worker_processes.")));
	}
	LWLockRelease(apply_shared->lock);
}

/* ------------------------------------------------------------------------
 * A worker in its slot
 * ------------------------------------------------------------------------ */

static int	my_slot = -1;

static void
apply_exit(int code, Datum arg)
{
	LWLockAcquire(apply_shared->lock, LW_EXCLUSIVE);
	apply_shared->slots[my_slot].pid = 0;
	LWLockRelease(apply_shared->lock);
}

/*
 * The worker started for slot takes it: leader (MQ_NODE_NAME_LEN bytes)
 * gets the node it follows, and the slot its pid until the process exits.
 */
void
MqApplyAttach(int slot, char *leader)
{
	my_slot = slot;
	LWLockAcquire(apply_shared->lock, LW_EXCLUSIVE);
	strlcpy(leader, apply_shared->slots[my_slot].leader, MQ_NODE_NAME_LEN);
	apply_shared->slots[my_slot].pid = MyProcPid;
	LWLockRelease(apply_shared->lock);
	before_shmem_exit(apply_exit, 0);
}
