/*-------------------------------------------------------------------------
 *
 * api_describe_groups.c
 *		DescribeGroups (key 15, v0-v4): a consumer group's state, protocol
 *		type, protocol and members, for the groups Kafka clients are
 *		members of here (api_groups.c) and those of SQL sessions alike.
 *
 * A Kafka group is shown as its coordinator holds it: each member with
 * its client id and address, its metadata for the group's protocol and,
 * once the group is Stable, the assignment its leader gave it.  A group
 * of SQL sessions is Stable, of protocol type "consumer" and protocol its
 * members' assignor (mqlog.assignor); each member is its session
 * ("sql-<pid>"), with the session's application_name as client id and its
 * client address (as pg_stat_activity shows it to the role), its
 * subscription and assignment encoded as Kafka's consumer protocol encodes
 * them (ConsumerProtocolSubscription and ConsumerProtocolAssignment v0),
 * so that tools decode them as a Kafka member's.  A group with only
 * offsets or an owner is Empty.  A group that does not exist is Dead with
 * no error, as Kafka answers; one that exists and the role may not use is
 * GROUP_AUTHORIZATION_FAILED.  So a role learns whether a group name is
 * taken, which mqlog's model implies anyway: a group nobody has is
 * nobody's, and the role's own join would take it (Kafka answers the
 * authorization error either way, its ACLs naming groups to come).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "common/ip.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"

#include "groups/groups.h"
#include "kafka/kafka_internal.h"

/* mqlog.assignor's names, by MqAssignor: Kafka's assignors of those names */
static const char *const assignor_names[] = {"range", "roundrobin", "sticky"};

/* Kafka's AclOperation codes, as authorized_operations' bits (KIP-430) */
#define ACL_OP_READ		3
#define ACL_OP_DELETE	6
#define ACL_OP_DESCRIBE 8

typedef struct DescribeUnit
{
	const char *group;
	int16		v;
	bool		flex;
	StringInfo	out;			/* the group's entry after its error code */
} DescribeUnit;

/*
 * a SQL session's application_name and "/address", as pg_stat_activity
 * shows them to the request's role: the address only of a session of a
 * role whose privileges it has, or with pg_read_all_stats (else "", as the
 * view's null: a grantee of the group is not told where its owner's
 * sessions connect from)
 */
static void
session_client(int pid, const char **client_id, const char **client_host)
{
	int			n = pgstat_fetch_stat_numbackends();

	*client_id = "";
	*client_host = "";
	for (int i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *l = pgstat_fetch_stat_local_beentry(i);
		PgBackendStatus *b;
		char		host[NI_MAXHOST];

		if (l == NULL || l->backendStatus.st_procpid != pid)
			continue;
		b = &l->backendStatus;
		*client_id = pstrdup(b->st_appname);
		if (!has_privs_of_role(GetUserId(), b->st_userid) &&
			!has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
			return;
		if (b->st_clientaddr.salen == 0 || b->st_clientaddr.addr.ss_family == AF_UNIX ||
			pg_getnameinfo_all(&b->st_clientaddr.addr, b->st_clientaddr.salen,
							   host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
			*client_host = "[local]";
		else
			*client_host = psprintf("/%s", host);
		return;
	}
}

/* ConsumerProtocolSubscription v0: the topics, no user data */
static void
write_subscription(StringInfo buf, const MqMemberInfo *m)
{
	MqKafkaWriteInt16(buf, 0);
	MqKafkaWriteArrayLen(buf, false, m->ntopics);
	for (int t = 0; t < m->ntopics; t++)
		MqKafkaWriteString(buf, false, MqTopicNameOrId(m->topic_ids[t]));
	MqKafkaWriteBytes(buf, false, NULL, -1);
}

/* ConsumerProtocolAssignment v0: the partitions by topic, no user data */
static void
write_assignment(StringInfo buf, const MqMemberInfo *m)
{
	MqTopicPart *parts = palloc(sizeof(MqTopicPart) * Max(m->nassigned, 1));
	int			ntopics = 0;

	memcpy(parts, m->assigned, sizeof(MqTopicPart) * m->nassigned);
	MqTopicPartSort(parts, m->nassigned);
	for (int i = 0; i < m->nassigned; i++)
		if (i == 0 || parts[i].topic_id != parts[i - 1].topic_id)
			ntopics++;
	MqKafkaWriteInt16(buf, 0);
	MqKafkaWriteArrayLen(buf, false, ntopics);
	for (int i = 0; i < m->nassigned;)
	{
		int			j = i;

		while (j < m->nassigned && parts[j].topic_id == parts[i].topic_id)
			j++;
		MqKafkaWriteString(buf, false, MqTopicNameOrId(parts[i].topic_id));
		MqKafkaWriteArrayLen(buf, false, j - i);
		for (int k = i; k < j; k++)
			MqKafkaWriteInt32(buf, parts[k].partition);
		i = j;
	}
	MqKafkaWriteBytes(buf, false, NULL, -1);
}

static void
write_member(DescribeUnit *u, const char *member_id, const char *client_id,
			 const char *client_host, const char *metadata, int metadata_len,
			 const char *assignment, int assignment_len)
{
	MqKafkaWriteString(u->out, u->flex, member_id);
	if (u->v >= 4)
		MqKafkaWriteString(u->out, u->flex, NULL);	/* group_instance_id */
	MqKafkaWriteString(u->out, u->flex, client_id);
	MqKafkaWriteString(u->out, u->flex, client_host);
	MqKafkaWriteBytes(u->out, u->flex, metadata ? metadata : "", metadata ? metadata_len : 0);
	MqKafkaWriteBytes(u->out, u->flex, assignment ? assignment : "",
					  assignment ? assignment_len : 0);
	MqKafkaWriteTags(u->out, u->flex);
}

/*
 * One group's entry after its error code, in a subtransaction
 * (MqKafkaTryAdmin); not visible to the role: an ERROR of 42501
 */
static void
describe_group(void *arg)
{
	DescribeUnit *u = arg;
	bool		exists;
	MqMemberInfo *members;
	int			nmembers;
	MqKafkaGroupInfo info;
	const char *state;
	const char *protocol_type;

	if (!MqGroupLookup(u->group, &exists, &members, &nmembers))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for consumer group \"%s\"", u->group)));
	MqKafkaWriteString(u->out, u->flex, u->group);
	if (!exists)
	{
		MqKafkaWriteString(u->out, u->flex, "Dead");
		MqKafkaWriteString(u->out, u->flex, "");
		MqKafkaWriteString(u->out, u->flex, "");
		MqKafkaWriteArrayLen(u->out, u->flex, 0);
		return;
	}
	if (MqKafkaGroupInfoOf(u->group, &info))
	{
		MqKafkaWriteString(u->out, u->flex, info.state);
		MqKafkaWriteString(u->out, u->flex, info.protocol_type);
		MqKafkaWriteString(u->out, u->flex, info.protocol);
		MqKafkaWriteArrayLen(u->out, u->flex, info.nmembers);
		for (int i = 0; i < info.nmembers; i++)
		{
			MqKafkaGroupMember *m = &info.members[i];

			write_member(u, m->member_id, m->client_id, m->client_host, m->metadata,
						 m->metadata_len, m->assignment, m->assignment_len);
		}
		return;
	}
	MqKafkaGroupShownState(u->group, nmembers, &state, &protocol_type);
	MqKafkaWriteString(u->out, u->flex, state);
	MqKafkaWriteString(u->out, u->flex, protocol_type);
	MqKafkaWriteString(u->out, u->flex, nmembers > 0 ? assignor_names[members[0].assignor] : "");
	MqKafkaWriteArrayLen(u->out, u->flex, nmembers);
	for (int i = 0; i < nmembers; i++)
	{
		StringInfoData sub;
		StringInfoData assign;
		const char *client_id;
		const char *client_host;

		initStringInfo(&sub);
		initStringInfo(&assign);
		write_subscription(&sub, &members[i]);
		write_assignment(&assign, &members[i]);
		session_client(members[i].pid, &client_id, &client_host);
		write_member(u, members[i].member_id, client_id, client_host, sub.data, sub.len,
					 assign.data, assign.len);
	}
}

MqKafkaOutcome
MqKafkaDescribeGroups(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		ngroups;
	char	  **names;
	bool		include_ops = false;
	int			attempted = 0;
	MemoryContext cxt;

	if ((names = MqKafkaReadGroupIds(r, flex, &ngroups)) == NULL)
		return MQK_CLOSE;
	if (v >= 3)
		include_ops = MqKafkaReadInt8(r) != 0;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog DescribeGroups group",
								ALLOCSET_DEFAULT_SIZES);
	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, ngroups);
	for (int i = 0; i < ngroups; i++)
	{
		DescribeUnit u = {names[i], v, flex, NULL};
		int16		error = MqKafkaGroupIdError(names[i]);
		MemoryContext old;
		StringInfoData entry;
		char	   *message;

		if (error == MQK_NONE && MqKafkaOutOfTime(req, &attempted))
			error = MQK_REQUEST_TIMED_OUT;
		if (error == MQK_NONE)
			error = MqKafkaCoordinatesGroup(names[i]);
		old = MemoryContextSwitchTo(cxt);
		initStringInfo(&entry);
		u.out = &entry;
		if (error == MQK_NONE)
			error = MqKafkaTryAdmin(describe_group, &u, NULL, true, &message);
		if (error == MQK_TOPIC_AUTHORIZATION_FAILED)
			error = MQK_GROUP_AUTHORIZATION_FAILED;
		MemoryContextSwitchTo(old);

		MqKafkaWriteInt16(out, error);
		if (error == MQK_NONE)
			appendBinaryStringInfo(out, entry.data, entry.len);
		else
		{
			MqKafkaWriteString(out, flex, names[i]);
			MqKafkaWriteString(out, flex, "");	/* group_state */
			MqKafkaWriteString(out, flex, "");	/* protocol_type */
			MqKafkaWriteString(out, flex, "");	/* protocol_data */
			MqKafkaWriteArrayLen(out, flex, 0);
		}
		if (v >= 3)
			MqKafkaWriteInt32(out, include_ops && error == MQK_NONE ?
							  (1 << ACL_OP_READ) | (1 << ACL_OP_DELETE) | (1 << ACL_OP_DESCRIBE) :
							  PG_INT32_MIN);
		MqKafkaWriteTags(out, flex);
		MemoryContextReset(cxt);
	}
	MemoryContextDelete(cxt);
	return MQK_RESPOND;
}
