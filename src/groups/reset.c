/*-------------------------------------------------------------------------
 *
 * reset.c
 *		Resetting a group's committed offsets, deleting a group and one
 *		partition's offset of it, each checked against the group's owner
 *		(ownership.c).
 *
 * A reset or a delete changes offsets under the group's members, so it is
 * refused while the group has any, or with force evicts them when its
 * transaction commits (registry.c): they rejoin and load the new offsets.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "acl/acl.h"
#include "groups/offsets.h"
#include "groups/ownership.h"
#include "groups/registry.h"

/*
 * Refused while the group has members, or with force (the owner's or
 * mqlog_admin's) they are evicted when the transaction commits.
 */
static void
refuse_if_active(const char *group, bool force, const char *what)
{
	if (MqGroupRefuseIfActive(group, force, what) > 0)
	{
		(void) MqGroupAuthorize(group, MQ_GROUP_OWNER);
		MqGroupEvictAtCommit(group);
	}
}

int64 *
MqGroupResetOffsets(const char *group, MqTopic *topic, const MqResetTarget *target,
					bool force)
{
	int64	   *targets = palloc(sizeof(int64) * Max(topic->partitions, 1));
	Oid			live = MqGroupAuthorize(group, MQ_GROUP_USE);

	refuse_if_active(group, force, "reset offsets");
	MqGroupPersistOwner(group, live);

	for (int p = 0; p < topic->partitions; p++)
	{
		int64		lso,
					hw;

		MqPartitionOffsets(topic, p, &lso, &hw);
		switch (target->kind)
		{
			case MQ_RESET_TO_EARLIEST:
				targets[p] = MqLogStartOffset(topic, p);
				break;
			case MQ_RESET_TO_LATEST:
				targets[p] = lso;
				break;
			case MQ_RESET_TO_TIME:
				/* the first record at or after ts, else the end */
				targets[p] = MqOffsetForTime(topic, p, target->ts, NULL);
				if (targets[p] < 0)
					targets[p] = lso;
				break;
			case MQ_RESET_TO_OFFSET:
				MqCheckOffsetRange(topic, p, target->offset, false);
				targets[p] = target->offset;
				break;
		}
		MqOffsetWrite(group, topic->topic_id, p, targets[p]);
	}
	return targets;
}

int64
MqGroupDelete(const char *group, bool force)
{
	int64		n;
	bool		owned;

	(void) MqGroupAuthorize(group, MQ_GROUP_USE_EXISTING);
	refuse_if_active(group, force, "delete the offsets");
	n = MqOffsetsDelete(group);
	owned = MqGroupDropOwnership(group);
	if (n == 0 && !owned && MqGroupMemberCount(group) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("consumer group \"%s\" does not exist", group)));
	return n;
}

/* do SQL members of the group subscribe to the topic? */
static bool
sql_members_subscribe(const char *group, int32 topic_id)
{
	int			n;
	MqMemberInfo *members = MqGroupMembers(false, &n);
	bool		found = false;

	for (int i = 0; i < n && !found; i++)
		if (strcmp(members[i].group, group) == 0)
			for (int t = 0; t < members[i].ntopics; t++)
				if (members[i].topic_ids[t] == topic_id)
					found = true;
	if (members)
		pfree(members);
	return found;
}

bool
MqGroupDeleteOffset(const char *group, MqTopic *topic, int32 partition)
{
	(void) MqGroupAuthorize(group, MQ_GROUP_USE_EXISTING);
	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	MqCheckPartition(topic, partition);
	/* as Kafka refuses it for a topic the group's members consume */
	if (sql_members_subscribe(group, topic->topic_id))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot delete the offsets of consumer group \"%s\" on topic \"%s\" while its members consume it",
						group, topic->name)));
	return MqOffsetDelete(group, topic->topic_id, partition);
}
