/*-------------------------------------------------------------------------
 *
 * api_offset_delete.c
 *		OffsetDelete (key 47, v0): a group's committed offsets of some
 *		partitions forgotten (MqGroupDeleteOffset), each partition in a
 *		subtransaction of its own, for SQL and Kafka groups alike.
 *
 * As Kafka: the group must exist (GROUP_ID_NOT_FOUND) and be one the role
 * may use (GROUP_AUTHORIZATION_FAILED), both answered for the whole
 * request; a partition of a topic the group's members consume now is
 * GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset (the members of a group
 * this listener coordinates name their topics in their consumer protocol
 * metadata; SQL members in their subscription).  The role needs consume
 * on the topic, as for mq_reset_offsets (TOPIC_AUTHORIZATION_FAILED); an
 * unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a partition
 * the group has no offset of is answered without error, as Kafka does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/extension.h"

#include "groups/groups.h"
#include "kafka/kafka_internal.h"

typedef struct DeletePartition
{
	int32		index;
	int16		error;
} DeletePartition;

typedef struct DeleteTopic
{
	char	   *name;
	int32		npartitions;
	DeletePartition *partitions;
} DeleteTopic;

typedef struct DeleteUnit
{
	const char *group;
	const char *topic;
	DeletePartition *part;
} DeleteUnit;

typedef struct GroupCheck
{
	const char *group;
	bool		exists;
	bool		visible;
} GroupCheck;

static void
check_group(void *arg)
{
	GroupCheck *c = arg;

	c->visible = MqGroupLookup(c->group, &c->exists, NULL, NULL);
}

/*
 * Does a ConsumerProtocolSubscription (any version: its topics come first)
 * name the topic?  Metadata that does not parse names nothing.
 */
static bool
subscription_names(const char *metadata, int len, const char *topic)
{
	MqKafkaReader r;
	int32		n;

	if (metadata == NULL)
		return false;
	MqKafkaReaderInit(&r, metadata, len);
	(void) MqKafkaReadInt16(&r);	/* version */
	n = MqKafkaReadArrayLen(&r, false, 2);
	for (int i = 0; i < n && !r.failed; i++)
	{
		char	   *name = MqKafkaReadString(&r, false, NULL);

		if (name != NULL && strcmp(name, topic) == 0)
			return true;
	}
	return false;
}

/* do this listener's members of the group consume the topic? */
static bool
kafka_members_subscribe(const MqKafkaGroupInfo *info, const char *topic)
{
	for (int i = 0; i < info->nmembers; i++)
		if (subscription_names(info->members[i].metadata, info->members[i].metadata_len, topic))
			return true;
	return false;
}

static void
delete_partition(void *arg)
{
	DeleteUnit *u = arg;
	MqTopic    *topic = MqKafkaTopic(u->topic, MQ_PRIV_CONSUME, &u->part->error);

	if (topic == NULL)
		return;
	if (u->part->index < 0 || u->part->index >= topic->partitions)
	{
		u->part->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	(void) MqGroupDeleteOffset(u->group, topic, u->part->index);
}

/* a refusal of MqGroupDeleteOffset: its members consume the topic */
static int16
partition_error_of(int sqlerrcode, void *arg)
{
	if (sqlerrcode == ERRCODE_OBJECT_IN_USE)
		return MQK_GROUP_SUBSCRIBED_TO_TOPIC;
	return MqKafkaGroupErrorOf(sqlerrcode, arg);
}

MqKafkaOutcome
MqKafkaOffsetDelete(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	char	   *group;
	int32		ntopics;
	DeleteTopic *topics;
	int16		error = MQK_NONE;
	GroupCheck	check;
	MqKafkaGroupInfo info;
	bool		coordinated = false;
	int			attempted = 0;
	char	   *message;

	group = MqKafkaReadString(r, false, NULL);
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (group == NULL || ntopics < 0 || r->failed)
		return MQK_CLOSE;
	topics = palloc0(sizeof(DeleteTopic) * (ntopics + 1));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		topics[t].name = MqKafkaReadString(r, false, NULL);
		topics[t].npartitions = MqKafkaReadArrayLen(r, false, 4);
		if (topics[t].name == NULL || topics[t].npartitions < 0)
			return MQK_CLOSE;
		topics[t].partitions = palloc0(sizeof(DeletePartition) * (topics[t].npartitions + 1));
		for (int p = 0; p < topics[t].npartitions; p++)
			topics[t].partitions[p].index = MqKafkaReadInt32(r);
	}
	if (r->failed)
		return MQK_CLOSE;

	if (!OidIsValid(get_extension_oid("mqlog", true)))
		error = MQK_COORDINATOR_NOT_AVAILABLE;
	else if (group[0] == '\0' || strlen(group) >= MQ_GROUP_NAME_LEN)
		error = MQK_INVALID_GROUP_ID;
	else
	{
		check.group = group;
		error = MqKafkaTryAdmin(check_group, &check, NULL, false, &message);
		if (error == MQK_NONE && !check.visible)
			error = MQK_GROUP_AUTHORIZATION_FAILED;
		else if (error == MQK_NONE && !check.exists)
			error = MQK_GROUP_ID_NOT_FOUND;
	}
	if (error == MQK_NONE)
		coordinated = MqKafkaGroupInfoOf(group, &info);

	for (int t = 0; t < ntopics && error == MQK_NONE; t++)
	{
		bool		subscribed = coordinated && kafka_members_subscribe(&info, topics[t].name);

		for (int p = 0; p < topics[t].npartitions; p++)
		{
			DeletePartition *dp = &topics[t].partitions[p];
			DeleteUnit	u = {group, topics[t].name, dp};
			int16		code;

			if (subscribed)
				dp->error = MQK_GROUP_SUBSCRIBED_TO_TOPIC;
			else if (MqKafkaOutOfTime(req, &attempted))
				dp->error = MQK_REQUEST_TIMED_OUT;
			else if ((code = MqKafkaTryAdmin(delete_partition, &u, partition_error_of, true,
											 &message)) != MQK_NONE)
				dp->error = code;
		}
	}

	MqKafkaWriteInt16(out, error);
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	/* a group's error is told once, with no topics, as Kafka */
	if (error != MQK_NONE)
		ntopics = 0;
	MqKafkaWriteArrayLen(out, false, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, false, topics[t].name);
		MqKafkaWriteArrayLen(out, false, topics[t].npartitions);
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaWriteInt32(out, topics[t].partitions[p].index);
			MqKafkaWriteInt16(out, topics[t].partitions[p].error);
		}
	}
	return MQK_RESPOND;
}
