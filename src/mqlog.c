/*-------------------------------------------------------------------------
 *
 * mqlog.c
 *		Module entry point: each module's settings, shared memory, the WAL
 *		resource manager, the workers and hooks, all registered at
 *		shared_preload_libraries time.
 *
 * mqlog cannot work when loaded later (the rmgr and shared memory exist
 * only if the postmaster registered them), so CREATE EXTENSION checks
 * mqlog_preloaded (sql/extension.c) and tells the DBA how to fix the
 * configuration.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "mqlog.h"
#include "store/wal.h"
#include "log/am.h"
#include "log/kafka_holds.h"
#include "log/partition.h"
#include "log/producers.h"
#include "acl/acl.h"
#include "cluster/metadata.h"
#include "groups/groups.h"
#include "workers/workers.h"
#include "kafka/kafka.h"
#include "sql/scan.h"

PG_MODULE_MAGIC;

bool		mqlog_preloaded = false;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static void mq_shmem_request(void);
static void mq_shmem_startup(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	/* each module defines its own settings, in the order of the layers */
	MqClusterDefineSettings();
	MqLogDefineSettings();
	MqAclDefineSettings();
	MqGroupsDefineSettings();
	MqWorkersDefineSettings();
	MqKafkaDefineSettings();
	/* every mqlog.* setting is defined: any other is a typo from now on */
	MarkGUCPrefixReserved("mqlog");
	MqClusterCheckSettings();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = mq_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = mq_shmem_startup;
	MqlogRegisterRmgr();
	MqPartitionInitCallbacks();
	MqKafkaHoldsInit();
	MqProducersInitCallbacks();
	MqPositionsInitCallbacks();
	MqGroupsInitCallbacks();
	MqClusterInitCallbacks();
	MqGroupEvictorRegister();
	MqMaintenanceRegister();
	if (MqClusterEnabled())
	{
		MqClusterNodeWorkerRegister();
		MqClusterSyncWorkerRegister();
	}
	MqKafkaRegister();
	/* cluster/ names this node's Kafka listener in etcd, kafka/ knows it */
	MqClusterSetKafkaListener(MqKafkaListener);
	/* the maintenance worker enforces Kafka transactions' timeouts, kafka/ knows them */
	MqMaintenanceSetStep(MqKafkaTxnMaintain, "Kafka transactions past their timeout");
	MqAmInitHooks();
	MqAclInitHooks();
	MqRecordScanInit();
	mqlog_preloaded = true;
}

/* ------------------------------------------------------------------------
 * Shared memory: each module says what it needs and initializes its part.
 * ------------------------------------------------------------------------ */

static void
mq_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(MqPartitionShmemSize(), MqGroupsShmemSize()),
									add_size(MqClusterShmemSize(), MqClusterLeaseShmemSize())));
	RequestNamedLWLockTranche("mqlog", 1);
	RequestNamedLWLockTranche("mqlog_groups", 1);
	RequestAddinShmemSpace(MqApplyShmemSize());
	RequestAddinShmemSpace(MqProducersShmemSize());
	RequestNamedLWLockTranche("mqlog_producers", 1);
	MqApplyRequestLWLocks();
	RequestNamedLWLockTranche("mqlog_cluster", 1);
	RequestAddinShmemSpace(MqExternalMembersShmemSize());
	RequestNamedLWLockTranche("mqlog_external_members", 1);
}

static void
mq_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	MqPartitionShmemInit();
	MqGroupsShmemInit();
	MqApplyShmemInit();
	MqProducersShmemInit();
	MqClusterShmemInit();
	MqClusterLeaseShmemInit();
	MqExternalMembersShmemInit();
	LWLockRelease(AddinShmemInitLock);
	MqPartitionRegisterTranche();
}
