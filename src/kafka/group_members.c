/*-------------------------------------------------------------------------
 *
 * group_members.c
 *		What mqlog.group_members shows of the Kafka groups this listener
 *		coordinates: their members, each with its client, subscription
 *		and assignment, published to the groups layer
 *		(groups/external_members.c), where SQL sessions read them.
 *
 * The coordinator (api_groups.c) owns the groups and decides when a
 * group has moved; this file owns the translation of one snapshot of a
 * group (MqKafkaGroupInfo) into the fixed-size entries the view reads:
 * the decoding of Kafka's consumer protocol (the subscription in a
 * member's metadata, the assignment its leader gave it, both opaque to
 * the coordinator) and the bounds of what an entry keeps.  It is apart
 * because it is a different concern (a projection for SQL, not the
 * rebalance protocol) and so that the coordinator's file stays one story.
 * Calls go one way only, from api_groups.c to here: nothing here reads
 * the coordinator's state, so a snapshot is all it sees.
 *
 * It runs in the listener, from the groups tick, outside any transaction;
 * what it allocates lives in a context of its own, reset after each
 * publication.  Every read of a member's metadata or assignment is bounds
 * checked (protocol.c's reader), and what does not fit an entry marks it
 * truncated, so no client's bytes can make it allocate or loop beyond
 * their length.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "groups/groups.h"
#include "kafka/group_members.h"
#include "kafka/kafka_internal.h"

static MemoryContext publish_cxt = NULL;

/* the index of a topic name in the entry's topics, added if new; -1: no room */
static int
topic_index(MqExternalMember *e, const char *name)
{
	int			pos = 0;
	int			len = strlen(name);

	for (int i = 0; i < e->ntopics; i++)
	{
		if (strcmp(e->topics + pos, name) == 0)
			return i;
		pos += strlen(e->topics + pos) + 1;
	}
	if (pos + len + 1 > MQ_EXT_TOPICS_LEN)
	{
		e->truncated = true;
		return -1;
	}
	memcpy(e->topics + pos, name, len + 1);
	return e->ntopics++;
}

/*
 * The topics of a member's subscription, from Kafka's consumer protocol
 * encoding (ConsumerProtocolSubscription, whose topics come first in every
 * version), in the current memory context; metadata of another protocol
 * type names none
 */
List *
MqKafkaSubscriptionTopics(const char *metadata, int metadata_len)
{
	MqKafkaReader r;
	int32		n;
	List	   *topics = NIL;

	if (metadata == NULL || metadata_len <= 0)
		return NIL;
	MqKafkaReaderInit(&r, metadata, metadata_len);
	(void) MqKafkaReadInt16(&r);
	n = MqKafkaReadArrayLen(&r, false, 2);
	for (int i = 0; i < n && !r.failed; i++)
	{
		char	   *name = MqKafkaReadString(&r, false, NULL);

		if (name != NULL)
			topics = lappend(topics, name);
	}
	return topics;
}

/*
 * A member's subscription and assignment (ConsumerProtocolAssignment,
 * whose topics come first in every version too)
 */
static void
decode_consumer(MqExternalMember *e, const char *metadata, int metadata_len,
				const char *assignment, int assignment_len)
{
	MqKafkaReader r;
	int32		n;
	ListCell   *lc;

	foreach(lc, MqKafkaSubscriptionTopics(metadata, metadata_len))
		(void) topic_index(e, lfirst(lc));
	e->nsubscribed = e->ntopics;
	if (assignment == NULL || assignment_len <= 0)
		return;
	MqKafkaReaderInit(&r, assignment, assignment_len);
	(void) MqKafkaReadInt16(&r);
	n = MqKafkaReadArrayLen(&r, false, 6);
	for (int i = 0; i < n && !r.failed; i++)
	{
		char	   *name = MqKafkaReadString(&r, false, NULL);
		int32		np = MqKafkaReadArrayLen(&r, false, 4);
		int			t = name ? topic_index(e, name) : -1;

		for (int p = 0; p < np && !r.failed; p++)
		{
			int32		partition = MqKafkaReadInt32(&r);

			if (t < 0 || e->nassigned >= MQ_EXT_ASSIGNED)
			{
				e->truncated = true;
				continue;
			}
			e->assigned[e->nassigned].topic = t;
			e->assigned[e->nassigned].partition = partition;
			e->nassigned++;
		}
	}
}

void
MqKafkaPublishGroupMembers(const char *group, const char *protocol,
						   const MqKafkaGroupInfo *info)
{
	MqExternalMember *entries;
	MemoryContext old;

	if (publish_cxt == NULL)
		publish_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog kafka group publishing",
											ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(publish_cxt);
	entries = palloc0(sizeof(MqExternalMember) * Max(info->nmembers, 1));
	for (int i = 0; i < info->nmembers; i++)
	{
		MqKafkaGroupMember *m = &info->members[i];
		MqExternalMember *e = &entries[i];

		strlcpy(e->member_id, m->member_id, MQ_MEMBER_ID_LEN);
		strlcpy(e->client_id, m->client_id, MQ_EXT_CLIENT_LEN);
		/* without Kafka's "/": the view's client_addr is an inet */
		strlcpy(e->client_host, m->client_host[0] == '/' ? m->client_host + 1 : m->client_host,
				MQ_EXT_CLIENT_LEN);
		strlcpy(e->protocol, protocol ? protocol : "", MQ_EXT_PROTOCOL_LEN);
		e->generation = info->generation;
		e->joined_at = m->joined_at;
		e->last_seen = m->last_seen;
		/* the assignment once synced, else none yet */
		decode_consumer(e, m->metadata, m->metadata_len,
						m->assignment, m->assignment_len);
	}
	(void) MqExternalMembersPublish(group, entries, info->nmembers);
	MemoryContextSwitchTo(old);
	MemoryContextReset(publish_cxt);
}
