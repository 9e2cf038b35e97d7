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

bool		mqlog_roll_ahead = true;
int			mqlog_segment_extend_ahead = 32768;	/* kB */

int			mqlog_max_partitions = 4096;
int			mqlog_max_inflight = 64;
bool		mqlog_preloaded = false;

char	   *mqlog_etcd_endpoints = NULL;
char	   *mqlog_cluster_name = NULL;
char	   *mqlog_node_name = NULL;
char	   *mqlog_node_conninfo = NULL;
char	   *mqlog_cluster_database = NULL;
int			mqlog_etcd_lease_ttl = 3;
int			mqlog_etcd_timeout = 2000;

extern void MqAmInitHooks(void);

/* set (SET clause of mqlog's own functions) while mqlog makes or changes segments */
bool		mqlog_allow_segment_ddl = false;

static const struct config_enum_entry assignor_options[] = {
	{"range", MQ_ASSIGN_RANGE, false},
	{"roundrobin", MQ_ASSIGN_ROUNDROBIN, false},
	{"sticky", MQ_ASSIGN_STICKY, false},
	{"cooperative-sticky", MQ_ASSIGN_STICKY, true},
	{NULL, 0, false}
};

static const struct config_enum_entry reset_options[] = {
	{"earliest", MQ_RESET_EARLIEST, false},
	{"latest", MQ_RESET_LATEST, false},
	{"none", MQ_RESET_NONE, false},
	{NULL, 0, false}
};

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

	DefineCustomIntVariable("mqlog.max_partitions",
							"Maximum number of partitions whose state is kept in shared memory.",
							"Every partition that is produced to or read from needs one slot.",
							&mqlog_max_partitions,
							4096, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_inflight_partitions",
							"Maximum number of partitions one transaction may produce to.",
							NULL,
							&mqlog_max_inflight,
							64, 1, 10000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("mqlog.assignor",
							 "Partition assignor this session proposes when it joins a consumer group.",
							 "The group uses the assignor of its oldest member, as Kafka's group leader decides.",
							 &mqlog_assignor, MQ_ASSIGN_RANGE, assignor_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("mqlog.auto_offset_reset",
							 "Where a group starts on a partition without a committed offset.",
							 "earliest (the default here, unlike Kafka) replays the history; latest starts at the end.",
							 &mqlog_offset_reset, MQ_RESET_EARLIEST, reset_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_groups_per_session",
							"Consumer groups one session may be a member of at once.",
							"Shared memory holds this many member and group slots per possible backend.",
							&mqlog_max_groups_per_session,
							8, 1, 1024,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_groups",
							"Consumer groups the Kafka listener may coordinate at once.",
							"Shared memory holds this many group slots for them beside the SQL sessions' slots; a JoinGroup of one more group is answered COORDINATOR_NOT_AVAILABLE.",
							&mqlog_kafka_max_groups,
							256, 1, 100000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.enable_auto_commit",
							 "mq_poll commits the group's positions of the previous poll first (Kafka's enable.auto.commit).",
							 "At least once without mq_commit: what a poll returned counts as processed once the session polls again.",
							 &mqlog_enable_auto_commit,
							 false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_poll_interval_ms",
							"A group member that does not poll for this long is evicted (Kafka's max.poll.interval.ms).",
							NULL,
							&mqlog_max_poll_interval_ms,
							300000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	/*
	 * Superuser only: every waiting poll wakes this often, so a small value
	 * costs the whole server CPU; tests raise it so that only a real wakeup
	 * can end a wait early.
	 */
	DefineCustomIntVariable("mqlog.poll_recheck_interval",
							"How often a waiting mq_poll looks for records without being woken.",
							"Commits, rebalances and DDL wake waiting polls at once; this bounds the wait for records nothing announces, such as records replayed on a standby.",
							&mqlog_poll_recheck_interval,
							1000, 10, 600000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.allow_segment_ddl",
							 "Lets mqlog's own functions drop, alter and rename segment relations.",
							 "Set only by mqlog's functions; DROP TABLE or ALTER TABLE of a segment is refused otherwise.",
							 &mqlog_allow_segment_ddl, false,
							 PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.allow_everyone_if_no_acl_found",
							 "Lets every role produce to, consume from and describe a topic that has no grants.",
							 "Kafka's allow.everyone.if.no.acl.found.  Off: a topic is its owner's and mqlog_admin's until mq_grant().",
							 &mqlog_allow_everyone_if_no_acl_found, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.maintenance_naptime",
							"Time between maintenance passes (segment roll and retention) in each database.",
							NULL,
							&mqlog_maintenance_naptime,
							10, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.debug_pause_step",
							"For tests: the step of a maintenance pass's transaction at which it waits until cancelled.",
							"0, the default, never waits.  The tests set it to stop a pass between two of its steps and kill the server there.",
							&mqlog_debug_pause_step,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.roll_ahead",
							 "Prepares each partition's next segment ahead, so that appenders roll exactly at segment.bytes and segment.ms.",
							 "Off: no segment is prepared ahead, and the maintenance worker rolls segments on its passes instead (they can outgrow segment.bytes meanwhile).",
							 &mqlog_roll_ahead, true,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.segment_extend_ahead",
							"How far the maintenance worker extends an active segment ahead of its appender.",
							"The appender then takes pages that exist instead of extending the relation itself; at most this much, at most what the log of the segment already holds, never past segment.bytes, and only once that log is 4 MB. 0 turns it off.",
							&mqlog_segment_extend_ahead, 32768, 0, 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB, NULL, NULL, NULL);
	MqReplicaDefineSettings();
	MqKafkaDefineSettings();

	/*
	 * The cluster (doc/replication.md).  Who the node is and where etcd is
	 * are fixed at server start: the cluster worker is registered only when
	 * endpoints are set, and a node's name is its identity in every replica
	 * list, so changing it on a running node would orphan its replicas.
	 */
	DefineCustomStringVariable("mqlog.etcd_endpoints",
							   "Comma-separated etcd client URLs holding the cluster's metadata; empty runs a single node.",
							   "For example 'http://10.0.0.1:2379,http://10.0.0.2:2379'.  Each request tries them in turn.",
							   &mqlog_etcd_endpoints, "",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.cluster_name",
							   "Name of the mqlog cluster: its keys in etcd are under /mqlog/<cluster_name>/.",
							   NULL,
							   &mqlog_cluster_name, "mqlog",
							   PGC_POSTMASTER, 0, MqClusterCheckName, NULL, NULL);
	DefineCustomStringVariable("mqlog.node_name",
							   "This node's name in the cluster, unique among its nodes.",
							   "Required when mqlog.etcd_endpoints is set: ASCII letters, digits, \"_\", \".\" and \"-\", at most 63 characters.",
							   &mqlog_node_name, "",
							   PGC_POSTMASTER, 0, MqClusterCheckName, NULL, NULL);
	DefineCustomStringVariable("mqlog.node_conninfo",
							   "libpq connection string other nodes reach this node with.",
							   "Required when mqlog.etcd_endpoints is set, for example 'host=10.0.0.5 port=5432'.  It is stored in etcd: keep passwords in a password file.",
							   &mqlog_node_conninfo, "",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.cluster_database",
							   "The database of each node that holds the replicated topics.",
							   NULL,
							   &mqlog_cluster_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.etcd_lease_ttl",
							"Time-to-live of this node's etcd lease: a node that stops is seen as gone this long after.",
							"The lease is renewed every third of it.  Takes effect at the next lease.",
							&mqlog_etcd_lease_ttl,
							3, 2, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.etcd_timeout",
							"Longest time one etcd request may take, over all endpoints.",
							NULL,
							&mqlog_etcd_timeout,
							2000, 100, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
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
	MqGroupEvictorRegister();
	MqMaintenanceRegister();
	if (MqClusterEnabled())
	{
		MqClusterNodeWorkerRegister();
		MqClusterSyncWorkerRegister();
	}
	MqKafkaRegister();
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
