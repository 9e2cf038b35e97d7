/*-------------------------------------------------------------------------
 *
 * cluster_node.c
 *		The "mqlog cluster" worker: registers this node in etcd, keeps its
 *		lease alive and the node list in shared memory, and, in the same
 *		round, runs the elector's round (cluster/failover.c) and lets go
 *		of the consumer groups that no longer run here
 *		(cluster/group_claims.c).
 *
 * It runs only when mqlog.etcd_endpoints is set, and connects to no
 * database.  It is a process apart from "mqlog cluster sync"
 * (cluster_sync.c) because that one takes table locks (creating and
 * dropping topics) and may wait on them, and a wait there must never let
 * this node's lease expire.
 *
 * It grants a lease of mqlog.etcd_lease_ttl, puts nodes/<name> under it if
 * no live node holds the name (a create-if-absent txn, which also writes
 * members/<name> without a lease), renews it every third of the TTL, and
 * registers again with a new lease when etcd says the lease is gone.  A key left by an earlier run of this same node
 * (same system identifier and conninfo) is taken over by revoking its
 * lease; a key of another node keeps this one out, with a WARNING, until
 * that lease ends.  Before it first registers it takes the node's Kafka
 * broker id (MqClusterAssignBrokerId), which goes into the node's record
 * with its Kafka listener and rack; when a reload changes the listener's
 * advertised address or the rack, the record is written again under the
 * same lease.  Every
 * second it reads the node list into shared memory.  At a clean shutdown
 * it revokes its lease, so the node is gone at once.
 *
 * The loop follows contrib/pg_prewarm/autoprewarm.c (latch, SIGTERM,
 * SIGHUP, postmaster death); an error in one round is logged (at most
 * once a minute while etcd stays unreachable) and the next round goes on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/etcd.h"
#include "cluster/json.h"
#include "cluster/metadata.h"
#include "groups/groups.h"
#include "workers/workers.h"

PGDLLEXPORT void mqlog_cluster_main(Datum main_arg);

/* no database; restarted 5 s after it ends */
void
MqClusterNodeWorkerRegister(void)
{
	MqRegisterWorker("mqlog_cluster_main", "mqlog cluster", false, 5);
}

static int64 my_lease = 0;
static int	granted_ttl = 0;		/* the TTL my_lease was granted with, s */
static TimestampTz next_keepalive = 0;
static TimestampTz next_register = 0;
static TimestampTz next_list = 0;
static TimestampTz last_list_ok = 0;
static TimestampTz last_clash_logged = 0;
static int32 my_broker_id = -1;	/* this node's Kafka broker id, once taken */
static char *registered_value = NULL;	/* the record under my_lease */

/* the value another node registered holds an earlier run of this one? */
static bool
is_earlier_self(const char *value)
{
	JsonbContainer *c = MqJsonParse(value);
	char	   *sysid = MqJsonString(c, "sysid");
	char	   *conninfo = MqJsonString(c, "conninfo");
	char		mine[32];

	snprintf(mine, sizeof(mine), UINT64_FORMAT, GetSystemIdentifier());
	return sysid && conninfo && strcmp(sysid, mine) == 0 &&
		strcmp(conninfo, mqlog_node_conninfo) == 0;
}

static void registered(int64 lease, const char *key, const char *value, TimestampTz now,
					   int64 sent);
static void name_taken(int64 lease, const char *key, const char *value, TimestampTz now,
					   int64 sent);

/* false when it is not yet time to try again, and etcd was not asked */
static bool
try_register(TimestampTz now)
{
	char	   *key = MqClusterKey("nodes/%s", mqlog_node_name);
	char	   *value;
	int64		lease;
	int64		sent;
	MqEtcdTxn  *txn;

	if (now < next_register)
		return false;
	next_register = TimestampTzPlusMilliseconds(now, 1000);
	if (my_broker_id < 0)
	{
		my_broker_id = MqClusterAssignBrokerId();
		MqClusterSetSelfBrokerId(my_broker_id);
	}
	value = MqClusterNodeJson(my_broker_id);
	/* the lease counts from before the request: etcd's count starts later */
	sent = MqClusterClock();
	granted_ttl = mqlog_etcd_lease_ttl;
	lease = MqEtcdLeaseGrant(granted_ttl);
	txn = MqEtcdTxnBegin();
	MqEtcdTxnIfAbsent(txn, key);
	MqEtcdTxnPut(txn, key, value, lease);
	MqEtcdTxnPut(txn, MqClusterKey("members/%s", mqlog_node_name), value, 0);
	if (MqEtcdTxnCommit(txn, NULL))
		registered(lease, key, value, now, sent);
	else
		name_taken(lease, key, value, now, sent);
	return true;
}

/*
 * A reload changed what this node's record says (its Kafka listener's
 * advertised address, its rack): write it again, under the lease that holds the key.
 * The key is this node's while its lease lives, so a plain put is enough;
 * with the lease gone etcd refuses it, and the next keepalive registers
 * again.
 */
static bool
refresh_record(void)
{
	char	   *value = MqClusterNodeJson(my_broker_id);
	MqEtcdTxn  *txn;

	if (registered_value != NULL && strcmp(value, registered_value) == 0)
		return false;
	txn = MqEtcdTxnBegin();
	MqEtcdTxnPut(txn, MqClusterKey("nodes/%s", mqlog_node_name), value, my_lease);
	MqEtcdTxnPut(txn, MqClusterKey("members/%s", mqlog_node_name), value, 0);
	(void) MqEtcdTxnCommit(txn, NULL);
	if (registered_value)
		pfree(registered_value);
	registered_value = MemoryContextStrdup(TopMemoryContext, value);
	ereport(LOG,
			(errmsg("mqlog cluster: node \"%s\" now advertises Kafka listener \"%s\" in rack \"%s\"",
					mqlog_node_name, MqClusterKafkaListener(), mqlog_node_rack)));
	return true;
}

/* the node's key is under lease now, holding value */
static void
registered(int64 lease, const char *key, const char *value, TimestampTz now, int64 sent)
{
	my_lease = lease;
	if (registered_value)
		pfree(registered_value);
	registered_value = MemoryContextStrdup(TopMemoryContext, value);
	MqClusterSetLease(my_lease, sent + (int64) granted_ttl * 1000000, true);
	next_keepalive = TimestampTzPlusMilliseconds(now, granted_ttl * 1000 / 3);
	last_clash_logged = 0;
	ereport(LOG,
			(errmsg("mqlog cluster: node \"%s\" registered in cluster \"%s\"",
					mqlog_node_name, mqlog_cluster_name),
			 errdetail("etcd key %s, lease " INT64_FORMAT " of %d s.", key, lease,
					   granted_ttl)));
}

/*
 * The name is held: by an earlier run of this server (restarted within its
 * lease), whose key moves to the new lease in one transaction, so that the
 * node never looks gone meanwhile and the elector fails nothing over;
 * or by another node, which keeps this one out until its lease ends.
 */
static void
name_taken(int64 lease, const char *key, const char *value, TimestampTz now, int64 sent)
{
	MqEtcdKv	holder;

	if (!MqEtcdGet(key, &holder, NULL))
	{
		MqEtcdLeaseRevoke(lease);
		next_register = now;	/* it just went: try again at once */
		return;
	}
	if (holder.lease != 0 && is_earlier_self(holder.value))
	{
		MqEtcdTxn  *txn = MqEtcdTxnBegin();

		MqEtcdTxnIfModRevision(txn, key, holder.mod_revision);
		MqEtcdTxnPut(txn, key, value, lease);
		if (MqEtcdTxnCommit(txn, NULL))
		{
			ereport(LOG,
					(errmsg("mqlog cluster: node \"%s\" was still registered by an earlier run of this server; its key moves to the new lease",
							mqlog_node_name)));
			/* what else the old lease held (the elector's key, group claims) goes */
			MqEtcdLeaseRevoke(holder.lease);
			registered(lease, key, value, now, sent);
			return;
		}
		MqEtcdLeaseRevoke(lease);
		next_register = now;
		return;
	}
	MqEtcdLeaseRevoke(lease);
	if (last_clash_logged == 0 ||
		TimestampDifferenceExceeds(last_clash_logged, now, MQ_RETRY_LOG_MS))
	{
		ereport(WARNING,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("mqlog cluster: node name \"%s\" is already taken by another live node; this node stays out of cluster \"%s\"",
						mqlog_node_name, mqlog_cluster_name),
				 errdetail("etcd key %s holds %s.", key, holder.value),
				 errhint("Give every node its own mqlog.node_name.  This node retries every second and registers once the other node's lease ends.")));
		last_clash_logged = now;
	}
}

/*
 * One round: whatever is due of registering, the keepalive and the node
 * list.  True when it asked etcd something (and so etcd answered: a
 * request that fails throws); a round with nothing due says nothing of
 * etcd, and must not end a failure being retried.
 */
static bool
cluster_round(void)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		asked = false;

	if (my_lease == 0)
		asked = try_register(now);
	else if (now >= next_keepalive)
	{
		int64		sent = MqClusterClock();

		asked = true;
		if (MqEtcdLeaseKeepAlive(my_lease))
		{
			/* the lease's own TTL: a reloaded mqlog.etcd_lease_ttl is the next lease's */
			MqClusterSetLease(my_lease, sent + (int64) granted_ttl * 1000000, false);
			MqClusterNoteEtcd(true);
			next_keepalive = TimestampTzPlusMilliseconds(now, granted_ttl * 1000 / 3);
		}
		else
		{
			ereport(LOG,
					(errmsg("mqlog cluster: the lease of node \"%s\" has expired; registering again",
							mqlog_node_name)));
			my_lease = 0;
			MqClusterSetLease(0, 0, false);
			/* etcd answered (after the lapse): others may elect, no failsafe */
			MqClusterNoteEtcd(true);
			next_register = now;
			try_register(now);
		}
	}
	if (now >= next_list)
	{
		List	   *nodes = MqClusterReadNodes();

		asked = true;
		MqClusterPublishNodes(nodes);
		MqClusterNoteEtcd(true);
		last_list_ok = now;
		next_list = TimestampTzPlusMilliseconds(now, 1000);
		/* the elector's round, if this node holds the role */
		MqClusterElectorRound(my_lease, nodes);
		/* groups no longer run here may move to another node */
		MqClusterReleaseGroups(my_lease, MqGroupsWithMembers);
	}
	/* last: the keepalive finds a lost lease, and a put under one fails */
	if (my_lease != 0 && refresh_record())
		asked = true;
	return asked;
}

/*
 * etcd has not answered for longer than a lease: nothing says any node is
 * alive any more, this one included.
 */
static void
forget_liveness(void)
{
	List	   *nodes = MqClusterSharedNodes();
	ListCell   *lc;

	foreach(lc, nodes)
		((MqClusterNode *) lfirst(lc))->alive = false;
	MqClusterPublishNodes(nodes);
}

void
mqlog_cluster_main(Datum main_arg)
{
	MemoryContext cxt;
	MqRetryLog	rl = {0};

	MqWorkerSetupSignals();
	cxt = AllocSetContextCreate(TopMemoryContext, "mqlog cluster", ALLOCSET_DEFAULT_SIZES);
	pgstat_report_appname("mqlog cluster");

	while (!ShutdownRequestPending)
	{
		TimestampTz now;
		long		sleep_ms;

		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			if (cluster_round())
				MqRetryLogSuccess(&rl, "mqlog cluster");
		}
		PG_CATCH();
		{
			ErrorData  *e;

			/* no transaction to clean up after it: an LWLock it held goes here */
			LWLockReleaseAll();
			MemoryContextSwitchTo(cxt);
			e = CopyErrorData();
			FlushErrorState();
			/* what the followers tell their leaders (lease.c's failsafe) */
			if (e->sqlerrcode == ERRCODE_CONNECTION_FAILURE)
				MqClusterNoteEtcd(false);
			MqRetryLogFailure(&rl, "mqlog cluster", e);
			now = GetCurrentTimestamp();
			next_list = TimestampTzPlusMilliseconds(now, 1000);
			if (next_keepalive <= now)
				next_keepalive = TimestampTzPlusMilliseconds(now, 1000);
			if (TimestampDifferenceExceeds(last_list_ok, now, mqlog_etcd_lease_ttl * 1000))
				forget_liveness();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(cxt);

		now = GetCurrentTimestamp();
		sleep_ms = 1000;
		if (my_lease != 0)
			sleep_ms = Min(sleep_ms, (long) ((next_keepalive - now) / 1000));
		sleep_ms = Min(sleep_ms, (long) ((next_list - now) / 1000));
		if (my_lease == 0)
			sleep_ms = Min(sleep_ms, (long) ((next_register - now) / 1000));
		MqWorkerNap(sleep_ms);
	}

	/*
	 * A clean stop: leave the cluster now rather than a TTL later.  etcd.c
	 * aborts every request while a shutdown is pending (so that a stop
	 * never waits for etcd), which would abort this one too: it is let
	 * through, bounded by a second however long mqlog.etcd_timeout is, so
	 * that a silent etcd delays the stop by that much at most.
	 */
	if (my_lease != 0)
	{
		int			saved_timeout = mqlog_etcd_timeout;

		MqClusterSetLease(0, 0, false);
		ShutdownRequestPending = false;
		mqlog_etcd_timeout = Min(mqlog_etcd_timeout, 1000);
		PG_TRY();
		{
			MqEtcdLeaseRevoke(my_lease);
			ereport(LOG,
					(errmsg("mqlog cluster: node \"%s\" left cluster \"%s\": its lease is revoked",
							mqlog_node_name, mqlog_cluster_name)));
		}
		PG_CATCH();
		{
			ErrorData  *e;

			/* the others see it gone a lease later: say why */
			MemoryContextSwitchTo(TopMemoryContext);
			e = CopyErrorData();
			FlushErrorState();
			ereport(LOG,
					(errmsg("mqlog cluster: node \"%s\" could not revoke its lease at shutdown: %s",
							mqlog_node_name, e->message),
					 errdetail("The other nodes see it gone once the lease expires (mqlog.etcd_lease_ttl).")));
		}
		PG_END_TRY();
		mqlog_etcd_timeout = saved_timeout;
	}
	else
		ereport(LOG,
				(errmsg("mqlog cluster: node \"%s\" stops holding no lease in etcd",
						mqlog_node_name)));
	proc_exit(0);
}
