/*-------------------------------------------------------------------------
 *
 * metadata.c
 *		Metadata (key 3, v0-v9): the brokers (brokers.c: this listener,
 *		broker 0, on a single node; every alive node with a listener on a
 *		cluster, by its broker id in etcd) and the topics the role may
 *		describe.  A single-node topic is led by this broker.  A replicated
 *		partition is led by its leader node's broker, with its replicas and
 *		in-sync replicas as broker ids and the leader epoch (v7+) from this
 *		node's copy of etcd; while the leader is unknown, dead or has no
 *		listener, it has no leader (LEADER_NOT_AVAILABLE) and the client
 *		asks again.  The controller is the listed broker of the lowest id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/extension.h"
#include "utils/memutils.h"

#include "mqlog.h"
#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/internal.h"

/* every topic's name; none while mqlog is not installed in the database */
static List *
all_topic_names(void)
{
	if (!OidIsValid(get_extension_oid("mqlog", true)))
		return NIL;
	return MqTopicNames(NULL);
}

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

static void
write_partition(StringInfo out, MqKafkaRequest *req, MqTopic *topic, int p,
				const MqKafkaBroker *brokers, int nbrokers)
{
	int16		v = req->api_version;
	bool		flex = req->flexible;
	MqReplicaInfo *ri = topic->replicas ? &topic->replicas[p] : NULL;
	const MqKafkaBroker *leader;
	char	   *self[1] = {NULL};

	if (ri == NULL)
		leader = MqKafkaBrokerOf(brokers, nbrokers, NULL);
	else
		leader = ri->leader ? MqKafkaBrokerOf(brokers, nbrokers, ri->leader) : NULL;
	if (leader != NULL && !leader->listed)
		leader = NULL;

	MqKafkaWriteInt16(out, leader ? MQK_NONE : MQK_LEADER_NOT_AVAILABLE);
	MqKafkaWriteInt32(out, p);
	MqKafkaWriteInt32(out, leader ? leader->id : -1);
	if (v >= 7)
		MqKafkaWriteInt32(out, ri ? ri->leader_epoch : -1);
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

static void
write_topic(StringInfo out, MqKafkaRequest *req, const char *name, MqTopic *topic,
			int16 error, const MqKafkaBroker *brokers, int nbrokers)
{
	int16		v = req->api_version;
	bool		flex = req->flexible;

	MqKafkaWriteInt16(out, error);
	MqKafkaWriteString(out, flex, name);
	if (v >= 1)
		MqKafkaWriteInt8(out, 0);	/* is_internal */
	MqKafkaWriteArrayLen(out, flex, topic ? topic->partitions : 0);
	for (int p = 0; topic && p < topic->partitions; p++)
		write_partition(out, req, topic, p, brokers, nbrokers);
	if (v >= 8)
		MqKafkaWriteInt32(out, PG_INT32_MIN);	/* topic_authorized_operations */
	MqKafkaWriteTags(out, flex);
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
	MqKafkaBroker *brokers;
	int			nbrokers;
	int			nlisted = 0;
	int32		controller = -1;
	ListCell   *lc;
	MqTopic   **topics;
	int16	   *errors;
	int			count = 0;

	for (int i = 0; i < n && !r->failed; i++)
	{
		requested = lappend(requested, MqKafkaReadString(r, flex, NULL));
		MqKafkaSkipTags(r, flex);
	}
	if (v >= 4)
		(void) MqKafkaReadInt8(r);	/* allow_auto_topic_creation: never */
	if (v >= 8)
	{
		(void) MqKafkaReadInt8(r);
		(void) MqKafkaReadInt8(r);
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed || list_member_ptr(requested, NULL))
		return MQK_CLOSE;
	all = (n == -1) || (v == 0 && n == 0);

	if (v >= 3)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	brokers = MqKafkaBrokers(&nbrokers);
	for (int i = 0; i < nbrokers; i++)
		if (brokers[i].listed)
		{
			if (controller < 0)
				controller = brokers[i].id; /* the lowest: they are in id order */
			nlisted++;
		}
	MqKafkaWriteArrayLen(out, flex, nlisted);
	for (int i = 0; i < nbrokers; i++)
	{
		if (!brokers[i].listed)
			continue;
		MqKafkaWriteInt32(out, brokers[i].id);
		MqKafkaWriteString(out, flex, brokers[i].host);
		MqKafkaWriteInt32(out, brokers[i].port);
		if (v >= 1)
			MqKafkaWriteString(out, flex, NULL);	/* rack */
		MqKafkaWriteTags(out, flex);
	}
	/* one cluster id on every node: clients warn when brokers differ */
	if (v >= 2)
		MqKafkaWriteString(out, flex,
						   MqClusterEnabled() ? psprintf("mqlog-%s", mqlog_cluster_name)
						   : psprintf("mqlog-" UINT64_FORMAT, GetSystemIdentifier()));
	if (v >= 1)
		MqKafkaWriteInt32(out, controller); /* controller_id */

	/* topics: of all of them, only those the role may describe, as Kafka */
	if (all)
		requested = all_topic_names();
	topics = palloc0(sizeof(MqTopic *) * (list_length(requested) + 1));
	errors = palloc0(sizeof(int16) * (list_length(requested) + 1));
	foreach(lc, requested)
	{
		int			i = foreach_current_index(lc);

		topics[i] = MqKafkaTopic(lfirst(lc), MQ_PRIV_DESCRIBE, &errors[i]);
		if (!all || topics[i] != NULL)
			count++;
	}
	MqKafkaWriteArrayLen(out, flex, count);
	foreach(lc, requested)
	{
		int			i = foreach_current_index(lc);

		if (!all || topics[i] != NULL)
			write_topic(out, req, lfirst(lc), topics[i], errors[i], brokers, nbrokers);
	}
	if (v >= 8)
		MqKafkaWriteInt32(out, PG_INT32_MIN);	/* cluster_authorized_operations */
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
