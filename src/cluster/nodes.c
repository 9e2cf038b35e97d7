/*-------------------------------------------------------------------------
 *
 * nodes.c
 *		Who this node is, the node list read from etcd, and the copy of it
 *		in shared memory that mqlog.nodes and the data path read.
 *
 * A node is alive while its key nodes/<name> exists: the key is put under
 * the node's lease, which its cluster worker keeps alive, so etcd deletes
 * it a lease TTL after the node stops.  members/<name> is the same value
 * without a lease, so a node that is down is still listed (as not alive),
 * and a follower can still find the conninfo of a leader that is gone.
 * The cluster worker refreshes the shared copy every second; nothing a
 * session runs on a view waits for etcd.
 *
 * A node's record also says where its Kafka listener is, which Kafka
 * broker id it has (MqClusterAssignBrokerId) and its rack
 * (mqlog.node_rack, Kafka's broker.rack), so that every node's listener
 * can name the leader of a replicated partition in Metadata, and a
 * leader can send a consumer to a follower in its rack (KIP-392).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "cluster/etcd.h"
#include "cluster/json.h"
#include "cluster/metadata.h"

typedef struct MqClusterShared
{
	LWLock	   *lock;
	int32		self_broker_id; /* -1 until the cluster worker has it */
	int			nnodes;
	MqClusterNode nodes[MQ_CLUSTER_MAX_NODES];
} MqClusterShared;

static MqClusterShared *cluster_shared = NULL;

/* ------------------------------------------------------------------------
 * This node
 * ------------------------------------------------------------------------ */

bool
MqClusterEnabled(void)
{
	return mqlog_etcd_endpoints != NULL && mqlog_etcd_endpoints[0] != '\0';
}

const char *
MqClusterNodeName(void)
{
	return MqClusterEnabled() ? mqlog_node_name : NULL;
}

/* "/mqlog/<cluster>/" followed by the formatted rest */
char *
MqClusterKey(const char *fmt,...)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "/mqlog/%s/", mqlog_cluster_name);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	return buf.data;
}

/* the value of a key this node holds for a role: {"node": "<name>"} */
char *
MqClusterNodeClaim(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	MqJsonAppendField(&buf, true, "node", mqlog_node_name);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * This node's Kafka listener as clients should reach it (what its Metadata
 * names it by), "" when no listener runs here.  The Kafka settings belong
 * to the kafka layer, above this one, so this layer does not read them: it
 * asks the function it is handed when the library is loaded (mqlog.c
 * passes kafka's MqKafkaListener), and without one there is no listener.
 */
static MqKafkaListenerFn kafka_listener = NULL;

void
MqClusterSetKafkaListener(MqKafkaListenerFn listener)
{
	kafka_listener = listener;
}

const char *
MqClusterKafkaListener(void)
{
	const char *listener = kafka_listener ? kafka_listener() : NULL;

	return listener ? listener : "";
}

/*
 * The value this node registers under nodes/<name> and members/<name>;
 * broker_id -1 leaves the broker id out (not assigned yet).
 */
char *
MqClusterNodeJson(int32 broker_id)
{
	StringInfoData buf;
	char		sysid[32];
	const char *kafka = MqClusterKafkaListener();

	snprintf(sysid, sizeof(sysid), UINT64_FORMAT, GetSystemIdentifier());
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	MqJsonAppendField(&buf, true, "name", mqlog_node_name);
	MqJsonAppendField(&buf, false, "conninfo", mqlog_node_conninfo);
	MqJsonAppendField(&buf, false, "started_at", timestamptz_to_str(PgStartTime));
	MqJsonAppendField(&buf, false, "sysid", sysid);
	if (broker_id >= 0)
		appendStringInfo(&buf, ",\"broker_id\":%d", broker_id);
	if (kafka[0] != '\0')
		MqJsonAppendField(&buf, false, "kafka", kafka);
	if (mqlog_node_rack != NULL && mqlog_node_rack[0] != '\0')
		MqJsonAppendField(&buf, false, "rack", mqlog_node_rack);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* an id as etcd's key or a record holds it: 1 to INT32_MAX, else -1 */
static int32
parse_broker_id(const char *text)
{
	char	   *end;
	long		id;

	if (text == NULL || text[0] < '1' || text[0] > '9')
		return -1;
	errno = 0;
	id = strtol(text, &end, 10);
	if (errno != 0 || *end != '\0' || id > PG_INT32_MAX)
		return -1;
	return (int32) id;
}

/*
 * This node's Kafka broker id: the one broker_ids/ holds for its name, or
 * else the next one, 1 above the largest, taken with a transaction that
 * creates broker_ids/<id> only if it is absent.  The cluster worker calls
 * it before it registers (errors are its round's).
 *
 * Why an assigned id and not one derived from the node: Kafka clients key
 * brokers by an int32 id, which must be the same in every node's Metadata,
 * stay the same across restarts (a client keeps its metadata while a
 * broker restarts) and never name two nodes.  A hash of the name can
 * collide; etcd's create_revision of members/<name> is unique but an
 * int64 that grows with every write to etcd, and changes when a DBA
 * removes a node for good and it comes back.  A key per id, created only
 * if absent, cannot be taken twice; mqlog never deletes these keys, so an
 * id is never handed out again, and a name that has one keeps it (a node
 * removed for good and rebuilt under its old name gets its old id back).
 * Two nodes of different names racing for the same id: one transaction
 * wins, the other reads again and takes the next.  Two runs of one name
 * (which registration then keeps from both being in the cluster) cannot
 * take two ids either: keys are never deleted, so the later one to read
 * either finds the other's id under the name or tries the same next id,
 * whose create then fails and whose read finds it.  Single-node listeners
 * are broker 0; a cluster's ids start at 1, so the two never meet.
 */
int32
MqClusterAssignBrokerId(void)
{
	char	   *prefix = MqClusterKey("broker_ids/");

	for (int attempt = 0; attempt < 16; attempt++)
	{
		int32		largest = 0;
		int32		id;
		ListCell   *lc;

		foreach(lc, MqEtcdRange(prefix, NULL))
		{
			MqEtcdKv   *kv = lfirst(lc);
			char	   *node = MqJsonTryString(kv->value, "node");

			id = parse_broker_id(kv->key + strlen(prefix));
			if (id < 0)
				continue;		/* not one of ours */
			if (node != NULL && strcmp(node, mqlog_node_name) == 0)
				return id;
			largest = Max(largest, id);
		}
		if (largest == PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("no Kafka broker id is left for node \"%s\"", mqlog_node_name),
					 errdetail("etcd's %s keys reach %d.", prefix, PG_INT32_MAX)));
		id = largest + 1;
		if (MqEtcdPutIfAbsent(MqClusterKey("broker_ids/%d", id), MqClusterNodeClaim(), 0, NULL))
		{
			ereport(LOG,
					(errmsg("mqlog cluster: node \"%s\" is Kafka broker %d of cluster \"%s\"",
							mqlog_node_name, id, mqlog_cluster_name)));
			return id;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not take a Kafka broker id for node \"%s\"", mqlog_node_name),
			 errdetail("Other nodes took every id this node tried.")));
	return -1;					/* keep compiler quiet */
}

/* ------------------------------------------------------------------------
 * The node list in etcd
 * ------------------------------------------------------------------------ */

static MqClusterNode *
find_node(List *nodes, const char *name)
{
	ListCell   *lc;

	foreach(lc, nodes)
	{
		MqClusterNode *n = lfirst(lc);

		if (strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

static int
node_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(((MqClusterNode *) lfirst(a))->name, ((MqClusterNode *) lfirst(b))->name);
}

/* add or update the node a members/ or nodes/ key describes */
static List *
add_node_kv(List *nodes, MqEtcdKv *kv, const char *prefix, bool alive)
{
	const char *name = kv->key + strlen(prefix);
	MqClusterNode *n;
	JsonbContainer *record;
	char	   *conninfo;
	char	   *kafka;
	char	   *rack;
	int32		broker_id;

	if (name[0] == '\0' || strlen(name) >= MQ_NODE_NAME_LEN || strchr(name, '/'))
		return nodes;			/* not one of ours */
	n = find_node(nodes, name);
	if (n == NULL)
	{
		if (list_length(nodes) >= MQ_CLUSTER_MAX_NODES)
		{
			ereport(WARNING,
					(errmsg("mqlog lists at most %d nodes; node \"%s\" is left out",
							MQ_CLUSTER_MAX_NODES, name)));
			return nodes;
		}
		n = palloc0(sizeof(MqClusterNode));
		strlcpy(n->name, name, MQ_NODE_NAME_LEN);
		n->broker_id = -1;
		n->is_self = MqClusterEnabled() && strcmp(name, mqlog_node_name) == 0;
		nodes = lappend(nodes, n);
	}
	record = MqJsonTryParse(kv->value);
	conninfo = MqJsonString(record, "conninfo");
	kafka = MqJsonString(record, "kafka");
	rack = MqJsonString(record, "rack");
	broker_id = parse_broker_id(MqJsonText(record, "broker_id"));
	/* the live key is the newer word on how to reach the node */
	if (conninfo && (alive || n->conninfo[0] == '\0'))
		strlcpy(n->conninfo, conninfo, MQ_NODE_CONNINFO_LEN);
	if (alive || n->broker_id < 0)
	{
		n->broker_id = broker_id;
		strlcpy(n->kafka, kafka ? kafka : "", MQ_NODE_KAFKA_LEN);
		strlcpy(n->rack, rack ? rack : "", MQ_NODE_RACK_LEN);
	}
	if (alive)
		n->alive = true;
	return nodes;
}

/*
 * Every node of the cluster, fresh from etcd, in name order (the stable
 * order placement uses): a list of MqClusterNode *, last_seen unset.
 */
List *
MqClusterReadNodes(void)
{
	char	   *members = MqClusterKey("members/");
	char	   *live = MqClusterKey("nodes/");
	List	   *nodes = NIL;
	ListCell   *lc;

	foreach(lc, MqEtcdRange(members, NULL))
		nodes = add_node_kv(nodes, lfirst(lc), members, false);
	foreach(lc, MqEtcdRange(live, NULL))
		nodes = add_node_kv(nodes, lfirst(lc), live, true);
	list_sort(nodes, node_cmp);
	return nodes;
}

/* ------------------------------------------------------------------------
 * The copy in shared memory
 * ------------------------------------------------------------------------ */

Size
MqClusterShmemSize(void)
{
	return MAXALIGN(sizeof(MqClusterShared));
}

void
MqClusterShmemInit(void)
{
	bool		found;

	cluster_shared = ShmemInitStruct("mqlog cluster", sizeof(MqClusterShared), &found);
	if (!found)
	{
		memset(cluster_shared, 0, sizeof(MqClusterShared));
		cluster_shared->self_broker_id = -1;
		cluster_shared->lock = &(GetNamedLWLockTranche("mqlog_cluster"))->lock;
	}
}

/*
 * Replace the shared copy with a fresh list.  A node seen alive now gets
 * last_seen = now; one that is not keeps the time it was last seen.
 */
void
MqClusterPublishNodes(List *nodes)
{
	TimestampTz now = GetCurrentTimestamp();
	MqClusterNode copy[MQ_CLUSTER_MAX_NODES];
	int			n = 0;
	ListCell   *lc;

	LWLockAcquire(cluster_shared->lock, LW_EXCLUSIVE);
	foreach(lc, nodes)
	{
		MqClusterNode *node = lfirst(lc);

		if (n == MQ_CLUSTER_MAX_NODES)
			break;
		copy[n] = *node;
		copy[n].last_seen = 0;
		for (int i = 0; i < cluster_shared->nnodes; i++)
			if (strcmp(cluster_shared->nodes[i].name, node->name) == 0)
				copy[n].last_seen = cluster_shared->nodes[i].last_seen;
		if (node->alive)
			copy[n].last_seen = now;
		n++;
	}
	memcpy(cluster_shared->nodes, copy, n * sizeof(MqClusterNode));
	cluster_shared->nnodes = n;
	LWLockRelease(cluster_shared->lock);
}

/* a palloc'd copy of the shared node list */
List *
MqClusterSharedNodes(void)
{
	List	   *result = NIL;

	if (cluster_shared == NULL)
		return NIL;
	LWLockAcquire(cluster_shared->lock, LW_SHARED);
	for (int i = 0; i < cluster_shared->nnodes; i++)
	{
		MqClusterNode *n = palloc(sizeof(MqClusterNode));

		*n = cluster_shared->nodes[i];
		result = lappend(result, n);
	}
	LWLockRelease(cluster_shared->lock);
	return result;
}

/* this node's Kafka broker id, once the cluster worker has it (-1 before) */
void
MqClusterSetSelfBrokerId(int32 broker_id)
{
	LWLockAcquire(cluster_shared->lock, LW_EXCLUSIVE);
	cluster_shared->self_broker_id = broker_id;
	LWLockRelease(cluster_shared->lock);
}

int32
MqClusterSelfBrokerId(void)
{
	int32		id;

	if (cluster_shared == NULL)
		return -1;
	LWLockAcquire(cluster_shared->lock, LW_SHARED);
	id = cluster_shared->self_broker_id;
	LWLockRelease(cluster_shared->lock);
	return id;
}

/*
 * How to reach a node with libpq, from the shared copy (never from etcd):
 * NULL when the node is unknown.  The follower's apply worker calls it.
 */
char *
MqClusterNodeConninfo(const char *node)
{
	char	   *result = NULL;

	if (cluster_shared == NULL || node == NULL)
		return NULL;
	LWLockAcquire(cluster_shared->lock, LW_SHARED);
	for (int i = 0; i < cluster_shared->nnodes; i++)
		if (strcmp(cluster_shared->nodes[i].name, node) == 0 &&
			cluster_shared->nodes[i].conninfo[0] != '\0')
			result = pstrdup(cluster_shared->nodes[i].conninfo);
	LWLockRelease(cluster_shared->lock);
	return result;
}
