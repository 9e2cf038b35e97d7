/*-------------------------------------------------------------------------
 *
 * brokers.c
 *		The Kafka brokers a listener names: on a single node this listener
 *		alone, broker 0; on a cluster (mqlog.etcd_endpoints) every node,
 *		by the broker id and Kafka listener its record in etcd holds
 *		(cluster/nodes.c), read from the cluster worker's copy in shared
 *		memory, never from etcd.
 *
 * Metadata lists the brokers that are alive and have a listener, and gives
 * a replicated partition the broker of its leader when that broker is
 * listed; replicas and in-sync replicas are named by broker id whether
 * listed or not (a dead replica is in offline_replicas).  This node is
 * described by its own settings (MqKafkaAdvertised), which a reload
 * changes at once, and is listed once the cluster worker has its broker
 * id; until then (its first second, before it registers, when it leads
 * nothing anyway) Metadata lists the other nodes only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"

#include "acl/acl.h"
#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

int32
MqKafkaSelfBrokerId(void)
{
	return MqClusterEnabled() ? MqClusterSelfBrokerId() : MQK_NODE_ID;
}

static int
broker_cmp(const void *a, const void *b)
{
	int32		x = ((const MqKafkaBroker *) a)->id;
	int32		y = ((const MqKafkaBroker *) b)->id;

	return (x > y) - (x < y);
}

/*
 * Every broker this node knows of, in broker id order, *nbrokers of them:
 * this node first filled from its own settings, then the other nodes of
 * the cluster that have a broker id.
 */
MqKafkaBroker *
MqKafkaBrokers(int *nbrokers)
{
	List	   *nodes = MqClusterEnabled() ? MqClusterSharedNodes() : NIL;
	MqKafkaBroker *b = palloc0(sizeof(MqKafkaBroker) * (list_length(nodes) + 1));
	int32		self = MqKafkaSelfBrokerId();
	int			n = 0;
	ListCell   *lc;

	if (self >= 0)
	{
		b[n].id = self;
		b[n].node = MqClusterEnabled() ? MqClusterNodeName() : NULL;
		MqKafkaAdvertised(b[n].host, sizeof(b[n].host), &b[n].port);
		b[n].alive = true;
		b[n].listed = true;
		b[n].rack = mqlog_node_rack[0] != '\0' ? pstrdup(mqlog_node_rack) : NULL;
		n++;
	}
	foreach(lc, nodes)
	{
		MqClusterNode *node = lfirst(lc);

		if (node->is_self || node->broker_id < 0)
			continue;
		b[n].id = node->broker_id;
		b[n].node = node->name;
		b[n].alive = node->alive;
		b[n].listed = node->alive && node->kafka[0] != '\0' &&
			MqKafkaSplitAddress(node->kafka, b[n].host, sizeof(b[n].host), &b[n].port);
		b[n].rack = node->rack[0] != '\0' ? node->rack : NULL;
		n++;
	}
	qsort(b, n, sizeof(MqKafkaBroker), broker_cmp);
	*nbrokers = n;
	return b;
}

/* the broker of a node (by name; NULL: this node), or NULL if it has none */
const MqKafkaBroker *
MqKafkaBrokerOf(const MqKafkaBroker *brokers, int nbrokers, const char *node)
{
	for (int i = 0; i < nbrokers; i++)
		if (node == NULL ? brokers[i].id == MqKafkaSelfBrokerId()
			: (brokers[i].node != NULL && strcmp(brokers[i].node, node) == 0))
			return &brokers[i];
	return NULL;
}

/*
 * May this listener serve reads of a partition (ListOffsets; Fetch before
 * v11, read_replicas.c has the later ones)?  A single-node topic: yes.  A
 * replicated partition: only where it is led,
 * as a Kafka broker answers a consumer that asks a follower, so that a
 * client with old metadata (after a failover or mq_elect_leader) asks for
 * new metadata and goes to the leader; and not while this node, though it
 * led, may have been replaced (MqTopicLedHereNow, which may read the topic
 * again: *topicp is then that copy).  Produce has the same answer from the
 * append path (MqTopicCheckLeader's MQ001).
 */
int16
MqKafkaCheckLeader(struct MqTopic **topicp, int32 partition)
{
	MqTopic    *led = MqTopicLedHereNow(*topicp, partition);

	if (led == NULL)
		return MQK_NOT_LEADER_OR_FOLLOWER;
	*topicp = led;				/* read again, perhaps: its epoch is newer */
	return MQK_NONE;
}

/*
 * A partition's leader epoch as Kafka clients see it (KIP-320): a
 * replicated partition's is the epoch of its leadership in this node's
 * copy of etcd, bumped at each election (sql/elect.c, cluster/failover.c),
 * the epoch its leader writes into each batch; a single-node topic's is
 * 0, for ever, so that clients keep their epoch logic on (-1 turns it off).
 */
int32
MqKafkaLeaderEpoch(struct MqTopic *topic, int32 partition)
{
	return topic->replicas ? topic->replicas[partition].leader_epoch : 0;
}

/*
 * A request's current_leader_epoch against this node's (Kafka's
 * checkCurrentLeaderEpoch): -1 asks for no check; an older one is
 * FENCED_LEADER_EPOCH (the client's metadata is stale: it asks for new
 * metadata), a newer one UNKNOWN_LEADER_EPOCH (this node has not learnt of
 * that election yet: the client retries).
 */
int16
MqKafkaCheckLeaderEpoch(struct MqTopic *topic, int32 partition, int32 client_epoch)
{
	int32		epoch = MqKafkaLeaderEpoch(topic, partition);

	if (client_epoch < 0 || client_epoch == epoch)
		return MQK_NONE;
	return client_epoch < epoch ? MQK_FENCED_LEADER_EPOCH : MQK_UNKNOWN_LEADER_EPOCH;
}

/*
 * May the request's role learn of the replicated topics this node holds no
 * copy of?  Their grants are on the nodes that hold them (grants do not
 * replicate), so only a role that may describe every topic on every node
 * (a superuser or a member of mqlog_admin, MqIsAdmin) sees them; see
 * doc/kafka.md, "Topics this node holds no replica of".
 */
bool
MqKafkaSeesClusterTopics(void)
{
	return MqClusterEnabled() && MqIsAdmin(GetUserId());
}

/*
 * A name this node has no topic of: a replicated topic of the cluster
 * held elsewhere (mqlog.cluster_partition)?  MQK_NONE if not; else, for a
 * request about its partitions, NOT_LEADER_OR_FOLLOWER, which sends a
 * client to Metadata and on to the leader, or TOPIC_AUTHORIZATION_FAILED
 * for a role that may not see it (what a topic here it may not describe
 * answers).
 */
int16
MqKafkaClusterTopicError(const char *name)
{
	if (!MqClusterEnabled() || MqClusterDirectoryRead(name) == NIL)
		return MQK_NONE;
	return MqKafkaSeesClusterTopics() ? MQK_NOT_LEADER_OR_FOLLOWER : MQK_TOPIC_AUTHORIZATION_FAILED;
}

/*
 * The answer to an admin request about a topic this node has none of: a
 * replicated topic held elsewhere is changed where it is held (with a
 * message saying so, when the API has one: what says the change), any
 * other name is UNKNOWN_TOPIC_OR_PARTITION
 */
int16
MqKafkaMissingTopicError(const char *name, const char *what, char **message)
{
	int16		code = MqKafkaClusterTopicError(name);

	if (code == MQK_NOT_LEADER_OR_FOLLOWER && message != NULL)
		*message = psprintf("topic \"%s\" has no replica on this node: %s at a node that holds one",
							name, what);
	return code == MQK_NONE ? MQK_UNKNOWN_TOPIC_OR_PARTITION : code;
}

/*
 * One cluster id on every node (clients warn when brokers differ): the
 * cluster's name, or a single node's system identifier
 */
char *
MqKafkaClusterId(void)
{
	if (MqClusterEnabled())
		return psprintf("mqlog-%s", mqlog_cluster_name);
	return psprintf("mqlog-" UINT64_FORMAT, GetSystemIdentifier());
}

/* each listed broker with its rack (NULL: none); with_rack: the version has the field */
void
MqKafkaWriteBrokers(StringInfo out, const MqKafkaBroker *brokers, int nbrokers, bool flex,
					bool with_rack)
{
	int			nlisted = 0;

	for (int i = 0; i < nbrokers; i++)
		nlisted += brokers[i].listed;
	MqKafkaWriteArrayLen(out, flex, nlisted);
	for (int i = 0; i < nbrokers; i++)
	{
		if (!brokers[i].listed)
			continue;
		MqKafkaWriteInt32(out, brokers[i].id);
		MqKafkaWriteString(out, flex, brokers[i].host);
		MqKafkaWriteInt32(out, brokers[i].port);
		if (with_rack)
			MqKafkaWriteString(out, flex, brokers[i].rack);
		MqKafkaWriteTags(out, flex);
	}
}

/* the lowest listed broker (MqKafkaBrokers lists them in id order) */
int32
MqKafkaControllerId(const MqKafkaBroker *brokers, int nbrokers)
{
	for (int i = 0; i < nbrokers; i++)
		if (brokers[i].listed)
			return brokers[i].id;
	return -1;
}

char *
MqKafkaAssignmentRefusal(const char *topic, const MqKafkaAssignment *a, int n, bool replicated)
{
	int32		self = MqKafkaSelfBrokerId();
	int			nbrokers;
	MqKafkaBroker *brokers;

	for (int i = 0; i < n; i++)
	{
		int32		p = a[i].partition >= 0 ? a[i].partition : i;

		if (a[i].nbrokers <= 0)
			return psprintf("partition %d of topic \"%s\" is assigned no broker", p, topic);
		if (a[i].nbrokers != a[0].nbrokers)
			return psprintf("partition %d of topic \"%s\" has %d replicas and partition %d has %d: every partition needs as many",
							p, topic, a[i].nbrokers, a[0].partition >= 0 ? a[0].partition : 0,
							a[0].nbrokers);
	}
	if (replicated || (n > 0 && a[0].nbrokers > 1))
	{
		if (!MqClusterEnabled())
			return psprintf("topic \"%s\": this server is a single node (broker %d), so each partition has exactly one replica, on it",
							topic, self);
		return psprintf("topic \"%s\": mqlog places the replicas of a replicated topic itself, round-robin over the live nodes with the leaders spread; give a replication factor and no assignment",
						topic);
	}

	/* one replica each: on this broker, where such a topic lives */
	brokers = MqKafkaBrokers(&nbrokers);
	for (int i = 0; i < n; i++)
	{
		int32		p = a[i].partition >= 0 ? a[i].partition : i;
		bool		known = false;

		if (a[i].brokers[0] == self)
			continue;
		for (int k = 0; k < nbrokers; k++)
			known = known || brokers[k].id == a[i].brokers[0];
		if (!known)
			return psprintf("broker %d, assigned partition %d of topic \"%s\", is not a broker of this cluster",
							a[i].brokers[0], p, topic);
		return psprintf("topic \"%s\": a topic of replication factor 1 lives on the node that serves the request, broker %d; send the request to broker %d, or assign broker %d",
						topic, self, a[i].brokers[0], self);
	}
	return NULL;
}
