/*-------------------------------------------------------------------------
 *
 * extension.c
 *		The SQL functions about mqlog as a whole: the install script's
 *		first check that the library was preloaded
 *		(mqlog_assert_preloaded), mqlog._catalog_changed, which the
 *		catalog functions call, and mqlog.shared_memory_areas, what each
 *		module holds in shared memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "mqlog.h"
#include "cluster/metadata.h"
#include "log/partition.h"
#include "log/producers.h"
#include "groups/groups.h"
#include "workers/workers.h"

PG_FUNCTION_INFO_V1(mqlog_assert_preloaded);
PG_FUNCTION_INFO_V1(mqlog_catalog_changed);
PG_FUNCTION_INFO_V1(mqlog_shared_memory);

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

/* mqlog._catalog_changed(): every backend reloads its cached topic metadata */
Datum
mqlog_catalog_changed(PG_FUNCTION_ARGS)
{
	MqlogCatalogChanged();
	PG_RETURN_VOID();
}

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

/* the Kafka members the listener publishes now (external_members.c) */
static int64
kafka_members_in_use(void)
{
	int			n;
	MqExternalMember *members = MqExternalMembersList(true, &n);

	if (members)
		pfree(members);
	return n;
}

/*
 * mqlog.shared_memory: what each part of mqlog holds in shared memory at
 * this server's settings, so that a DBA can size mqlog.max_partitions and
 * the rest (doc/reference.md shows the figures at the defaults).  Sizes are
 * what the server asked for at start; entries are the capacity.
 */
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
		{"Kafka listener's members", (int64) mqlog_kafka_max_groups * MQ_EXT_MEMBERS_PER_GROUP,
			MqExternalMembersShmemSize(), "mqlog.kafka_max_groups (4 per group)",
		kafka_members_in_use()},
		{"idempotent producers", mqlog_max_producer_states, MqProducersShmemSize(),
		"mqlog.max_producer_states", MqProducersInUse()},
		{"cluster nodes, lease and apply workers", MQ_CLUSTER_MAX_NODES,
		add_size(add_size(MqClusterShmemSize(), MqClusterLeaseShmemSize()), MqApplyShmemSize()), NULL, -1},
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
