/*-------------------------------------------------------------------------
 *
 * cluster_sync.c
 *		The "mqlog cluster sync" worker: keeps the local copies of the
 *		replicated topics in step with etcd, and, in the same round, starts
 *		the apply workers this node needs (MqApplyEnsureWorkers) and runs
 *		the ISR round of the partitions it leads (isr.c).
 *
 * It runs only when mqlog.etcd_endpoints is set, in a process apart from
 * "mqlog cluster" (cluster_node.c says why).
 *
 * It connects to mqlog.cluster_database and is idle while mqlog is not
 * installed there.  Every second it reads topics/ and partitions/ from
 * etcd, then, one topic per transaction:
 *	- creates locally a topic whose replicas include this node and that is
 *	  not here yet (same name, partitions, replication factor, config);
 *	- refreshes mqlog.replica_state rows whose etcd mod_revision changed;
 *	- drops a local replicated topic whose etcd keys are gone (or now
 *	  belong to another topic of the same name);
 *	- deletes from etcd a topic this node created (same system identifier)
 *	  that is not here and whose creating transaction has ended without
 *	  committing: it failed after the etcd write (cluster/topics.c);
 * and then copies every topic of etcd, held here or not, into
 * mqlog.cluster_partition (cluster/directory.c), for the Kafka listener.
 *
 * The loop follows contrib/pg_prewarm/autoprewarm.c (latch, SIGTERM,
 * SIGHUP, postmaster death); an error in one round, or one topic, is
 * logged (at most once a minute while etcd stays unreachable) and the
 * next round goes on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "base/xact.h"
#include "cluster/etcd.h"
#include "cluster/metadata.h"
#include "log/partition.h"
#include "workers/workers.h"

PGDLLEXPORT void mqlog_cluster_sync_main(Datum main_arg);

/*
 * A topic key without "created_xid" (written by an older build) may take
 * this long to commit here.  Only for those: a guess, wrong for a creating
 * transaction that takes longer (a commit waiting for a synchronous
 * standby, say), whose topic it deleted from etcd under it.
 */
#define CREATE_GRACE_MS			30000

/* a cluster database that does not exist ends it: retried 10 s after */
void
MqClusterSyncWorkerRegister(void)
{
	MqRegisterWorker("mqlog_cluster_sync_main", "mqlog cluster sync", true, 10);
}

/* a topic in etcd, with its partitions (NULL where a key is missing) */
typedef struct EtcdTopic
{
	MqTopicMeta *meta;
	MqPartitionMeta **parts;
	int			nfound;
	bool		mine;			/* a replica of some partition is this node */
} EtcdTopic;

/* a local topic, with what mqlog.replicated_topic says of it */
typedef struct LocalTopic
{
	int			topic_id;
	char	   *name;
	char	   *uuid;			/* NULL: not replicated */
	int64		mod_revision;
	List	   *part_revs;		/* int64 per partition, from replica_state */
	int			nparts;
} LocalTopic;

static MqRetryLog sync_rl;
static MqRetryLog unit_rl;

static bool
extension_installed(void)
{
	bool		found;

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT 1 FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'mqlog'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog cluster sync: extension lookup failed");
	found = SPI_processed == 1;
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return found;
}

static EtcdTopic *
find_etcd_topic(List *topics, const char *name)
{
	ListCell   *lc;

	foreach(lc, topics)
		if (strcmp(((EtcdTopic *) lfirst(lc))->meta->name, name) == 0)
			return lfirst(lc);
	return NULL;
}

/*
 * topics/ and partitions/ from etcd, each topic with its partitions;
 * *revision: etcd's revision at the first read
 */
static List *
read_etcd_topics(int64 *revision)
{
	char	   *tprefix = MqClusterKey("topics/");
	char	   *pprefix = MqClusterKey("partitions/");
	List	   *topics = NIL;
	List	   *pkvs;
	ListCell   *lc;

	/* partitions after topics: a topic's partitions are written with or after it */
	foreach(lc, MqEtcdRange(tprefix, revision))
	{
		MqEtcdKv   *kv = lfirst(lc);
		EtcdTopic  *et = palloc0(sizeof(EtcdTopic));

		et->meta = MqTopicMetaParse(kv->value, kv->mod_revision);
		if (strcmp(et->meta->name, kv->key + strlen(tprefix)) != 0)
			continue;			/* not a value of ours */
		et->parts = palloc0(sizeof(MqPartitionMeta *) * et->meta->partitions);
		topics = lappend(topics, et);
	}
	pkvs = MqEtcdRange(pprefix, NULL);
	foreach(lc, pkvs)
	{
		MqEtcdKv   *kv = lfirst(lc);
		char	   *rest = pstrdup(kv->key + strlen(pprefix));
		char	   *slash = strrchr(rest, '/');
		EtcdTopic  *et;
		int			p;

		if (slash == NULL)
			continue;
		*slash = '\0';
		et = find_etcd_topic(topics, rest);
		p = atoi(slash + 1);
		if (et == NULL || p < 0 || p >= et->meta->partitions || et->parts[p] != NULL)
			continue;
		et->parts[p] = MqPartitionMetaParse(kv->value, p, kv->mod_revision);
		et->nfound++;
		if (MqPartitionHasReplica(et->parts[p], mqlog_node_name))
			et->mine = true;
	}
	return topics;
}

static List *
read_local_topics(void)
{
	MemoryContext outer = CurrentMemoryContext;
	List	   *result = NIL;

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute("SELECT t.topic_id, t.name, r.uuid, r.mod_revision, "
					"  (SELECT pg_catalog.array_agg(s.mod_revision ORDER BY s.\"partition\") "
					"     FROM mqlog.replica_state s WHERE s.topic_id OPERATOR(pg_catalog.=) t.topic_id), "
					"  (SELECT pg_catalog.array_agg(s.\"partition\" ORDER BY s.\"partition\") "
					"     FROM mqlog.replica_state s WHERE s.topic_id OPERATOR(pg_catalog.=) t.topic_id), "
					"  t.partitions "
					"FROM mqlog.topic t LEFT JOIN mqlog.replicated_topic r "
					"  ON r.topic_id OPERATOR(pg_catalog.=) t.topic_id",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog cluster sync: could not read the local topics");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(outer);
		LocalTopic *lt = palloc0(sizeof(LocalTopic));
		bool		isnull;
		char	   *uuid;

		lt->topic_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		lt->name = pstrdup(SPI_getvalue(tup, desc, 2));
		uuid = SPI_getvalue(tup, desc, 3);
		lt->uuid = uuid ? pstrdup(uuid) : NULL;
		if (lt->uuid)
			lt->mod_revision = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		lt->nparts = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
		{
			Datum		revs = SPI_getbinval(tup, desc, 5, &isnull);

			if (!isnull)
			{
				Datum		parts = SPI_getbinval(tup, desc, 6, &isnull);
				Datum	   *rv;
				Datum	   *pv;
				int			nr;
				int			np;

				deconstruct_array(DatumGetArrayTypeP(revs), INT8OID, 8, FLOAT8PASSBYVAL,
								  TYPALIGN_DOUBLE, &rv, NULL, &nr);
				deconstruct_array(DatumGetArrayTypeP(parts), INT4OID, 4, true,
								  TYPALIGN_INT, &pv, NULL, &np);
				/* part_revs[p] = mod_revision of partition p, -1 where there is no row */
				for (int p = 0; p < lt->nparts; p++)
				{
					int64	   *r = palloc(sizeof(int64));

					*r = -1;
					for (int k = 0; k < np; k++)
						if (DatumGetInt32(pv[k]) == p)
							*r = DatumGetInt64(rv[k]);
					lt->part_revs = lappend(lt->part_revs, r);
				}
			}
		}
		result = lappend(result, lt);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return result;
}

static LocalTopic *
find_local_topic(List *topics, const char *name)
{
	ListCell   *lc;

	foreach(lc, topics)
		if (strcmp(((LocalTopic *) lfirst(lc))->name, name) == 0)
			return lfirst(lc);
	return NULL;
}

static List *
all_parts(EtcdTopic *et)
{
	List	   *l = NIL;

	for (int p = 0; p < et->meta->partitions; p++)
		l = lappend(l, et->parts[p]);
	return l;
}

/* create a topic of the cluster here, with its replica rows */
static void
create_local(EtcdTopic *et)
{
	Oid			types[5] = {TEXTOID, INT4OID, INT4OID, JSONBOID, OIDOID};
	Datum		values[5];
	Oid			t1[1] = {TEXTOID};
	bool		isnull;
	int			topic_id;

	values[0] = CStringGetTextDatum(et->meta->name);
	values[1] = Int32GetDatum(et->meta->partitions);
	values[2] = Int32GetDatum(et->meta->replication_factor);
	values[3] = DirectFunctionCall1(jsonb_in, CStringGetDatum(et->meta->config));
	values[4] = ObjectIdGetDatum(MqExtensionOwner());
	if (SPI_execute_with_args("SELECT mqlog._create_topic($1, $2, $3, $4, $5)",
							  5, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog cluster sync: mqlog._create_topic failed");
	if (SPI_execute_with_args("SELECT t.topic_id FROM mqlog.topic t WHERE t.name OPERATOR(pg_catalog.=) $1",
							  1, t1, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog cluster sync: topic \"%s\" just created is not in the catalog",
			 et->meta->name);
	topic_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MqClusterStoreLocal(topic_id, et->meta, all_parts(et));
	ereport(LOG,
			(errmsg("mqlog cluster sync: created replicated topic \"%s\" (%d partitions, replication factor %d) from cluster \"%s\"",
					et->meta->name, et->meta->partitions, et->meta->replication_factor,
					mqlog_cluster_name)));
}

/* partitions added on another node: here too, with their replicas */
static void
add_local(EtcdTopic *et, LocalTopic *lt)
{
	Oid			types[2] = {TEXTOID, INT4OID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(et->meta->name);
	values[1] = Int32GetDatum(et->meta->partitions);
	if (SPI_execute_with_args("SELECT mqlog._add_partitions($1, $2)",
							  2, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog cluster sync: mqlog._add_partitions failed");
	MqClusterStoreLocal(lt->topic_id, et->meta, all_parts(et));
	ereport(LOG,
			(errmsg("mqlog cluster sync: topic \"%s\" grew from %d to %d partitions in cluster \"%s\"",
					et->meta->name, lt->nparts, et->meta->partitions, mqlog_cluster_name)));
}

static void
drop_local(LocalTopic *lt)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	/*
	 * The name as it was when the round read it: the topic may have been
	 * dropped here since, and the name taken by another (its uuid is not
	 * lt's).  The row lock keeps it so until the drop.
	 */
	{
		Oid			t2[2] = {INT4OID, TEXTOID};
		Datum		v2[2] = {Int32GetDatum(lt->topic_id), CStringGetTextDatum(lt->uuid)};

		if (SPI_execute_with_args("SELECT 1 FROM mqlog.replicated_topic"
								  " WHERE topic_id OPERATOR(pg_catalog.=) $1"
								  "   AND uuid OPERATOR(pg_catalog.=) $2 FOR UPDATE",
								  2, t2, v2, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog cluster sync: reading topic \"%s\" failed", lt->name);
		if (SPI_processed == 0)
			return;
	}
	MqAnnounceDdl(lt->topic_id);
	values[0] = CStringGetTextDatum(lt->name);
	if (SPI_execute_with_args("SELECT mqlog._drop_topic($1)", 1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog cluster sync: mqlog._drop_topic failed");
	ereport(LOG,
			(errmsg("mqlog cluster sync: dropped replicated topic \"%s\": it is no longer in cluster \"%s\"",
					lt->name, mqlog_cluster_name)));
}

/* delete from etcd a topic whose creation here never committed */
static void
delete_orphan(EtcdTopic *et)
{
	MqEtcdTxn  *txn = MqEtcdTxnBegin();
	char	   *key = MqClusterKey("topics/%s", et->meta->name);

	MqEtcdTxnIfModRevision(txn, key, et->meta->mod_revision);
	MqEtcdTxnDelete(txn, key, false);
	MqEtcdTxnDelete(txn, MqClusterKey("partitions/%s/", et->meta->name), true);
	if (MqEtcdTxnCommit(txn, NULL))
		ereport(LOG,
				(errmsg("mqlog cluster sync: deleted topic \"%s\" from etcd: its creation on this node did not commit",
						et->meta->name)));
}

typedef enum UnitKind
{
	UNIT_CREATE,
	UNIT_REFRESH,
	UNIT_DROP,
	UNIT_ORPHAN,
	UNIT_ADD					/* partitions another node added */
} UnitKind;

typedef struct Unit
{
	UnitKind	kind;
	EtcdTopic  *et;
	LocalTopic *lt;
	List	   *changed;
} Unit;

static void
unit_work(void *arg)
{
	Unit	   *u = arg;

	switch (u->kind)
	{
		case UNIT_CREATE:
			create_local(u->et);
			break;
		case UNIT_REFRESH:
			MqClusterStoreLocal(u->lt->topic_id,
								u->et->meta->mod_revision != u->lt->mod_revision ? u->et->meta : NULL,
								u->changed);
			break;
		case UNIT_DROP:
			drop_local(u->lt);
			break;
		case UNIT_ORPHAN:
			delete_orphan(u->et);
			break;
		case UNIT_ADD:
			add_local(u->et, u->lt);
			break;
	}
}

/*
 * A refresh of this round failed: the local copy of who leads what may be
 * older than etcd, so the round does not count as a read (lease.c).  The
 * other units leave no partition led here that etcd says another leads.
 */
static bool unit_failed;

/*
 * One topic's work in a transaction of its own: an error (a lock, a name
 * clash) is logged and the other topics go on.
 */
static void
run_unit(UnitKind kind, EtcdTopic *et, LocalTopic *lt, List *changed)
{
	Unit		u = {kind, et, lt, changed};
	ErrorData  *e;

	if (!MqRunInTransaction(unit_work, &u, &e))
	{
		if (kind == UNIT_REFRESH)
			unit_failed = true;
		MqRetryLogFailure(&unit_rl, psprintf("mqlog cluster sync: topic \"%s\"",
											 et ? et->meta->name : lt->name), e);
	}
}

/* did this server (same name, same system identifier) write the topic? */
static bool
created_by_this_server(EtcdTopic *et)
{
	char		mine[32];

	snprintf(mine, sizeof(mine), UINT64_FORMAT, GetSystemIdentifier());
	return et->meta->created_by != NULL && strcmp(et->meta->created_by, mqlog_node_name) == 0 &&
		et->meta->created_sysid != NULL && strcmp(et->meta->created_sysid, mine) == 0;
}

/* an older build's topic key, without the creating transaction: by its age */
static bool
created_long_ago(EtcdTopic *et, TimestampTz now)
{
	TimestampTz at;

	if (et->meta->created_at == NULL)
		return true;
	at = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
												 CStringGetDatum(et->meta->created_at),
												 ObjectIdGetDatum(InvalidOid),
												 Int32GetDatum(-1)));
	return TimestampDifferenceExceeds(at, now, CREATE_GRACE_MS);
}

/*
 * Has the transaction that created et here (created_by_this_server) ended
 * without committing?  Then its topic is an orphan.  From the transaction's
 * fate, not the time since: a creation may take any time to commit after
 * its etcd write (XACT_EVENT_PRE_COMMIT: a synchronous standby to wait
 * for, a lock at commit), and is not an orphan while it runs.
 *
 * The id is the full 64-bit one, so that a 32-bit id of a later epoch
 * never stands for it.  It is below the next id: it was assigned before
 * the etcd write, and the creating transaction's records were flushed
 * before it too (write_create), so recovery never hands it out again.
 * Where it is not, this server's history was rewound (a backup restored,
 * pg_resetwal) and says nothing of it.  That, and an id 2^31 or more
 * behind the next one or below the oldest the clog still holds (ended
 * long ago), leave the topic alone: deleting it might take a topic the
 * cluster holds from every node, and a stray key is for mq_drop_topic.
 * Not in progress and not committed is aborted, or ended by a crash
 * (TransactionIdDidAbort is false then).
 */
static bool
creation_failed(EtcdTopic *et, TimestampTz now)
{
	const char *text = et->meta->created_xid;
	char	   *end;
	uint64		value;
	FullTransactionId fxid;
	FullTransactionId next;
	TransactionId xid;
	bool		failed;

	if (text == NULL)
		return created_long_ago(et, now);
	errno = 0;
	value = strtou64(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0')
		return created_long_ago(et, now);
	fxid = FullTransactionIdFromU64(value);
	xid = XidFromFullTransactionId(fxid);
	if (!TransactionIdIsNormal(xid))
		return created_long_ago(et, now);
	next = ReadNextFullTransactionId();
	if (!FullTransactionIdPrecedes(fxid, next) ||
		U64FromFullTransactionId(next) - value >= (UINT64CONST(1) << 31))
		return false;			/* a rewound history, or too old to tell */
	if (TransactionIdIsInProgress(xid))
		return false;
	/* ended: its clog entry is final, unless truncated away (under us) */
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	failed = !TransactionIdPrecedes(xid, ShmemVariableCache->oldestClogXid) &&
		!TransactionIdDidCommit(xid);
	LWLockRelease(XactTruncationLock);
	return failed;
}

/*
 * An apply worker (workers/apply.c) for every leader this node follows a
 * partition of, and for every other live node, whose stream also carries
 * its groups' committed offsets; a worker ends when its node leaves the
 * cluster.
 */
static void
ensure_apply_workers(void)
{
	List	   *leaders = NIL;

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(mqlog_node_name)};

		if (SPI_execute_with_args("SELECT DISTINCT r.leader FROM mqlog.replica_state r"
								  " WHERE $1 OPERATOR(pg_catalog.=) ANY (r.replicas)"
								  "   AND r.leader OPERATOR(pg_catalog.<>) $1",
								  1, types, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog: reading the leaders this node follows failed");
	}
	for (uint64 i = 0; i < SPI_processed; i++)
		leaders = lappend(leaders, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	/* and every other live node, for its groups' committed offsets */
	{
		ListCell   *lc;

		foreach(lc, MqClusterSharedNodes())
		{
			MqClusterNode *n = lfirst(lc);

			if (n->alive && !n->is_self && !MqClusterNameListed(leaders, n->name))
				leaders = lappend(leaders, pstrdup(n->name));
		}
	}
	if (leaders != NIL)
		MqApplyEnsureWorkers(leaders);
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
}

/*
 * Every whole topic of etcd into mqlog.cluster_partition (cluster/
 * directory.c), the ones this node holds no replica of too, so that its
 * Kafka Metadata names their leaders; in a transaction of its own, after
 * the local topics' units, so that a failure here stops none of them.
 */
static void
directory_work(void *arg)
{
	List	   *whole = NIL;
	List	   *partial = NIL;
	ListCell   *lc;

	foreach(lc, (List *) arg)
	{
		EtcdTopic  *et = lfirst(lc);
		MqClusterTopic *t;

		if (et->nfound < et->meta->partitions)
		{
			/* still being written: its old rows, if any, stay */
			partial = lappend(partial, et->meta->name);
			continue;
		}
		t = palloc0(sizeof(MqClusterTopic));
		t->meta = et->meta;
		t->parts = all_parts(et);
		whole = lappend(whole, t);
	}
	MqClusterDirectoryStore(whole, partial);
}

static void
store_directory(List *etcd_topics)
{
	ErrorData  *e;

	if (!MqRunInTransaction(directory_work, etcd_topics, &e))
		MqRetryLogFailure(&unit_rl, "mqlog cluster sync: the cluster's topics", e);
}

static void
sync_round(void)
{
	List	   *etcd_topics;
	List	   *local_before;
	List	   *local_topics;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	int64		read_from;
	int64		revision = 0;

	if (!extension_installed())
		return;
	/* local state only: followers keep following while etcd is away */
	ensure_apply_workers();
	MqCheckpointHighWatermarks();
	/*
	 * A topic is in etcd before it commits locally anywhere.  So the local
	 * topics a drop is decided from are read before etcd (one committed
	 * then is in what etcd says next, unless it was dropped there), and
	 * those the rest is decided from after it (one in etcd but not in them
	 * has not committed here yet).  With the second read alone, a topic
	 * created here between the two reads looked dropped from etcd, and
	 * was dropped here 130 ms after its creation (168, under load).
	 */
	unit_failed = false;
	read_from = MqClusterClock();
	local_before = read_local_topics();
	etcd_topics = read_etcd_topics(&revision);
	local_topics = read_local_topics();

	foreach(lc, etcd_topics)
	{
		EtcdTopic  *et = lfirst(lc);
		LocalTopic *lt = find_local_topic(local_topics, et->meta->name);

		if (et->nfound < et->meta->partitions)
			continue;			/* still being written */
		if (lt == NULL)
		{
			if (!et->mine)
				continue;
			/*
			 * Written by this server but not here: its transaction is
			 * committing (or committed after the local read, or was
			 * dropped since), or failed after the etcd write: only then
			 * is it deleted.  (A server rebuilt under the same name has
			 * another system identifier and takes its replicas like any
			 * node.)
			 */
			if (created_by_this_server(et))
			{
				if (creation_failed(et, now))
					run_unit(UNIT_ORPHAN, et, NULL, NIL);
				continue;
			}
			run_unit(UNIT_CREATE, et, NULL, NIL);
			continue;
		}
		if (lt->uuid == NULL || strcmp(lt->uuid, et->meta->uuid) != 0)
			continue;			/* a local topic of that name; see the drop below */
		if (lt->nparts < et->meta->partitions)
		{
			run_unit(UNIT_ADD, et, lt, NIL);
			continue;
		}
		{
			List	   *changed = NIL;

			for (int p = 0; p < et->meta->partitions; p++)
			{
				int64		rev = p < list_length(lt->part_revs) ?
					*(int64 *) list_nth(lt->part_revs, p) : -1;

				if (rev != et->parts[p]->mod_revision)
					changed = lappend(changed, et->parts[p]);
			}
			if (changed != NIL || lt->mod_revision != et->meta->mod_revision)
				run_unit(UNIT_REFRESH, et, lt, changed);
		}
	}

	foreach(lc, local_before)
	{
		LocalTopic *lt = lfirst(lc);
		EtcdTopic  *et;

		if (lt->uuid == NULL)
			continue;			/* a single-node topic */
		et = find_etcd_topic(etcd_topics, lt->name);
		if (et == NULL || strcmp(et->meta->uuid, lt->uuid) != 0)
			run_unit(UNIT_DROP, NULL, lt, NIL);
	}
	/*
	 * The local copy is as fresh as etcd was when this round began (now,
	 * taken before its reads): this node may lead what it says, if it
	 * registered before then.
	 */
	if (!unit_failed)
	{
		MqClusterNoteSynced(read_from);
		MqClusterNoteRevision(revision);
	}
	store_directory(etcd_topics);
	MqIsrRound();
}

void
mqlog_cluster_sync_main(Datum main_arg)
{
	MemoryContext cxt;

	MqWorkerSetupSignals();
	BackgroundWorkerInitializeConnection(mqlog_cluster_database, NULL, 0);
	MqWorkerPinSearchPath();
	pgstat_report_appname("mqlog cluster sync");
	cxt = AllocSetContextCreate(TopMemoryContext, "mqlog cluster sync", ALLOCSET_DEFAULT_SIZES);
	/* every other node has a slot here, which keeps WAL while that node is away */
	if (max_slot_wal_keep_size_mb < 0)
		ereport(WARNING,
				(errmsg("mqlog: max_slot_wal_keep_size is unlimited, so a cluster node that stays away keeps WAL here without bound"),
				 errhint("Set max_slot_wal_keep_size: a node away longer catches up by copy.")));

	while (!ShutdownRequestPending)
	{
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			pgstat_report_activity(STATE_RUNNING, "mqlog cluster sync");
			sync_round();
			MqRetryLogSuccess(&sync_rl, "mqlog cluster sync");
		}
		PG_CATCH();
		{
			ErrorData  *e;

			MemoryContextSwitchTo(cxt);
			e = CopyErrorData();
			FlushErrorState();
			AbortCurrentTransaction();
			MemoryContextSwitchTo(cxt);
			MqRetryLogFailure(&sync_rl, "mqlog cluster sync", e);
		}
		PG_END_TRY();
		pgstat_report_activity(STATE_IDLE, NULL);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(cxt);
		MqWorkerNap(1000);
	}
	proc_exit(0);
}
