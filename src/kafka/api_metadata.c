/*-------------------------------------------------------------------------
 *
 * api_metadata.c
 *		Metadata (key 3, v0-v9): the brokers (brokers.c: this listener,
 *		broker 0, on a single node; every alive node with a listener on a
 *		cluster, by its broker id in etcd) and the topics the role may
 *		describe.  A single-node topic is led by this broker.  A replicated
 *		partition is led by its leader node's broker, with its replicas and
 *		in-sync replicas as broker ids and the leader epoch (v7+) from this
 *		node's copy of etcd (a single-node topic's is 0); while the leader is unknown, dead or has no
 *		listener, it has no leader (LEADER_NOT_AVAILABLE) and the client
 *		asks again.  The controller is the listed broker of the lowest id
 *		(Kafka's controller_id: not the elector of cluster/failover.c).
 *		A replicated topic this node holds no replica of is described
 *		from mqlog.cluster_partition (cluster/directory.c), to a role that
 *		may see such topics (MqKafkaSeesClusterTopics), as a local one.
 *
 * Auto-creation (Kafka's auto.create.topics.enable): with
 * mqlog.kafka_auto_create_topics on, a request that allows it
 * (allow_auto_topic_creation, v4+; every request of v0-v3) and names a
 * topic no node has creates it, as CreateTopics creates one of -1
 * partitions and replicas (MqKafkaAutoCreateTopic: as the request's role,
 * so a role that may not create topics is TOPIC_AUTHORIZATION_FAILED and
 * creates nothing).  The request's transaction commits before its answer
 * is sent, so the answer describes the new topic with its leader and the
 * client produces at once.  A topic another request created meanwhile is
 * described as well if this node sees it, else LEADER_NOT_AVAILABLE (a
 * replicated topic another node created, not in this node's directory
 * yet): Kafka's answer for a topic being created, which clients retry.
 * Creations run for at most MQK_REQUEST_TIME_MS (MqKafkaOutOfTime), and
 * a request creates one replicated topic at most (auto_create_topic says
 * why); the names left are LEADER_NOT_AVAILABLE too, and the client's
 * next request creates more.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

/* the broker ids of nodes (of those that have one); dead_only: of the dead ones */
static void
write_broker_ids(StringInfo out, bool flex, const MqKafkaBroker *brokers, int nbrokers,
				 char **nodes, int nnodes, bool dead_only)
{
	int32	   *ids = palloc(sizeof(int32) * (nnodes + 1));
	int			n = 0;

	for (int i = 0; i < nnodes; i++)
	{
		const MqKafkaBroker *b = MqKafkaBrokerOf(brokers, nbrokers, nodes[i]);

		if (b != NULL && (!dead_only || !b->alive))
			ids[n++] = b->id;
	}
	MqKafkaWriteArrayLen(out, flex, n);
	for (int i = 0; i < n; i++)
		MqKafkaWriteInt32(out, ids[i]);
}

/*
 * A partition: ri NULL for a single-node topic of this node, else its
 * replicas as this node's copy of etcd has them
 */
static void
write_partition(StringInfo out, MqKafkaRequest *req, MqTopic *topic, MqReplicaInfo *ri, int p,
				const MqKafkaBroker *brokers, int nbrokers)
{
	int16		v = req->api_version;
	bool		flex = req->flexible;
	const MqKafkaBroker *leader;
	char	   *self[1] = {NULL};

	if (ri == NULL)
		leader = MqKafkaBrokerOf(brokers, nbrokers, NULL);
	else
		leader = ri->leader ? MqKafkaBrokerOf(brokers, nbrokers, ri->leader) : NULL;
	if (leader != NULL && !leader->listed)
		leader = NULL;
	/*
	 * This node, which led, may have been replaced (its lease lapsed):
	 * no leader until it knows, so that a client does not come back to a
	 * log that may be behind the new leader's (MqTopicLeadsHereNow).
	 */
	if (leader != NULL && topic != NULL && MqTopicLeadsHere(topic, p) &&
		MqTopicLeaderFence(topic, p) != NULL)
		leader = NULL;

	MqKafkaWriteInt16(out, leader ? MQK_NONE : MQK_LEADER_NOT_AVAILABLE);
	MqKafkaWriteInt32(out, p);
	MqKafkaWriteInt32(out, leader ? leader->id : -1);
	if (v >= 7)
		MqKafkaWriteInt32(out, ri ? ri->leader_epoch : 0);	/* MqKafkaLeaderEpoch */
	if (ri == NULL)
	{
		/* this node alone: replica and in sync */
		write_broker_ids(out, flex, brokers, nbrokers, self, 1, false);
		write_broker_ids(out, flex, brokers, nbrokers, self, leader ? 1 : 0, false);
		if (v >= 5)
			write_broker_ids(out, flex, brokers, nbrokers, self, 0, false);
	}
	else
	{
		write_broker_ids(out, flex, brokers, nbrokers, ri->replicas, ri->nreplicas, false);
		write_broker_ids(out, flex, brokers, nbrokers, ri->isr, ri->nisr, false);
		if (v >= 5)
			write_broker_ids(out, flex, brokers, nbrokers, ri->replicas, ri->nreplicas, true);
	}
	MqKafkaWriteTags(out, flex);
}

/*
 * One topic of the answer: a topic of this node's catalog, or of the
 * cluster's that this node holds no copy of (parts: its partitions), or
 * an error
 */
typedef struct MetaTopic
{
	char	   *name;
	int16		error;
	int			partitions;
	MqReplicaInfo *parts;		/* per partition; NULL: single-node */
	MqTopic    *topic;			/* this node's copy, if it has one */
	bool		created;		/* auto-created, or created meanwhile */
} MetaTopic;

static void
write_topic(StringInfo out, MqKafkaRequest *req, const MetaTopic *t,
			const MqKafkaBroker *brokers, int nbrokers)
{
	int16		v = req->api_version;
	bool		flex = req->flexible;

	MqKafkaWriteInt16(out, t->error);
	MqKafkaWriteString(out, flex, t->name);
	if (v >= 1)
		MqKafkaWriteInt8(out, 0);	/* is_internal */
	MqKafkaWriteArrayLen(out, flex, t->partitions);
	for (int p = 0; p < t->partitions; p++)
		write_partition(out, req, t->topic, t->parts ? &t->parts[p] : NULL, p, brokers, nbrokers);
	if (v >= 8)
		MqKafkaWriteInt32(out, PG_INT32_MIN);	/* topic_authorized_operations */
	MqKafkaWriteTags(out, flex);
}

/* a local topic the role may describe, or the error that says why not */
static void
local_topic(MetaTopic *t)
{
	MqTopic    *topic = MqKafkaTopic(t->name, MQ_PRIV_DESCRIBE, &t->error);

	if (topic != NULL)
	{
		t->partitions = topic->partitions;
		t->parts = topic->replicas;
		t->topic = topic;
	}
}

static char **
name_array(List *names)
{
	char	  **a = palloc(sizeof(char *) * (list_length(names) + 1));
	ListCell   *lc;

	foreach(lc, names)
		a[foreach_current_index(lc)] = lfirst(lc);
	return a;
}

/* a replicated topic this node holds no copy of, from mqlog.cluster_partition */
static void
cluster_topic(MetaTopic *t, MqClusterTopic *ct)
{
	ListCell   *lc;

	t->error = MQK_NONE;
	t->partitions = list_length(ct->parts);
	t->parts = palloc0(sizeof(MqReplicaInfo) * (t->partitions + 1));
	foreach(lc, ct->parts)
	{
		MqPartitionMeta *pm = lfirst(lc);
		MqReplicaInfo *ri = &t->parts[foreach_current_index(lc)];

		ri->leader = pm->leader;
		ri->leader_epoch = pm->leader_epoch;
		ri->nreplicas = list_length(pm->replicas);
		ri->replicas = name_array(pm->replicas);
		ri->nisr = list_length(pm->isr);
		ri->isr = name_array(pm->isr);
	}
}

/*
 * A topic no node has, named by a request that may create it: created now
 * (t->created), or the error that says why not.  Past the request's time
 * (MqKafkaOutOfTime), or past one creation of a replicated topic,
 * LEADER_NOT_AVAILABLE, without trying: the client asks again.  Why one:
 * a replicated topic reaches etcd when the request's transaction commits
 * (cluster/topics.c), and a creation that loses there to another node's
 * aborts the transaction, after the topics written before it reached etcd
 * (they stay there, without a topic here, until the cluster worker
 * removes them 30 s later); one per request leaves nothing behind, and
 * the request served again finds the other node's topic (request.c).
 */
static void
auto_create_topic(MqKafkaRequest *req, MetaTopic *t, int *attempted, MemoryContext scratch)
{
	char	   *message;
	bool		replicated = MqClusterEnabled() && mqlog_kafka_default_replication_factor > 1;

	if ((replicated && *attempted > 0) || MqKafkaOutOfTime(req, attempted))
	{
		t->error = MQK_LEADER_NOT_AVAILABLE;
		return;
	}
	t->error = MqKafkaAutoCreateTopic(t->name, scratch, &message);
	if (t->error == MQK_NONE)
		ereport(LOG,
				(errmsg("Kafka client \"%s\" created topic \"%s\" as role \"%s\" (auto-creation, mqlog.kafka_auto_create_topics)",
						req->client_id ? req->client_id : "", t->name,
						GetUserNameFromId(GetUserId(), false))));
	if (t->error == MQK_NONE || t->error == MQK_TOPIC_ALREADY_EXISTS)
	{
		t->error = MQK_NONE;
		t->created = true;
	}
	else if (t->error == MQK_REQUEST_TIMED_OUT)
		t->error = MQK_LEADER_NOT_AVAILABLE;	/* being created by another */
	else if (t->error == MQK_INVALID_REQUEST)
	{
		/*
		 * __consumer_offsets or __transaction_state: Kafka makes these as
		 * its coordinators' internal topics, never a client's ordinary
		 * one, and mqlog has neither (mqlog._check_topic_collision).  A
		 * topic that does not exist and will not be created: as Kafka
		 * answers with auto-creation off.
		 */
		t->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
	}
	else
		ereport(DEBUG1,
				(errmsg("Kafka client \"%s\" could not auto-create topic \"%s\": %s",
						req->client_id ? req->client_id : "", t->name,
						message ? message : "")));
}

/*
 * The topics created by this request, or by another meanwhile, described
 * in a snapshot taken now (the request's own one is older than both); one
 * that is still not to be seen here is being created elsewhere:
 * LEADER_NOT_AVAILABLE, as Kafka answers for a topic being created.
 */
static void
describe_created(MetaTopic *topics, int n)
{
	bool		any = false;

	for (int i = 0; i < n && !any; i++)
		any = topics[i].created;
	if (!any)
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();	/* the creations' commands too, whatever the isolation */
	for (int i = 0; i < n; i++)
	{
		MetaTopic  *t = &topics[i];

		if (!t->created)
			continue;
		local_topic(t);
		if (t->error != MQK_NONE && t->error != MQK_TOPIC_AUTHORIZATION_FAILED)
		{
			t->error = MQK_LEADER_NOT_AVAILABLE;
			t->partitions = 0;
		}
	}
	PopActiveSnapshot();
}

static int
cluster_topic_cmp(const void *a, const void *b)
{
	return strcmp((*(MqClusterTopic *const *) a)->meta->name,
				  (*(MqClusterTopic *const *) b)->meta->name);
}

/*
 * The topics of the answer, *count of them.  All: the local ones the role
 * may describe, then the cluster's this node has no topic of (to a role
 * that may see them).  Named: each looked up only if this node has a
 * topic of that name (MqKafkaKnownTopics: a lookup of an invented name
 * would stay in the topic cache), else found among the cluster's, else
 * UNKNOWN_TOPIC_OR_PARTITION, or auto-created (auto_create).
 */
static MetaTopic *
answer_topics(MqKafkaRequest *req, List *requested, bool all, bool auto_create, int *count)
{
	MqKafkaTopicSet known;
	bool		installed = OidIsValid(get_extension_oid("mqlog", true));
	List	   *cluster = NIL;
	MqClusterTopic **sorted;
	int			ncluster;
	MetaTopic  *topics;
	int			n = 0;
	int			attempted = 0;
	MemoryContext scratch;
	ListCell   *lc;

	MqKafkaKnownTopics(&known);
	if (installed && MqClusterEnabled())
	{
		bool		need = all;

		foreach(lc, requested)
			need = need || !MqKafkaKnownTopic(&known, lfirst(lc));
		if (need)
			cluster = MqClusterDirectoryRead(NULL);
	}
	ncluster = list_length(cluster);
	sorted = palloc(sizeof(MqClusterTopic *) * (ncluster + 1));
	foreach(lc, cluster)
		sorted[foreach_current_index(lc)] = lfirst(lc);
	/* by strcmp, for bsearch: the read's order is the database's collation */
	qsort(sorted, ncluster, sizeof(MqClusterTopic *), cluster_topic_cmp);

	if (all)
	{
		topics = palloc0(sizeof(MetaTopic) * (known.n + ncluster + 1));
		for (int i = 0; i < known.n; i++)
		{
			topics[n].name = known.names[i];
			local_topic(&topics[n]);
			if (topics[n].error == MQK_NONE)
				n++;
		}
		if (!MqKafkaSeesClusterTopics())
			ncluster = 0;
		for (int i = 0; i < ncluster; i++)
			if (!MqKafkaKnownTopic(&known, sorted[i]->meta->name))
			{
				topics[n].name = sorted[i]->meta->name;
				cluster_topic(&topics[n++], sorted[i]);
			}
		*count = n;
		return topics;
	}

	topics = palloc0(sizeof(MetaTopic) * (list_length(requested) + 1));
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka Metadata auto-creation",
									ALLOCSET_DEFAULT_SIZES);
	foreach(lc, requested)
	{
		MetaTopic  *t = &topics[n++];
		MqClusterTopic key_topic;
		MqTopicMeta key_meta;
		MqClusterTopic *key = &key_topic;
		MqClusterTopic **found;

		t->name = lfirst(lc);
		if (MqKafkaKnownTopic(&known, t->name))
		{
			local_topic(t);
			continue;
		}
		key_meta.name = t->name;
		key_topic.meta = &key_meta;
		found = bsearch(&key, sorted, ncluster, sizeof(MqClusterTopic *), cluster_topic_cmp);
		if (found == NULL && auto_create)
			auto_create_topic(req, t, &attempted, scratch);
		else if (found == NULL)
			t->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		else if (!MqKafkaSeesClusterTopics())
			t->error = MQK_TOPIC_AUTHORIZATION_FAILED;
		else
			cluster_topic(t, *found);
	}
	describe_created(topics, n);
	*count = n;
	return topics;
}

/*
 * Each topic once, at its first place in the request, as Kafka's handler
 * takes the names as a set: a topic named as often as the frame holds
 * (200,000 times in 2 MB) is answered once, not 200,000 times at its full
 * size.
 */
static List *
distinct_names(List *names)
{
	int			n = list_length(names);
	bool	   *again;
	List	   *result = NIL;
	ListCell   *lc;

	if (n < 2)
		return names;
	again = MqKafkaRepeats(name_array(names), n);
	foreach(lc, names)
		if (!again[foreach_current_index(lc)])
			result = lappend(result, lfirst(lc));
	pfree(again);
	list_free(names);
	return result;
}

MqKafkaOutcome
MqKafkaMetadata(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 1 : 2);
	List	   *requested = NIL;
	bool		all;
	bool		allow_create = true;	/* v0-v3: always, as Kafka */
	MqKafkaBroker *brokers;
	int			nbrokers;
	int32		controller;
	MetaTopic  *topics;
	int			count = 0;

	for (int i = 0; i < n && !r->failed; i++)
	{
		requested = lappend(requested, MqKafkaReadString(r, flex, NULL));
		MqKafkaSkipTags(r, flex);
	}
	if (v >= 4)
		allow_create = MqKafkaReadInt8(r) != 0;
	if (v >= 8)
	{
		(void) MqKafkaReadInt8(r);
		(void) MqKafkaReadInt8(r);
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed || list_member_ptr(requested, NULL))
		return MQK_CLOSE;
	all = (n == -1) || (v == 0 && n == 0);
	requested = distinct_names(requested);

	if (v >= 3)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	brokers = MqKafkaBrokers(&nbrokers);
	controller = MqKafkaControllerId(brokers, nbrokers);
	MqKafkaWriteBrokers(out, brokers, nbrokers, flex, v >= 1);
	if (v >= 2)
		MqKafkaWriteString(out, flex, MqKafkaClusterId());
	if (v >= 1)
		MqKafkaWriteInt32(out, controller); /* controller_id */

	/* topics: of all of them, only those the role may describe, as Kafka */
	topics = answer_topics(req, requested, all,
						   allow_create && mqlog_kafka_auto_create_topics, &count);
	MqKafkaWriteArrayLen(out, flex, count);
	for (int i = 0; i < count; i++)
		write_topic(out, req, &topics[i], brokers, nbrokers);
	if (v >= 8)
		MqKafkaWriteInt32(out, PG_INT32_MIN);	/* cluster_authorized_operations */
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
