/*-------------------------------------------------------------------------
 *
 * mqlog.c
 *		Module entry point: settings, shared memory, the WAL resource
 *		manager and hooks, all registered at shared_preload_libraries time.
 *
 * mqlog cannot work when loaded later (the rmgr and shared memory exist
 * only if the postmaster registered them), so CREATE EXTENSION checks
 * mqlog_preloaded and tells the DBA how to fix the configuration.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "mqlog.h"
#include "store/wal.h"
#include "log/am.h"
#include "log/partition.h"
#include "log/replica.h"
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

	/* each module its own settings, in the order of the layers */
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
	MqPositionsInitCallbacks();
	MqGroupsInitCallbacks();
	MqClusterInitCallbacks();
	MqCoordinatorRegister();
	MqMaintenanceRegister();
	if (MqClusterEnabled())
		MqClusterWorkersRegister();
	MqKafkaRegister();
	MqClusterSetKafkaListener(MqKafkaListener);
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
									MqClusterShmemSize()));
	RequestNamedLWLockTranche("mqlog", 1);
	RequestNamedLWLockTranche("mqlog_groups", 1);
	RequestAddinShmemSpace(MqApplyShmemSize());
	MqApplyRequestLWLocks();
	RequestNamedLWLockTranche("mqlog_cluster", 1);
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
	MqClusterShmemInit();
	LWLockRelease(AddinShmemInitLock);
	MqPartitionRegisterTranche();
}

PG_FUNCTION_INFO_V1(mqlog_assert_preloaded);

/* Called first thing by the extension script. */
Datum
mqlog_assert_preloaded(PG_FUNCTION_ARGS)
{
	if (!mqlog_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mqlog must be loaded via shared_preload_libraries"),
				 errdetail("mqlog registers a WAL resource manager, shared memory and background workers when the server starts."),
				 errhint("Add 'mqlog' to shared_preload_libraries in postgresql.conf and restart the server, then run CREATE EXTENSION mqlog again.")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(mqlog_catalog_changed);

Datum
mqlog_catalog_changed(PG_FUNCTION_ARGS)
{
	MqlogCatalogChanged();
	PG_RETURN_VOID();
}

/*
 * mqlog.shared_memory: what each part of mqlog holds in shared memory at
 * this server's settings, so that a DBA can size mqlog.max_partitions and
 * the rest (doc/reference.md shows the figures at the defaults).  Sizes are
 * what the server asked for at start; entries are the capacity.
 */
PG_FUNCTION_INFO_V1(mqlog_shared_memory);

/* the group slots the Kafka listener holds now (mqlog.kafka_max_groups) */
static int64
kafka_groups_in_use(void)
{
	int			n;
	MqExternalGroupInfo *held = MqGroupsHostedExternally(true, &n);

	if (held)
		pfree(held);
	return n;
}

Datum
mqlog_shared_memory(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Size		parts_total = MqPartitionShmemSize() - MqInflightPoolSize();
	int64		inflight_used;
	int64		parts_used = MqPartitionsInUse(&inflight_used);
	int			groups_used;
	int64		members_used = MqGroupSlotsInUse(&groups_used);
	int64		kafka_groups_used = kafka_groups_in_use();
	struct
	{
		const char *area;
		int64		entries;
		Size		bytes;
		const char *setting;
		int64		in_use;		/* -1: not counted */
	}			rows[] = {
		{"partitions", mqlog_max_partitions, parts_total, "mqlog.max_partitions", parts_used},
		{"in-flight appends", (int64) MaxBackends * mqlog_max_inflight, MqInflightPoolSize(),
		"mqlog.max_inflight_partitions per backend", inflight_used},
		{"group members and groups", (int64) MaxBackends * mqlog_max_groups_per_session,
			MqGroupsShmemSize() - MqGroupsExternalShmemSize(), "mqlog.max_groups_per_session per backend",
		members_used},
		{"Kafka listener's groups", mqlog_kafka_max_groups, MqGroupsExternalShmemSize(),
		"mqlog.kafka_max_groups", kafka_groups_used},
		{"cluster nodes, lease and apply workers", MQ_CLUSTER_MAX_NODES,
		add_size(MqClusterShmemSize(), MqApplyShmemSize()), NULL, -1},
	};

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < lengthof(rows); i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, rows[i].setting == NULL, rows[i].in_use < 0};

		values[0] = CStringGetTextDatum(rows[i].area);
		values[1] = Int64GetDatum(rows[i].entries);
		values[2] = Int64GetDatum((int64) rows[i].bytes);
		values[3] = Int64GetDatum((int64) (rows[i].bytes / Max(rows[i].entries, 1)));
		values[4] = rows[i].setting ? CStringGetTextDatum(rows[i].setting) : (Datum) 0;
		values[5] = Int64GetDatum(rows[i].in_use);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
