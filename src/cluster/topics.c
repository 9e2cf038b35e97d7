/*-------------------------------------------------------------------------
 *
 * topics.c
 *		Replicated topics in etcd: placement of a topic's replicas, the
 *		JSON of topics/<topic> and partitions/<topic>/<p>, their local copy
 *		(mqlog.replicated_topic, mqlog.replica_state), and writing etcd when
 *		the creating or dropping transaction commits.
 *
 * mq_create_topic with a replication factor above 1 checks everything it
 * can at once (a fresh read of the live nodes, the topic name not taken in
 * etcd), creates the topic locally and queues the etcd write; the write
 * happens at XACT_EVENT_PRE_COMMIT, as one etcd transaction that succeeds
 * only if none of the keys exists.  A rolled-back transaction thus never
 * reaches etcd, and a failed etcd write (etcd down, a concurrent creation
 * of the same name) aborts the commit.  What is left is a commit that
 * fails after the etcd write (a later error at commit, a crash); the topic
 * key names the creating transaction ("created_xid"), and the sync worker
 * of the creating node deletes the topic from etcd once that transaction
 * has ended without committing (workers/cluster_sync.c).
 * mq_drop_topic of a replicated topic deletes its keys the same way, also
 * on a node that holds no replica of it (MqClusterDropTopicByUuid).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "port.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "cluster/etcd.h"
#include "cluster/json.h"
#include "cluster/metadata.h"

/* an etcd write waiting for its transaction to commit */
typedef enum PendingKind
{
	OP_DROP = 0,
	OP_CREATE,
	OP_ADD,						/* partitions added to an existing topic */
	OP_ALTER					/* its config changed */
} PendingKind;

typedef struct PendingOp
{
	bool		create;			/* OP_CREATE; else see kind */
	PendingKind kind;
	SubTransactionId subid;
	char	   *topic;
	char	   *uuid;
	char	   *topic_value;	/* create, add: the topic key's value */
	List	   *part_values;	/* create, add: one value per new partition */
	int			first;			/* add: the first new partition */
	int64		topic_rev;		/* add, alter: the topic key's mod_revision read */
} PendingOp;

static List *pending = NIL;		/* in TopTransactionContext */

/* ------------------------------------------------------------------------
 * Placement and JSON
 * ------------------------------------------------------------------------ */

/*
 * Replicas of partitions first .. first + count - 1 over nodes (names, in
 * a stable order): partition p gets nodes[(p + i) mod n] for i below the
 * replication factor, the first of them as leader, so leaders are spread
 * evenly (6 partitions on 3 nodes: 2 leaders each).  Every replica starts
 * in sync, at epoch 0.
 */
List *
MqClusterPlace(List *nodes, int first, int count, int replication_factor)
{
	int			n = list_length(nodes);
	List	   *result = NIL;

	Assert(n >= replication_factor && replication_factor > 0);
	for (int p = first; p < first + count; p++)
	{
		MqPartitionMeta *m = palloc0(sizeof(MqPartitionMeta));

		m->partition = p;
		for (int i = 0; i < replication_factor; i++)
			m->replicas = lappend(m->replicas, pstrdup(list_nth(nodes, (p + i) % n)));
		m->leader = pstrdup(linitial(m->replicas));
		m->leader_epoch = 0;
		m->isr = list_copy(m->replicas);
		result = lappend(result, m);
	}
	return result;
}

/* a list of node names as a JSON array */
void
MqClusterAppendNames(StringInfo buf, List *names)
{
	ListCell   *lc;

	appendStringInfoChar(buf, '[');
	foreach(lc, names)
	{
		if (foreach_current_index(lc) > 0)
			appendStringInfoChar(buf, ',');
		escape_json(buf, lfirst(lc));
	}
	appendStringInfoChar(buf, ']');
}

char *
MqTopicMetaJson(const MqTopicMeta *t)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	MqJsonAppendField(&buf, true, "name", t->name);
	appendStringInfo(&buf, ",\"partitions\":%d,\"replication_factor\":%d,\"config\":%s",
					 t->partitions, t->replication_factor, t->config);
	MqJsonAppendField(&buf, false, "created_by", t->created_by);
	MqJsonAppendField(&buf, false, "created_sysid", t->created_sysid);
	MqJsonAppendField(&buf, false, "created_at", t->created_at);
	MqJsonAppendField(&buf, false, "created_xid", t->created_xid);
	MqJsonAppendField(&buf, false, "uuid", t->uuid);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

char *
MqPartitionMetaJson(const MqPartitionMeta *p)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"replicas\":");
	MqClusterAppendNames(&buf, p->replicas);
	appendStringInfoChar(&buf, ',');
	MqJsonAppendField(&buf, true, "leader", p->leader);
	appendStringInfo(&buf, ",\"leader_epoch\":%d,\"isr\":", p->leader_epoch);
	MqClusterAppendNames(&buf, p->isr);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

MqTopicMeta *
MqTopicMetaParse(const char *json, int64 mod_revision)
{
	JsonbContainer *c = MqJsonParse(json);
	MqTopicMeta *t = palloc0(sizeof(MqTopicMeta));

	t->name = MqJsonString(c, "name");
	t->partitions = (int) MqJsonInt64(c, "partitions");
	t->replication_factor = (int) MqJsonInt64(c, "replication_factor");
	t->config = MqJsonText(c, "config");
	t->created_by = MqJsonString(c, "created_by");
	t->created_sysid = MqJsonString(c, "created_sysid");
	t->created_at = MqJsonString(c, "created_at");
	t->created_xid = MqJsonString(c, "created_xid");
	t->uuid = MqJsonString(c, "uuid");
	t->mod_revision = mod_revision;
	if (t->name == NULL || t->uuid == NULL || t->partitions < 1 || t->replication_factor < 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("topic metadata in etcd is incomplete"),
				 errdetail("The value is: %s", json)));
	if (t->config == NULL)
		t->config = pstrdup("{}");
	return t;
}

MqPartitionMeta *
MqPartitionMetaParse(const char *json, int partition, int64 mod_revision)
{
	JsonbContainer *c = MqJsonParse(json);
	MqPartitionMeta *p = palloc0(sizeof(MqPartitionMeta));

	p->partition = partition;
	p->replicas = MqJsonStringArray(c, "replicas");
	p->leader = MqJsonString(c, "leader");
	p->leader_epoch = (int) MqJsonInt64(c, "leader_epoch");
	p->isr = MqJsonStringArray(c, "isr");
	p->mod_revision = mod_revision;
	if (p->replicas == NIL || p->leader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partition metadata in etcd is incomplete"),
				 errdetail("The value is: %s", json)));
	return p;
}

bool
MqPartitionHasReplica(const MqPartitionMeta *p, const char *node)
{
	return MqClusterNameListed(p->replicas, node);
}

/* a list of node names as text, "{a,b}" (as an array prints), for messages */
char *
MqClusterNamesText(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, names)
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) ? "," : "", (char *) lfirst(lc));
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* is name in a list of node names (char *)? */
bool
MqClusterNameListed(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp(lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * A new topic's identity: a random uuid, this node, now, and the creating
 * (top-level) transaction, whose fate tells this node's sync worker
 * whether a topic it finds in etcd but not here is still committing or
 * never will (workers/cluster_sync.c).  The caller has created the topic
 * locally, so the transaction has its id already.
 */
void
MqClusterTopicMetaNew(MqTopicMeta *t)
{
	uint8		u[16];

	if (!pg_strong_random(u, sizeof(u)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random topic uuid")));
	u[6] = (u[6] & 0x0f) | 0x40;	/* version 4 */
	u[8] = (u[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
	t->uuid = psprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
					   u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7],
					   u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	t->created_by = pstrdup(mqlog_node_name);
	t->created_sysid = psprintf(UINT64_FORMAT, GetSystemIdentifier());
	t->created_at = pstrdup(timestamptz_to_str(GetCurrentTimestamp()));
	t->created_xid = psprintf(UINT64_FORMAT, U64FromFullTransactionId(GetTopFullTransactionId()));
	t->mod_revision = 0;
}

/* ------------------------------------------------------------------------
 * The local copy
 * ------------------------------------------------------------------------ */

static Datum
name_array(List *names)
{
	int			n = list_length(names);
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	ListCell   *lc;

	foreach(lc, names)
		elems[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Record in the local catalog that topic_id is replicated (with t, its
 * identity and the config the cluster gives it), and the replicas of the
 * given partitions (MqPartitionMeta *): inserted, or updated when there.  The caller is connected to SPI with search_path
 * pinned, as a role that may write mqlog's catalog.
 */
void
MqClusterStoreLocal(int topic_id, const MqTopicMeta *t, List *parts)
{
	ListCell   *lc;
	bool		announce = false;

	if (t != NULL)
	{
		Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, INT8OID};
		Datum		values[4];

		values[0] = Int32GetDatum(topic_id);
		values[1] = CStringGetTextDatum(t->uuid);
		values[2] = CStringGetTextDatum(t->created_by ? t->created_by : "");
		values[3] = Int64GetDatum(t->mod_revision);
		if (SPI_execute_with_args("INSERT INTO mqlog.replicated_topic (topic_id, uuid, created_by, mod_revision) "
								  "VALUES ($1, $2, $3, $4) ON CONFLICT (topic_id) DO UPDATE "
								  "SET uuid = excluded.uuid, created_by = excluded.created_by, "
								  "mod_revision = excluded.mod_revision",
								  4, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "mqlog: could not record replicated topic %d", topic_id);

		/* the config is the cluster's: another node's mq_alter_topic lands here */
		types[1] = JSONBOID;
		values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(t->config));
		if (SPI_execute_with_args("UPDATE mqlog.topic t SET config = $2 "
								  "WHERE t.topic_id OPERATOR(pg_catalog.=) $1 "
								  "AND t.config OPERATOR(pg_catalog.<>) $2",
								  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "mqlog: could not update the config of replicated topic %d", topic_id);
		if (SPI_processed > 0)
		{
			ereport(LOG,
					(errmsg("mqlog: topic \"%s\" takes its config from cluster \"%s\": %s",
							t->name, mqlog_cluster_name, t->config)));
			announce = true;
		}
	}
	foreach(lc, parts)
	{
		MqPartitionMeta *p = lfirst(lc);
		Oid			types[7] = {INT4OID, INT4OID, TEXTARRAYOID, TEXTOID, INT4OID, TEXTARRAYOID, INT8OID};
		Datum		values[7];

		values[0] = Int32GetDatum(topic_id);
		values[1] = Int32GetDatum(p->partition);
		values[2] = name_array(p->replicas);
		values[3] = CStringGetTextDatum(p->leader);
		values[4] = Int32GetDatum(p->leader_epoch);
		values[5] = name_array(p->isr);
		values[6] = Int64GetDatum(p->mod_revision);
		if (SPI_execute_with_args("INSERT INTO mqlog.replica_state "
								  "(topic_id, \"partition\", replicas, leader, leader_epoch, isr, mod_revision) "
								  "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (topic_id, \"partition\") DO UPDATE "
								  "SET replicas = excluded.replicas, leader = excluded.leader, "
								  "leader_epoch = excluded.leader_epoch, isr = excluded.isr, "
								  "mod_revision = excluded.mod_revision",
								  7, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "mqlog: could not record the replicas of topic %d partition %d",
				 topic_id, p->partition);
	}
	/* topic caches hold the config, leaders and in-sync replicas: reload them */
	if ((parts != NIL || announce) &&
		SPI_execute("SELECT mqlog._catalog_changed()", false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not announce the new replicas of topic %d", topic_id);
}

/* ------------------------------------------------------------------------
 * Creating and dropping replicated topics (called by sql/topic_admin.c)
 * ------------------------------------------------------------------------ */

/*
 * Before anything is created: a replication factor above 1 needs a
 * cluster, and the cluster's topics live in one database of each node.
 */
void
MqClusterCheckReplicationFactor(int replication_factor)
{
	char	   *db;

	if (replication_factor <= 1)
		return;
	if (replication_factor > MQ_MAX_REPLICATION_FACTOR)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("replication factor %d is larger than %d, the most mqlog supports",
						replication_factor, MQ_MAX_REPLICATION_FACTOR),
				 errdetail("A leader keeps the progress of at most %d followers per partition in shared memory.",
						   MQ_MAX_REPLICATION_FACTOR - 1)));
	if (!MqClusterEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("replication factor %d needs a cluster of nodes", replication_factor),
				 errdetail("This server runs as a single node: mqlog.etcd_endpoints is not set."),
				 errhint("Set mqlog.etcd_endpoints, mqlog.node_name and mqlog.node_conninfo on every node and restart them, or use replication factor 1.")));
	db = get_database_name(MyDatabaseId);
	if (strcmp(db, mqlog_cluster_database) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("replicated topics can be created only in database \"%s\"", mqlog_cluster_database),
				 errdetail("This is database \"%s\"; mqlog.cluster_database names the one database of each node that holds the replicated topics.", db),
				 errhint("Connect to database \"%s\", or use replication factor 1 here.", mqlog_cluster_database)));
}

static void
queue_op(PendingOp *op)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	PendingOp  *copy = palloc0(sizeof(PendingOp));
	ListCell   *lc;

	copy->create = op->create;
	copy->kind = op->create ? OP_CREATE : op->kind;
	copy->first = op->first;
	copy->topic_rev = op->topic_rev;
	copy->subid = GetCurrentSubTransactionId();
	copy->topic = pstrdup(op->topic);
	copy->uuid = pstrdup(op->uuid);
	copy->topic_value = op->topic_value ? pstrdup(op->topic_value) : NULL;
	foreach(lc, op->part_values)
		copy->part_values = lappend(copy->part_values, pstrdup(lfirst(lc)));
	pending = lappend(pending, copy);
	MemoryContextSwitchTo(old);
}

/*
 * A local topic's catalog row, into t (name, partitions, factor, config);
 * returns its topic id.
 */
static int
read_topic_row(const char *name, MqTopicMeta *t)
{
	MqSpi		spi;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	int			topic_id;
	MemoryContext outer = CurrentMemoryContext;

	MqSpiBegin(&spi, true);
	values[0] = CStringGetTextDatum(name);
	if (SPI_execute_with_args("SELECT t.topic_id, t.partitions, t.replication_factor, t.config::pg_catalog.text "
							  "FROM mqlog.topic t WHERE t.name OPERATOR(pg_catalog.=) $1",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog: topic \"%s\" is not in the catalog", name);
	topic_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	t->name = MemoryContextStrdup(outer, name);
	t->partitions = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	t->replication_factor = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	t->config = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4));
	MqSpiEnd(&spi);
	return topic_id;
}

/*
 * The names of the live nodes, read from etcd now (never the cached
 * list); refused when fewer than replication_factor.
 */
static List *
live_nodes(int replication_factor)
{
	List	   *live = NIL;
	StringInfoData names;
	ListCell   *lc;

	initStringInfo(&names);
	foreach(lc, MqClusterReadNodes())
	{
		MqClusterNode *n = lfirst(lc);

		if (!n->alive)
			continue;
		live = lappend(live, pstrdup(n->name));
		appendStringInfo(&names, "%s\"%s\"", names.len ? ", " : "", n->name);
	}
	if (list_length(live) < replication_factor)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("replication factor %d is larger than the number of live nodes", replication_factor),
				 errdetail("Cluster \"%s\" has %d live node%s%s%s.", mqlog_cluster_name,
						   list_length(live), list_length(live) == 1 ? "" : "s",
						   names.len ? ": " : "", names.data),
				 errhint("Start more nodes, or use a smaller replication factor.")));
	return live;
}

/*
 * The etcd half of mq_create_topic for a topic just created locally with
 * a replication factor above 1: place its replicas on the live nodes (a
 * fresh read of etcd, never the cached list), record them locally, and
 * queue the etcd write for commit.
 */
void
MqClusterCreateTopic(const char *name)
{
	MqSpi		spi;
	int			topic_id;
	MqTopicMeta t = {0};
	List	   *live;
	List	   *parts;
	MqEtcdKv	existing;
	PendingOp	op = {0};
	ListCell   *lc;

	topic_id = read_topic_row(name, &t);
	live = live_nodes(t.replication_factor);
	if (MqEtcdGet(MqClusterKey("topics/%s", name), &existing, NULL))
	{
		char	   *by = MqJsonTryString(existing.value, "created_by");

		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("topic \"%s\" already exists in cluster \"%s\"", name, mqlog_cluster_name),
				 by ? errdetail("Node \"%s\" created it.", by) : 0));
	}

	MqClusterTopicMetaNew(&t);
	parts = MqClusterPlace(live, 0, t.partitions, t.replication_factor);
	MqSpiBegin(&spi, true);
	MqClusterStoreLocal(topic_id, &t, parts);
	MqSpiEnd(&spi);

	op.create = true;
	op.topic = t.name;
	op.uuid = t.uuid;
	op.topic_value = MqTopicMetaJson(&t);
	foreach(lc, parts)
		op.part_values = lappend(op.part_values, MqPartitionMetaJson(lfirst(lc)));
	queue_op(&op);
}

/* is topic_id a replicated topic (listed in mqlog.replicated_topic)? */
static char *
replicated_uuid(int topic_id)
{
	MqSpi		spi;
	Oid			types[1] = {INT4OID};
	Datum		values[1];
	char	   *uuid = NULL;
	MemoryContext outer = CurrentMemoryContext;

	MqSpiBegin(&spi, true);
	values[0] = Int32GetDatum(topic_id);
	if (SPI_execute_with_args("SELECT r.uuid FROM mqlog.replicated_topic r "
							  "WHERE r.topic_id OPERATOR(pg_catalog.=) $1",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not read mqlog.replicated_topic");
	if (SPI_processed == 1)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		uuid = MemoryContextStrdup(outer, v);
	}
	MqSpiEnd(&spi);
	return uuid;
}

bool
MqClusterTopicIsReplicated(int topic_id)
{
	return replicated_uuid(topic_id) != NULL;
}

/* a replicated topic changes only through etcd: refuse outside a cluster */
static void
require_cluster(const char *name, const char *what)
{
	if (!MqClusterEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("topic \"%s\" is replicated, but this server is not part of a cluster", name),
				 errdetail("Its metadata lives in etcd, and mqlog.etcd_endpoints is not set."),
				 errhint("Set mqlog.etcd_endpoints back and restart, then %s the topic.", what)));
}

/*
 * mq_drop_topic of a replicated topic: the etcd keys go when the drop
 * commits; the other nodes drop their copies when they see them gone.
 */
void
MqClusterDropTopic(const char *name, int topic_id)
{
	char	   *uuid = replicated_uuid(topic_id);

	if (uuid == NULL)
		return;
	MqClusterDropTopicByUuid(name, uuid);
}

/*
 * The etcd drop of the replicated topic name of this uuid, at commit (a
 * topic of another uuid there by then is left alone, write_drop): for a
 * topic held here (MqClusterDropTopic) and for one this node holds no
 * replica of, whose uuid is this node's copy of etcd's
 * (mqlog.cluster_partition): its keys are all there is to drop, and the
 * nodes that hold it drop their copies when they see them gone, as after
 * a drop at one of them.  The caller checked the privilege.
 */
void
MqClusterDropTopicByUuid(const char *name, const char *uuid)
{
	PendingOp	op = {0};

	require_cluster(name, "drop");
	op.create = false;
	op.topic = (char *) name;
	op.uuid = (char *) uuid;
	queue_op(&op);
}

/*
 * A replicated topic's config as etcd has it now (a fresh read, bounded
 * by mqlog.etcd_timeout), as a JSON object of Kafka's names: what every
 * node that holds the topic copies into its catalog (MqClusterStoreLocal),
 * for a node that holds no replica of it.  UNDEFINED_OBJECT when etcd has
 * no such topic.
 */
char *
MqClusterTopicConfig(const char *name)
{
	MqEtcdKv	kv;

	if (!MqEtcdGet(MqClusterKey("topics/%s", name), &kv, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replicated topic \"%s\" is not in etcd", name)));
	return MqTopicMetaParse(kv.value, kv.mod_revision)->config;
}

/*
 * A replicated topic's key in etcd, read now, checked to be the topic of
 * this uuid with this many partitions (an etcd write from another node
 * meanwhile is a serialization failure, to retry).
 */
static MqTopicMeta *
read_etcd_topic(const char *name, const char *uuid, int partitions)
{
	/* partitions -1: any count (a topic held elsewhere, config only) */
	MqEtcdKv	kv;
	MqTopicMeta *t;

	if (!MqEtcdGet(MqClusterKey("topics/%s", name), &kv, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replicated topic \"%s\" is not in etcd", name)));
	t = MqTopicMetaParse(kv.value, kv.mod_revision);
	if (t->uuid == NULL || strcmp(t->uuid, uuid) != 0 ||
		(partitions >= 0 && t->partitions != partitions))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("replicated topic \"%s\" changed in etcd meanwhile", name),
				 errhint("Retry once mqlog.partitions shows the change on this node.")));
	return t;
}

/*
 * The etcd half of mq_add_partitions for a replicated topic, after the
 * local partitions were made: place the new ones on the live nodes (a
 * fresh read, as at creation; placement goes on round-robin from where
 * the topic's first partitions left it), record them locally, and queue
 * the etcd write for commit: the topic key's new partition count, compared
 * with the revision read here, and the new partition keys, in one txn.
 */
void
MqClusterAddPartitions(const char *name, int old_count)
{
	MqSpi		spi;
	int			topic_id;
	MqTopicMeta row = {0};
	int			total;
	char	   *uuid;
	List	   *live;
	List	   *parts;
	MqTopicMeta *t;
	PendingOp	op = {0};
	ListCell   *lc;

	topic_id = read_topic_row(name, &row);
	total = row.partitions;
	uuid = replicated_uuid(topic_id);
	if (uuid == NULL || total <= old_count)
		return;
	if (total - old_count > MQ_ETCD_MAX_TXN_OPS / 2 - 1)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot add %d partitions to replicated topic \"%s\" at once", total - old_count, name),
				 errdetail("One etcd transaction takes at most %d new partitions.", MQ_ETCD_MAX_TXN_OPS / 2 - 1),
				 errhint("Add them in several calls.")));
	live = live_nodes(row.replication_factor);
	t = read_etcd_topic(name, uuid, old_count);
	t->partitions = total;
	parts = MqClusterPlace(live, old_count, total - old_count, row.replication_factor);

	MqSpiBegin(&spi, true);
	MqClusterStoreLocal(topic_id, NULL, parts);
	MqSpiEnd(&spi);

	op.kind = OP_ADD;
	op.topic = (char *) name;
	op.uuid = uuid;
	op.topic_value = MqTopicMetaJson(t);
	op.first = old_count;
	op.topic_rev = t->mod_revision;
	foreach(lc, parts)
		op.part_values = lappend(op.part_values, MqPartitionMetaJson(lfirst(lc)));
	queue_op(&op);
}

/*
 * A replicated topic's config change, on etcd's config (not this node's
 * copy of it, which may be behind another node's alter; an earlier alter
 * of this transaction is the base for a later one), queued for commit:
 * mqlog._alter_topic's merge (mqlog._apply_config_change), also written to
 * the catalog row topic_id when this node holds the topic (0: it does
 * not), whose partitions etcd must still have (-1: any).
 */
static void
alter_in_etcd(const char *name, const char *uuid, int topic_id, int partitions,
			  const char *change)
{
	MqTopicMeta *t;
	PendingOp	op = {0};
	PendingOp  *earlier = NULL;
	ListCell   *lc;
	MqSpi		spi;
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		values[3];
	char	   *config;
	MemoryContext outer = CurrentMemoryContext;
	bool		ok;

	require_cluster(name, "alter");
	foreach(lc, pending)
	{
		PendingOp  *p = lfirst(lc);

		if (p->kind == OP_ALTER && strcmp(p->topic, name) == 0)
			earlier = p;
	}
	t = earlier ? MqTopicMetaParse(earlier->topic_value, earlier->topic_rev) :
		read_etcd_topic(name, uuid, partitions);

	MqSpiBegin(&spi, true);
	values[0] = CStringGetTextDatum(t->config);
	values[1] = CStringGetTextDatum(change);
	values[2] = Int32GetDatum(topic_id);
	if (topic_id != 0)
		ok = SPI_execute_with_args("UPDATE mqlog.topic t SET config = mqlog._apply_config_change("
								   " $1::pg_catalog.jsonb, $2::pg_catalog.jsonb, mqlog._validate_config($2::pg_catalog.jsonb))"
								   " WHERE t.topic_id OPERATOR(pg_catalog.=) $3"
								   " RETURNING t.config::pg_catalog.text",
								   3, types, values, NULL, false, 0) == SPI_OK_UPDATE_RETURNING;
	else
		ok = SPI_execute_with_args("SELECT mqlog._apply_config_change("
								   " $1::pg_catalog.jsonb, $2::pg_catalog.jsonb, mqlog._validate_config($2::pg_catalog.jsonb))"
								   "::pg_catalog.text",
								   2, types, values, NULL, false, 0) == SPI_OK_SELECT;
	if (!ok || SPI_processed != 1)
		elog(ERROR, "mqlog: could not merge the config of topic \"%s\"", name);
	config = MemoryContextStrdup(outer, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	MqSpiEnd(&spi);
	t->config = config;

	if (earlier)
	{
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		earlier->topic_value = MqTopicMetaJson(t);
		MemoryContextSwitchTo(old);
		return;
	}
	op.kind = OP_ALTER;
	op.topic = (char *) name;
	op.uuid = (char *) uuid;
	op.topic_value = MqTopicMetaJson(t);
	op.topic_rev = t->mod_revision;
	queue_op(&op);
}

/*
 * The etcd half of mq_alter_topic for a replicated topic, after the local
 * catalog took the change: the topic key gets this node's new config at
 * commit, compared with the revision read here, and every other node's
 * sync worker copies it into its own catalog (workers/cluster_sync.c), so that
 * retention, min.insync.replicas and replica.lag.time.max.ms are the same
 * on every replica, as a Kafka topic's config is one for all brokers.
 */
void
MqClusterAlterTopic(const char *name, const char *change)
{
	MqTopicMeta row = {0};
	int			topic_id = read_topic_row(name, &row);
	char	   *uuid = replicated_uuid(topic_id);

	if (uuid == NULL)
		return;
	alter_in_etcd(name, uuid, topic_id, row.partitions, change);
}

/*
 * mq_alter_topic of a replicated topic this node holds no replica of (the
 * topic of this uuid, as mqlog.cluster_partition has it): the same change
 * of etcd's config at commit, with no catalog row here to take it; the
 * nodes that hold the topic copy it as after an alter at one of them.  The
 * caller checked the privilege.
 */
void
MqClusterAlterTopicByUuid(const char *name, const char *uuid, const char *change)
{
	alter_in_etcd(name, uuid, 0, -1, change);
}

/* ------------------------------------------------------------------------
 * At commit: the queued etcd writes
 * ------------------------------------------------------------------------ */

static void
write_create(PendingOp *op)
{
	char	   *topic_key = MqClusterKey("topics/%s", op->topic);
	int			nparts = list_length(op->part_values);
	int			p = 0;
	int64		rev = 0;

	/*
	 * This transaction's records on disk first: after a crash before the
	 * commit, recovery then sets the next transaction id past created_xid,
	 * which is never reused, so the sync worker finds it ended without a
	 * commit (a lost one could be the id of a later transaction that
	 * committed, and keep the orphan in etcd for good).
	 */
	XLogFlush(XactLastRecEnd);

	/* the topic and as many partitions as one etcd txn takes, then the rest */
	while (p < nparts || rev == 0)
	{
		MqEtcdTxn  *txn = MqEtcdTxnBegin();

		if (rev == 0)
		{
			MqEtcdTxnIfAbsent(txn, topic_key);
			MqEtcdTxnPut(txn, topic_key, op->topic_value, 0);
		}
		else
			MqEtcdTxnIfModRevision(txn, topic_key, rev);
		for (; p < nparts && MqEtcdTxnOps(txn) < MQ_ETCD_MAX_TXN_OPS; p++)
		{
			char	   *key = MqClusterKey("partitions/%s/%d", op->topic, p);

			MqEtcdTxnIfAbsent(txn, key);
			MqEtcdTxnPut(txn, key, list_nth(op->part_values, p), 0);
		}
		if (!MqEtcdTxnCommit(txn, rev == 0 ? &rev : NULL))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("topic \"%s\" already exists in cluster \"%s\"", op->topic, mqlog_cluster_name),
					 errdetail("Another node created it in etcd while this transaction ran."),
					 errcontext("writing topic \"%s\" to etcd at commit", op->topic)));
	}
}

/* add, alter: the topic key, compared with the revision read, and new partitions */
static void
write_update(PendingOp *op)
{
	char	   *topic_key = MqClusterKey("topics/%s", op->topic);
	MqEtcdTxn  *txn = MqEtcdTxnBegin();
	ListCell   *lc;
	int			p = op->first;

	MqEtcdTxnIfModRevision(txn, topic_key, op->topic_rev);
	MqEtcdTxnPut(txn, topic_key, op->topic_value, 0);
	foreach(lc, op->part_values)
	{
		char	   *key = MqClusterKey("partitions/%s/%d", op->topic, p++);

		MqEtcdTxnIfAbsent(txn, key);
		MqEtcdTxnPut(txn, key, lfirst(lc), 0);
	}
	if (!MqEtcdTxnCommit(txn, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 op->kind == OP_ADD ?
				 errmsg("topic \"%s\" changed in etcd while partitions were added to it", op->topic) :
				 errmsg("topic \"%s\" changed in etcd while its config was altered", op->topic),
				 errhint(op->kind == OP_ADD ? "Try mq_add_partitions again." : "Try mq_alter_topic again."),
				 errcontext("writing topic \"%s\" to etcd at commit", op->topic)));
}

static void
write_drop(PendingOp *op)
{
	char	   *topic_key = MqClusterKey("topics/%s", op->topic);
	MqEtcdKv	kv;
	MqEtcdTxn  *txn;
	char	   *uuid;

	if (!MqEtcdGet(topic_key, &kv, NULL))
		return;					/* already gone */
	uuid = MqJsonTryString(kv.value, "uuid");
	if (uuid == NULL || strcmp(uuid, op->uuid) != 0)
	{
		ereport(WARNING,
				(errmsg("topic \"%s\" in etcd is not the one dropped here; it is left alone", op->topic)));
		return;
	}
	txn = MqEtcdTxnBegin();
	MqEtcdTxnIfModRevision(txn, topic_key, kv.mod_revision);
	MqEtcdTxnDelete(txn, topic_key, false);
	MqEtcdTxnDelete(txn, MqClusterKey("partitions/%s/", op->topic), true);
	if (!MqEtcdTxnCommit(txn, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("topic \"%s\" changed in etcd while it was dropped", op->topic),
				 errhint("Try the drop again.")));
}

static void
cluster_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			{
				ListCell   *lc;

				foreach(lc, pending)
				{
					PendingOp  *op = lfirst(lc);

					if (op->kind == OP_CREATE)
						write_create(op);
					else if (op->kind == OP_ADD || op->kind == OP_ALTER)
						write_update(op);
					else
						write_drop(op);
				}
				pending = NIL;
				break;
			}
		case XACT_EVENT_PRE_PREPARE:
			if (pending != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that created, altered or dropped a replicated topic"),
						 errdetail("A replicated topic is written to etcd when its transaction commits.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending = NIL;		/* TopTransactionContext frees it */
			break;
		default:
			break;
	}
}

static void
cluster_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, pending)
			if (((PendingOp *) lfirst(lc))->subid == mySubid)
				((PendingOp *) lfirst(lc))->subid = parentSubid;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, pending)
			if (((PendingOp *) lfirst(lc))->subid == mySubid)
				pending = foreach_delete_current(pending, lc);
	}
}

void
MqClusterInitCallbacks(void)
{
	RegisterXactCallback(cluster_xact_callback, NULL);
	RegisterSubXactCallback(cluster_subxact_callback, NULL);
}
