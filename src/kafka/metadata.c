/*-------------------------------------------------------------------------
 *
 * metadata.c
 *		Metadata (key 3, v0-v9): this listener as the one broker (node id
 *		0, at mqlog.kafka_advertised_listener), and the topics the role may
 *		describe, each partition led by this broker when this node leads
 *		it.  A replicated partition led by another node has no leader here
 *		(LEADER_NOT_AVAILABLE): the other nodes' listeners are not known
 *		yet (doc/kafka.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/extension.h"
#include "utils/memutils.h"

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

static void
write_int32_array(StringInfo out, bool flexible, int n, int32 v)
{
	MqKafkaWriteArrayLen(out, flexible, n);
	for (int i = 0; i < n; i++)
		MqKafkaWriteInt32(out, v);
}

static void
write_topic(StringInfo out, MqKafkaRequest *req, const char *name, MqTopic *topic,
			int16 error)
{
	int16		v = req->api_version;
	bool		flex = req->flexible;

	MqKafkaWriteInt16(out, error);
	MqKafkaWriteString(out, flex, name);
	if (v >= 1)
		MqKafkaWriteInt8(out, 0);	/* is_internal */
	MqKafkaWriteArrayLen(out, flex, topic ? topic->partitions : 0);
	for (int p = 0; topic && p < topic->partitions; p++)
	{
		bool		here = MqTopicLeadsHere(topic, p);

		MqKafkaWriteInt16(out, here ? MQK_NONE : MQK_LEADER_NOT_AVAILABLE);
		MqKafkaWriteInt32(out, p);
		MqKafkaWriteInt32(out, here ? MQK_NODE_ID : -1);
		if (v >= 7)
			MqKafkaWriteInt32(out, topic->replicas ? topic->replicas[p].leader_epoch : -1);
		write_int32_array(out, flex, 1, MQK_NODE_ID);	/* replicas */
		write_int32_array(out, flex, here ? 1 : 0, MQK_NODE_ID);	/* isr */
		if (v >= 5)
			write_int32_array(out, flex, 0, 0); /* offline */
		MqKafkaWriteTags(out, flex);
	}
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
	char		host[256];
	int			port;
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
	MqKafkaAdvertised(host, sizeof(host), &port);
	MqKafkaWriteArrayLen(out, flex, 1);
	MqKafkaWriteInt32(out, MQK_NODE_ID);
	MqKafkaWriteString(out, flex, host);
	MqKafkaWriteInt32(out, port);
	if (v >= 1)
		MqKafkaWriteString(out, flex, NULL);	/* rack */
	MqKafkaWriteTags(out, flex);
	if (v >= 2)
		MqKafkaWriteString(out, flex,
						   psprintf("mqlog-" UINT64_FORMAT, GetSystemIdentifier()));
	if (v >= 1)
		MqKafkaWriteInt32(out, MQK_NODE_ID);	/* controller_id */

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
			write_topic(out, req, lfirst(lc), topics[i], errors[i]);
	}
	if (v >= 8)
		MqKafkaWriteInt32(out, PG_INT32_MIN);	/* cluster_authorized_operations */
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
