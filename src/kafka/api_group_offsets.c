/*-------------------------------------------------------------------------
 *
 * api_group_offsets.c
 *		OffsetCommit (key 8, v0-v7), OffsetFetch (key 9, v1-v7, v6+
 *		flexible; a null topic list, v2+, asks for every topic) and
 *		OffsetDelete (key 47, v0): a Kafka
 *		group's committed offsets are mqlog's, the rows of
 *		mqlog.committed_offset that SQL groups use too, written and read
 *		through the groups layer (MqGroupCommitExternal,
 *		MqGroupCommittedOffset), so mqlog.consumer_lag shows Kafka groups.
 *
 * A commit is checked as Kafka's coordinator checks it (the member and
 * its generation, MqKafkaGroupCommitCheck) and against the group's
 * privileges for mqlog.kafka_role (GROUP_AUTHORIZATION_FAILED); each
 * partition is then a subtransaction of the request's transaction, which
 * commits before the answer goes: an offset a client was told is
 * committed is.  The commit's metadata string is kept with the offset (at
 * most Kafka's offset.metadata.max.bytes, 4096, else
 * OFFSET_METADATA_TOO_LARGE) and OffsetFetch returns it; an offset
 * written otherwise (mq_commit, a reset) has none (an empty one).  The
 * retention time is not kept: offsets stay until mq_delete_group.
 *
 * OffsetDelete, as Kafka: the group must exist (GROUP_ID_NOT_FOUND) and be
 * one the role may use (GROUP_AUTHORIZATION_FAILED), both answered for the
 * whole request; a partition of a topic the group's members consume now is
 * GROUP_SUBSCRIBED_TO_TOPIC and keeps its offset (the members of a group
 * this listener coordinates name their topics in their consumer protocol
 * metadata, MqKafkaGroupSubscribed; SQL members in their subscription,
 * MqGroupDeleteOffset).  The role needs EXECUTE on mq_delete_group, which
 * deletes offsets in SQL, and consume on the topic, as for
 * mq_reset_offsets; a partition the group has no offset of is answered
 * without error, as Kafka does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "groups/groups.h"
#include "kafka/kafka_internal.h"

/* Kafka's offset.metadata.max.bytes: a commit's metadata string, at most */
#define MAX_METADATA_BYTES 4096

typedef enum OffsetWork
{
	OW_COMMIT,
	OW_FETCH,
	OW_DELETE
} OffsetWork;

typedef struct OffsetUnit
{
	const char *group;
	const char *topic;
	MqKafkaOffsetPartition *part;
	OffsetWork	work;
} OffsetUnit;

/* one partition's commit, read or delete, in a subtransaction (MqKafkaTry) */
static void
offset_partition(void *arg)
{
	OffsetUnit *u = arg;
	MqKafkaOffsetPartition *op = u->part;
	MqTopic    *topic = MqKafkaTopic(u->topic, u->work == OW_FETCH ? MQ_PRIV_DESCRIBE : MQ_PRIV_CONSUME,
									 &op->error);

	if (topic == NULL)
		return;
	if (op->index < 0 || op->index >= topic->partitions)
	{
		op->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	if (u->work == OW_COMMIT)
		MqGroupCommitExternalMetadata(u->group, topic, op->index, op->offset, op->metadata);
	else if (u->work == OW_FETCH)
		op->offset = MqGroupCommittedOffsetMetadata(u->group, topic, op->index, &op->metadata);
	else
		(void) MqGroupDeleteOffset(u->group, topic, op->index);
}

/* MqGroupDeleteOffset's refusal: the group's SQL members consume the topic */
static int16
delete_error_of(int sqlerrcode, void *arg)
{
	if (sqlerrcode == ERRCODE_OBJECT_IN_USE)
		return MQK_GROUP_SUBSCRIBED_TO_TOPIC;
	return MqKafkaGroupErrorOf(sqlerrcode, arg);
}

/*
 * Every partition in turn, for at most MQK_REQUEST_TIME_MS: a commit
 * naming one partition thousands of times rewrites one row as often, each
 * rewrite slower than the last within one transaction
 */
static void
run_units(MqKafkaRequest *req, const char *group, MqKafkaOffsetTopic *topics, int ntopics,
		  OffsetWork work)
{
	static const char *const names[] = {"OffsetCommit", "OffsetFetch", "OffsetDelete"};
	int			attempted = 0;
	int			late = 0;

	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaOffsetPartition *op = &topics[t].partitions[p];
			OffsetUnit	u = {group, topics[t].name, op, work};
			int16		code;
			char	   *message;

			if (op->error != MQK_NONE)
				continue;
			if (MqKafkaOutOfTime(req, &attempted))
			{
				op->error = MQK_REQUEST_TIMED_OUT;
				op->offset = -1;
				late++;
				continue;
			}
			if (work == OW_DELETE)
				code = MqKafkaTryAdmin(offset_partition, &u, delete_error_of, true, &message);
			else
				code = MqKafkaTry(offset_partition, &u, MQK_OFFSET_OUT_OF_RANGE, NULL);
			if (code != MQK_NONE)
				op->error = code;
			if (op->error != MQK_NONE && work == OW_FETCH)
				op->offset = -1;
		}
	if (late > 0)
		ereport(LOG,
				(errmsg("Kafka %s request from client \"%s\" took over %d ms: %d partitions answered REQUEST_TIMED_OUT",
						names[work], req->client_id ? req->client_id : "", MQK_REQUEST_TIME_MS, late)));
}

/* what follows a partition's index in OffsetCommit (MqKafkaReadOffsetTopics) */
static void
read_commit_partition(MqKafkaReader *r, bool flex, int16 v, MqKafkaOffsetPartition *op)
{
	op->offset = MqKafkaReadInt64(r);
	if (v >= 6)
		(void) MqKafkaReadInt32(r); /* committed_leader_epoch */
	if (v == 1)
		(void) MqKafkaReadInt64(r); /* commit_timestamp */
	op->metadata = MqKafkaReadString(r, flex, NULL);
	if (op->metadata && strlen(op->metadata) > MAX_METADATA_BYTES)
		op->error = MQK_OFFSET_METADATA_TOO_LARGE;
}

/*
 * OffsetFetch and OffsetDelete name a partition by its index alone; -1:
 * no offset read yet (OffsetFetch v1 answers it beside a group's error)
 */
static void
read_index_partition(MqKafkaReader *r, bool flex, int16 v, MqKafkaOffsetPartition *op)
{
	op->offset = -1;
}

/* every committed offset of the group, as the topics of a request would name them */
typedef struct AllOffsets
{
	const char *group;
	MqKafkaOffsetTopic *topics;
	int			ntopics;
} AllOffsets;

static void
read_all_offsets(void *arg)
{
	AllOffsets *a = arg;
	MqGroupOffset *offsets;
	int			n = MqGroupOffsets(a->group, &offsets);

	/* sorted by topic: one MqKafkaOffsetTopic per run of a topic's partitions */
	a->topics = palloc0(sizeof(MqKafkaOffsetTopic) * (n + 1));
	a->ntopics = 0;
	for (int i = 0; i < n;)
	{
		MqKafkaOffsetTopic *ot = &a->topics[a->ntopics++];
		int			j = i;

		while (j < n && offsets[j].topic->topic_id == offsets[i].topic->topic_id)
			j++;
		ot->name = offsets[i].topic->name;
		ot->npartitions = j - i;
		ot->partitions = palloc0(sizeof(MqKafkaOffsetPartition) * (j - i));
		for (int k = i; k < j; k++)
		{
			ot->partitions[k - i].index = offsets[k].partition;
			ot->partitions[k - i].offset = offsets[k].offset;
			ot->partitions[k - i].metadata = offsets[k].metadata;
		}
		i = j;
	}
}

static void
set_errors(MqKafkaOffsetTopic *topics, int ntopics, int16 error)
{
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
			topics[t].partitions[p].error = error;
}

MqKafkaOutcome
MqKafkaOffsetCommit(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *group;
	int32		generation = -1;
	char	   *member_id = NULL;
	int32		ntopics;
	MqKafkaOffsetTopic *topics;
	int16		error;
	bool		standalone = false;
	bool		full;

	group = MqKafkaReadString(r, false, NULL);
	if (v >= 1)
	{
		generation = MqKafkaReadInt32(r);
		member_id = MqKafkaReadString(r, false, NULL);
	}
	if (v >= 7)
		(void) MqKafkaReadString(r, false, NULL);	/* group_instance_id */
	if (v >= 2 && v <= 4)
		(void) MqKafkaReadInt64(r); /* retention_time_ms: offsets are kept */
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (ntopics < 0 || r->failed || group == NULL)
		return MQK_CLOSE;
	topics = MqKafkaReadOffsetTopics(r, false, v, ntopics, 14, read_commit_partition);
	if (topics == NULL)
		return MQK_CLOSE;

	error = MqKafkaGroupAccess(group);
	if (error == MQK_NONE)
		error = MqKafkaCoordinatesGroup(group);
	if (error == MQK_NONE)
		error = MqKafkaGroupCommitCheck(group, generation, member_id, false, &standalone);
	/* a commit of no member: the group must have no SQL members either */
	if (error == MQK_NONE && standalone && !MqGroupHostExternally(group, 1, &full))
	{
		/* over mqlog.kafka_max_groups: retriable, as a JoinGroup's */
		error = full ? MQK_COORDINATOR_NOT_AVAILABLE : MQK_UNKNOWN_MEMBER_ID;
		standalone = false;
	}
	if (error != MQK_NONE)
		set_errors(topics, ntopics, error);
	else
		run_units(req, group, topics, ntopics, OW_COMMIT);
	if (standalone)
		(void) MqGroupHostExternally(group, 0, &full);

	if (v >= 3)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWritePartitionErrors(out, false, topics, ntopics);
	return MQK_RESPOND;
}

MqKafkaOutcome
MqKafkaOffsetFetch(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	char	   *group;
	int32		ntopics;
	MqKafkaOffsetTopic *topics;
	int16		error;
	bool		all;

	group = MqKafkaReadString(r, flex, NULL);
	ntopics = MqKafkaReadArrayLen(r, flex, 6);
	if (r->failed || group == NULL)
		return MQK_CLOSE;
	/* v2+: a null list asks for every topic the group has offsets of */
	all = ntopics < 0;
	if (all && v < 2)
		return MQK_CLOSE;
	ntopics = Max(ntopics, 0);
	topics = MqKafkaReadOffsetTopics(r, flex, v, ntopics, 4, read_index_partition);
	if (topics == NULL)
		return MQK_CLOSE;
	if (v >= 7)
		(void) MqKafkaReadInt8(r);	/* require_stable: every offset is */
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	error = MqKafkaGroupAccess(group);
	if (error == MQK_NONE)
		error = MqKafkaCoordinatesGroup(group);
	if (error == MQK_NONE && all)
	{
		AllOffsets	a = {group, NULL, 0};
		char	   *message;

		error = MqKafkaTryAdmin(read_all_offsets, &a, MqKafkaGroupErrorOf, true, &message);
		topics = a.topics;
		ntopics = a.ntopics;
	}
	else if (error != MQK_NONE)
		set_errors(topics, ntopics, error);
	else
		run_units(req, group, topics, ntopics, OW_FETCH);
	/* v2+ tell a group's error once, with no topics, as Kafka */
	if (error != MQK_NONE && (v >= 2 || all))
		ntopics = 0;

	if (v >= 3)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, flex, topics[t].name);
		MqKafkaWriteArrayLen(out, flex, topics[t].npartitions);
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaOffsetPartition *op = &topics[t].partitions[p];

			MqKafkaWriteInt32(out, op->index);
			MqKafkaWriteInt64(out, op->offset);
			if (v >= 5)
				MqKafkaWriteInt32(out, -1); /* committed_leader_epoch */
			/* Kafka answers "" for no metadata */
			MqKafkaWriteString(out, flex, op->metadata ? op->metadata : "");
			MqKafkaWriteInt16(out, op->error);
			MqKafkaWriteTags(out, flex);
		}
		MqKafkaWriteTags(out, flex);
	}
	if (v >= 2)
		MqKafkaWriteInt16(out, error);
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}

/* does the group exist, and may the role see it?  (a subtransaction) */
typedef struct GroupCheck
{
	const char *group;
	bool		exists;
	bool		visible;
} GroupCheck;

/* and may it execute mq_delete_group, as DeleteGroups needs too */
static void
check_group(void *arg)
{
	GroupCheck *c = arg;

	MqKafkaCheckExecute(MqKafkaDeleteGroupFunction());
	c->visible = MqGroupLookup(c->group, &c->exists, NULL, NULL);
}

MqKafkaOutcome
MqKafkaOffsetDelete(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	char	   *group;
	int32		ntopics;
	MqKafkaOffsetTopic *topics;
	int16		error;
	GroupCheck	check = {NULL, false, false};
	char	   *message;

	group = MqKafkaReadString(r, false, NULL);
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (group == NULL || ntopics < 0 || r->failed)
		return MQK_CLOSE;
	topics = MqKafkaReadOffsetTopics(r, false, 0, ntopics, 4, read_index_partition);
	if (topics == NULL)
		return MQK_CLOSE;

	error = MqKafkaGroupIdError(group);
	if (error == MQK_NONE)
		error = MqKafkaCoordinatesGroup(group);
	if (error == MQK_NONE)
	{
		check.group = group;
		error = MqKafkaTryAdmin(check_group, &check, MqKafkaGroupErrorOf, false, &message);
		if (error == MQK_NONE && !check.visible)
			error = MQK_GROUP_AUTHORIZATION_FAILED;
		else if (error == MQK_NONE && !check.exists)
			error = MQK_GROUP_ID_NOT_FOUND;
	}
	if (error == MQK_NONE)
	{
		const char **names = palloc(sizeof(char *) * (ntopics + 1));
		bool	   *subscribed = palloc(sizeof(bool) * (ntopics + 1));

		/* the topics this listener's members of the group consume keep theirs */
		for (int t = 0; t < ntopics; t++)
			names[t] = topics[t].name;
		MqKafkaGroupSubscribed(group, names, ntopics, subscribed);
		for (int t = 0; t < ntopics; t++)
			if (subscribed[t])
				for (int p = 0; p < topics[t].npartitions; p++)
					topics[t].partitions[p].error = MQK_GROUP_SUBSCRIBED_TO_TOPIC;
		run_units(req, group, topics, ntopics, OW_DELETE);
	}

	MqKafkaWriteInt16(out, error);
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	/* a group's error is told once, with no topics, as Kafka */
	MqKafkaWritePartitionErrors(out, false, topics, error == MQK_NONE ? ntopics : 0);
	return MQK_RESPOND;
}
