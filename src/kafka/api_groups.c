/*-------------------------------------------------------------------------
 *
 * api_groups.c
 *		Kafka's classic group coordinator, with client-side assignment:
 *		FindCoordinator (key 10, v0-v2), JoinGroup (11, v0-v5), SyncGroup
 *		(14, v0-v3), Heartbeat (12, v0-v3) and LeaveGroup (13, v0-v2), and
 *		the check OffsetCommit makes of a member (api_group_offsets.c).
 *
 * As Kafka's GroupCoordinator: members join with their protocols (an
 * assignor's name and its opaque metadata each); a join, a leave or a
 * member whose session timed out starts a rebalance (PreparingRebalance),
 * in which heartbeats answer REBALANCE_IN_PROGRESS and members join again;
 * the rebalance completes when every member has joined, or at its deadline
 * (the largest rebalance timeout of the members) without those that did
 * not.  Then the generation goes up, a protocol every member supports is
 * chosen (the one most members name first), the current leader stays
 * leader (else the first member to have joined becomes it) and every
 * waiting JoinGroup is answered, the leader's with all the members'
 * metadata (CompletingRebalance).  The leader's SyncGroup carries the
 * assignments, which every member's SyncGroup is answered with (Stable).
 *
 * The state lives in this process only, the listener's (one process serves
 * every Kafka connection, listener.c); a restart of the listener forgets
 * the groups: members get UNKNOWN_MEMBER_ID and join again, and their
 * committed offsets, which are mqlog's (api_group_offsets.c), are kept.  While
 * a group has members here the groups layer knows it is held
 * (MqGroupHostExternally), so that SQL sessions cannot join a group of the
 * same name meanwhile; a join of a group that has SQL members is refused
 * with INCONSISTENT_GROUP_PROTOCOL.  What mqlog.group_members shows of the
 * groups is group_members.c's: the tick hands it a snapshot of each group
 * that moved (publish_if_changed), and it never calls back here.
 *
 * On a cluster a group has one coordinator, the node that holds its claim
 * in etcd (coordinator.c): FindCoordinator names that node's broker, and
 * every group request reaching another node is answered NOT_COORDINATOR.
 * A group started here records the lease it was claimed under; once the
 * node holds another lease (the first ended: another node may have taken
 * the group) its members here are dropped and find the coordinator again.
 *
 * A JoinGroup or SyncGroup that must wait for the other members parks
 * (MQK_PARK), like a Fetch waiting for data: the listener serves the other
 * connections and runs the parked request again on its next turn.  Its
 * answer is built when the group moves on (a rebalance completes, the
 * leader's assignments arrive, another rebalance cuts a sync short) and
 * kept with the member, so a parked request finds exactly the answer
 * Kafka's coordinator would have sent at that moment; the listener's
 * latch is set so that the next turn comes at once.  Nothing here waits
 * or touches the database but the group privilege check.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"
#include "groups/groups.h"
#include "kafka/group_members.h"
#include "kafka/kafka_internal.h"

#define MIN_SESSION_TIMEOUT_MS	1000
#define MAX_SESSION_TIMEOUT_MS	1800000
#define SYNC_RECHECK_MS			1000

typedef enum GroupState
{
	G_EMPTY,
	G_PREPARING,				/* PreparingRebalance: waiting for joins */
	G_COMPLETING,				/* CompletingRebalance: waiting for the leader */
	G_STABLE
} GroupState;

typedef struct Protocol
{
	char	   *name;
	char	   *metadata;
	int			len;
} Protocol;

typedef struct Member
{
	char		id[MQ_MEMBER_ID_LEN];
	uint64		serial;			/* a parked request's token */
	int			session_timeout;
	int			rebalance_timeout;
	int			nprotocols;
	Protocol   *protocols;
	TimestampTz last_seen;
	bool		awaiting_join;	/* joined in the current rebalance */
	int16		join_version;
	bool		awaiting_sync;
	int16		sync_version;
	char	   *assignment;		/* from the leader's SyncGroup */
	int			assignment_len;
	char	   *client_id;		/* of its last JoinGroup (DescribeGroups) */
	char	   *client_host;	/* its connection's address, "/" first */
	TimestampTz joined_at;		/* its first JoinGroup */
	bool		reply_ready;	/* the parked request's answer is in reply */
	StringInfoData reply;
} Member;

typedef struct PendingId
{
	char		id[MQ_MEMBER_ID_LEN];
	TimestampTz expires;
} PendingId;

typedef struct Group
{
	char		name[MQ_GROUP_NAME_LEN];
	GroupState	state;
	int32		generation;
	char	   *protocol_type;
	char	   *protocol;		/* chosen by the last rebalance */
	char		leader[MQ_MEMBER_ID_LEN];
	List	   *members;		/* Member *, in the order they joined */
	List	   *pending;		/* PendingId *: ids given with MEMBER_ID_REQUIRED */
	TimestampTz deadline;		/* of the rebalance in progress */
	int			held;			/* the count MqGroupHostExternally was told */
	int64		claimed_lease;	/* this node's lease when the group started
								 * here (on a cluster; coordinator.c) */
	uint64		published;		/* signature of what mqlog.group_members shows */
} Group;

static MemoryContext groups_cxt = NULL;
static List *groups = NIL;
static uint64 next_serial = 1;

/*
 * The members by serial, so that the listener can ask whether a parked
 * JoinGroup or SyncGroup may answer (MqKafkaParkedGroupReady) without
 * running it: each run parses its request again, and 40 parked SyncGroups
 * of 3 MB each, run again on every turn, held the listener's turn for
 * over a second.
 */
typedef struct SerialEntry
{
	uint64		serial;			/* hash key */
	Member	   *member;
} SerialEntry;

static HTAB *serials = NULL;

static void
serial_enter(Member *m)
{
	SerialEntry *e;

	if (serials == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(SerialEntry);
		ctl.hcxt = TopMemoryContext;
		serials = hash_create("mqlog kafka group members", 256, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(serials, &m->serial, HASH_ENTER, NULL);
	e->member = m;
}

/*
 * May the parked request of the member with this serial answer now: its
 * answer is ready, or the member is gone (UNKNOWN_MEMBER_ID)?  Otherwise
 * the listener runs it again only at its wake_at.
 */
bool
MqKafkaParkedGroupReady(uint64 serial)
{
	SerialEntry *e = serials ? hash_search(serials, &serial, HASH_FIND, NULL) : NULL;

	return e == NULL || e->member->reply_ready;
}

static bool full_logged = false;	/* a join over mqlog.kafka_max_groups was logged */

/* ------------------------------------------------------------------------
 * Groups and members
 * ------------------------------------------------------------------------ */

static Group *
find_group(const char *name)
{
	ListCell   *lc;

	foreach(lc, groups)
		if (strcmp(((Group *) lfirst(lc))->name, name) == 0)
			return lfirst(lc);
	return NULL;
}

static Member *
find_member(Group *g, const char *id)
{
	ListCell   *lc;

	if (g == NULL)
		return NULL;
	foreach(lc, g->members)
		if (strcmp(((Member *) lfirst(lc))->id, id) == 0)
			return lfirst(lc);
	return NULL;
}

static Member *
find_serial(Group *g, uint64 serial)
{
	ListCell   *lc;

	if (g == NULL)
		return NULL;
	foreach(lc, g->members)
		if (((Member *) lfirst(lc))->serial == serial)
			return lfirst(lc);
	return NULL;
}

/* tell the groups layer how many members the group has here */
static void
update_hold(Group *g)
{
	int			n = Max(list_length(g->members) + list_length(g->pending), 1);

	bool		full;

	if (n != g->held)
		(void) MqGroupHostExternally(g->name, n, &full);
	g->held = n;
}

static void
free_member(Member *m)
{
	if (serials != NULL)
		(void) hash_search(serials, &m->serial, HASH_REMOVE, NULL);
	for (int i = 0; i < m->nprotocols; i++)
	{
		pfree(m->protocols[i].name);
		pfree(m->protocols[i].metadata);
	}
	if (m->protocols)
		pfree(m->protocols);
	if (m->assignment)
		pfree(m->assignment);
	if (m->client_id)
		pfree(m->client_id);
	if (m->client_host)
		pfree(m->client_host);
	pfree(m->reply.data);
	pfree(m);
}

/* forget a group without members or pending ids; its offsets stay */
static void
drop_if_unused(Group *g)
{
	bool		full;

	if (g->members != NIL || g->pending != NIL)
		return;
	groups = list_delete_ptr(groups, g);
	(void) MqGroupHostExternally(g->name, 0, &full);
	(void) MqExternalMembersPublish(g->name, NULL, 0);
	full_logged = false;		/* a slot came back */
	if (g->protocol_type)
		pfree(g->protocol_type);
	if (g->protocol)
		pfree(g->protocol);
	pfree(g);
}

static bool
supports(Member *m, const char *protocol)
{
	for (int i = 0; i < m->nprotocols; i++)
		if (strcmp(m->protocols[i].name, protocol) == 0)
			return true;
	return false;
}

/*
 * Can a member with these protocols join?  Kafka's rule: an empty group
 * takes any protocol type; otherwise the type must be the group's and one
 * of the protocols must be supported by every member already in it.
 */
static bool
compatible(Group *g, const char *protocol_type, Protocol *protocols, int n, Member *self)
{
	ListCell   *lc;

	if (g->members == NIL || (list_length(g->members) == 1 && linitial(g->members) == self))
		return true;
	if (strcmp(g->protocol_type, protocol_type) != 0)
		return false;
	for (int i = 0; i < n; i++)
	{
		bool		all = true;

		foreach(lc, g->members)
		{
			Member	   *m = lfirst(lc);

			if (m != self && !supports(m, protocols[i].name))
				all = false;
		}
		if (all)
			return true;
	}
	return false;
}

/*
 * The protocol for a generation: of those every member supports, the one
 * most members prefer (name first), as Kafka's vote.
 */
static const char *
choose_protocol(Group *g)
{
	Member	   *first = linitial(g->members);
	const char *best = NULL;
	int			best_votes = -1;

	for (int i = 0; i < first->nprotocols; i++)
	{
		const char *candidate = first->protocols[i].name;
		int			votes = 0;
		bool		all = true;
		ListCell   *lc;

		foreach(lc, g->members)
			if (!supports(lfirst(lc), candidate))
				all = false;
		if (!all)
			continue;
		foreach(lc, g->members)
		{
			Member	   *m = lfirst(lc);

			/* a member votes for the first of its protocols all support */
			for (int j = 0; j < m->nprotocols; j++)
			{
				bool		everyone = true;
				ListCell   *lc2;

				foreach(lc2, g->members)
					if (!supports(lfirst(lc2), m->protocols[j].name))
						everyone = false;
				if (everyone)
				{
					if (strcmp(m->protocols[j].name, candidate) == 0)
						votes++;
					break;
				}
			}
		}
		if (votes > best_votes)
		{
			best = candidate;
			best_votes = votes;
		}
	}
	return best;
}

static Protocol *
member_protocol(Member *m, const char *name)
{
	for (int i = 0; i < m->nprotocols; i++)
		if (strcmp(m->protocols[i].name, name) == 0)
			return &m->protocols[i];
	return NULL;
}

/* ------------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------------ */

/* a JoinGroup answer of version v; members (the leader's) may be NIL */
static void
write_join(StringInfo out, int16 v, int16 error, int32 generation, const char *protocol,
		   const char *leader, const char *member_id, Group *g, bool with_members)
{
	if (v >= 2)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	MqKafkaWriteInt32(out, generation);
	MqKafkaWriteString(out, false, protocol ? protocol : "");
	MqKafkaWriteString(out, false, leader ? leader : "");
	MqKafkaWriteString(out, false, member_id ? member_id : "");
	if (!with_members)
	{
		MqKafkaWriteArrayLen(out, false, 0);
		return;
	}
	MqKafkaWriteArrayLen(out, false, list_length(g->members));
	{
		ListCell   *lc;

		foreach(lc, g->members)
		{
			Member	   *m = lfirst(lc);
			Protocol   *p = member_protocol(m, protocol);

			MqKafkaWriteString(out, false, m->id);
			if (v >= 5)
				MqKafkaWriteString(out, false, NULL);	/* group_instance_id */
			MqKafkaWriteBytes(out, false, p->metadata, p->len);
		}
	}
}

static void
write_sync(StringInfo out, int16 v, int16 error, const char *assignment, int len)
{
	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	MqKafkaWriteBytes(out, false, assignment ? assignment : "", assignment ? len : 0);
}

/* the answer of a member's parked request is ready: wake the listener */
static void
answer_ready(Member *m)
{
	m->reply_ready = true;
	SetLatch(MyLatch);
}

/* ------------------------------------------------------------------------
 * Rebalances
 * ------------------------------------------------------------------------ */

static void
prepare_rebalance(Group *g)
{
	TimestampTz now = GetCurrentTimestamp();
	int			timeout = 0;
	ListCell   *lc;

	if (g->state == G_PREPARING)
		return;
	foreach(lc, g->members)
	{
		Member	   *m = lfirst(lc);

		timeout = Max(timeout, m->rebalance_timeout);
		/* a sync cut short by the new rebalance */
		if (m->awaiting_sync)
		{
			m->awaiting_sync = false;
			resetStringInfo(&m->reply);
			write_sync(&m->reply, m->sync_version, MQK_REBALANCE_IN_PROGRESS, NULL, 0);
			answer_ready(m);
		}
	}
	g->state = G_PREPARING;
	g->deadline = TimestampTzPlusMilliseconds(now, timeout);
	ereport(DEBUG1,
			(errmsg("Kafka group \"%s\" is rebalancing (generation %d, %d members)",
					g->name, g->generation, list_length(g->members))));
}

static void remove_member(Group *g, Member *m, const char *why);

/*
 * Every member has joined, or the deadline passed: those that did not join
 * are out, the next generation starts and every join is answered.
 */
static void
complete_join(Group *g)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;
	const char *protocol;

	foreach(lc, g->members)
	{
		Member	   *m = lfirst(lc);

		if (!m->awaiting_join)
		{
			g->members = foreach_delete_current(g->members, lc);
			ereport(DEBUG1,
					(errmsg("Kafka group \"%s\": member \"%s\" did not join in time", g->name, m->id)));
			free_member(m);
		}
	}
	g->generation++;
	if (g->members == NIL)
	{
		g->state = G_EMPTY;
		g->leader[0] = '\0';
		return;
	}
	protocol = choose_protocol(g);
	if (g->protocol)
		pfree(g->protocol);
	g->protocol = MemoryContextStrdup(groups_cxt, protocol);
	if (find_member(g, g->leader) == NULL)
		strlcpy(g->leader, ((Member *) linitial(g->members))->id, MQ_MEMBER_ID_LEN);
	foreach(lc, g->members)
	{
		Member	   *m = lfirst(lc);
		MemoryContext old = MemoryContextSwitchTo(groups_cxt);

		resetStringInfo(&m->reply);
		write_join(&m->reply, m->join_version, MQK_NONE, g->generation, g->protocol,
				   g->leader, m->id, g, strcmp(m->id, g->leader) == 0);
		MemoryContextSwitchTo(old);
		m->awaiting_join = false;
		m->last_seen = now;
		if (m->assignment)
			pfree(m->assignment);
		m->assignment = NULL;
		m->assignment_len = 0;
		answer_ready(m);
	}
	g->state = G_COMPLETING;
	ereport(DEBUG1,
			(errmsg("Kafka group \"%s\" is at generation %d with %d members, protocol \"%s\", leader \"%s\"",
					g->name, g->generation, list_length(g->members), g->protocol, g->leader)));
}

static void
maybe_complete_join(Group *g)
{
	ListCell   *lc;

	if (g->state != G_PREPARING)
		return;
	foreach(lc, g->members)
		if (!((Member *) lfirst(lc))->awaiting_join)
			return;
	complete_join(g);
}

/* a member leaves (LeaveGroup) or its session timed out */
static void
remove_member(Group *g, Member *m, const char *why)
{
	ereport(DEBUG1,
			(errmsg("Kafka group \"%s\": member \"%s\" %s", g->name, m->id, why)));
	g->members = list_delete_ptr(g->members, m);
	free_member(m);
	if (g->members == NIL)
	{
		/* the last one: the group is empty, at the next generation */
		g->state = G_EMPTY;
		g->generation++;
		g->leader[0] = '\0';
		return;
	}
	prepare_rebalance(g);
	maybe_complete_join(g);
}

/* ------------------------------------------------------------------------
 * What mqlog.group_members shows of the groups (group_members.c)
 * ------------------------------------------------------------------------ */

/*
 * Publish the group's members if anything the view shows moved since the
 * last time: its state, generation, members, their assignments or their
 * last heartbeats.  Run by the tick, outside any transaction.
 */
static void
publish_if_changed(Group *g)
{
	uint64		sig = ((uint64) g->generation << 8) ^ (uint64) g->state;
	MqKafkaGroupInfo info;
	ListCell   *lc;

	foreach(lc, g->members)
	{
		Member	   *m = lfirst(lc);

		sig = sig * UINT64CONST(1000003) ^ (uint64) m->last_seen ^ (uint64) m->serial ^
			((uint64) m->assignment_len << 32);
	}
	if (sig == g->published)
		return;
	g->published = sig;
	(void) MqKafkaGroupInfoOf(g->name, &info);
	MqKafkaPublishGroupMembers(g->name, g->protocol, &info);
	pfree(info.members);
}

/*
 * A group claimed under a lease this node no longer holds (it lost etcd
 * long enough for the lease to end, and registered again) may be another
 * node's by now: its members here are dropped, and find their coordinator
 * again (UNKNOWN_MEMBER_ID, then NOT_COORDINATOR at their next join).  A
 * moment without any lease (a late keepalive) drops nothing.
 */
static void
drop_if_lost(Group *g)
{
	int64		lease = MqClusterCurrentLease();

	if (!MqClusterEnabled() || lease == 0 || g->claimed_lease == lease)
		return;
	ereport(LOG,
			(errmsg("Kafka consumer group \"%s\" is no longer coordinated on node \"%s\": it was claimed under a lease the node has lost",
					g->name, MqClusterNodeName()),
			 errdetail("Its %d members here are dropped; they find the group's coordinator again and rejoin there.",
					   list_length(g->members))));
	while (g->members != NIL)
		remove_member(g, linitial(g->members), "dropped (the group's claim was lost)");
	list_free_deep(g->pending);
	g->pending = NIL;
	drop_if_unused(g);
}

void
MqKafkaGroupsTick(void)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;
	List	   *empty = NIL;
	List	   *all = list_copy(groups);

	foreach(lc, all)
		drop_if_lost(lfirst(lc));
	list_free(all);
	foreach(lc, groups)
	{
		Group	   *g = lfirst(lc);
		ListCell   *mc;
		ListCell   *pc;

		foreach(pc, g->pending)
		{
			PendingId  *p = lfirst(pc);

			if (now >= p->expires)
			{
				g->pending = foreach_delete_current(g->pending, pc);
				pfree(p);
			}
		}
		foreach(mc, g->members)
		{
			Member	   *m = lfirst(mc);

			/* a member waiting for the rebalance is bound by its deadline */
			if (!(g->state == G_PREPARING && m->awaiting_join) &&
				now >= TimestampTzPlusMilliseconds(m->last_seen, m->session_timeout))
			{
				remove_member(g, m, "timed out (session.timeout.ms)");
				break;			/* the list changed: the rest next tick */
			}
		}
		if (g->state == G_PREPARING && now >= g->deadline)
			complete_join(g);
	}
	/* groups whose members all left or timed out give their slots back now */
	foreach(lc, groups)
	{
		Group	   *g = lfirst(lc);

		if (g->members == NIL && g->pending == NIL)
			empty = lappend(empty, g);
		else
			update_hold(g);
	}
	foreach(lc, empty)
		drop_if_unused(lfirst(lc));
	list_free(empty);
	foreach(lc, groups)
		publish_if_changed(lfirst(lc));
}

/* ------------------------------------------------------------------------
 * Checks shared by the requests
 * ------------------------------------------------------------------------ */

static void
check_group_access(void *arg)
{
	const char *group = arg;

	MqGroupCheckAccess(group, MQ_GROUP_USE, MqGroupLiveOwner(group));
}

int16
MqKafkaGroupIdError(const char *group)
{
	if (!OidIsValid(get_extension_oid("mqlog", true)))
		return MQK_COORDINATOR_NOT_AVAILABLE;
	if (group == NULL || group[0] == '\0' || strlen(group) >= MQ_GROUP_NAME_LEN)
		return MQK_INVALID_GROUP_ID;
	return MQK_NONE;
}

int16
MqKafkaGroupAccess(const char *group)
{
	int16		code;

	if ((code = MqKafkaGroupIdError(group)) != MQK_NONE)
		return code;
	code = MqKafkaTry(check_group_access, (void *) group, MQK_INVALID_REQUEST, NULL);
	if (code == MQK_TOPIC_AUTHORIZATION_FAILED)
		code = MQK_GROUP_AUTHORIZATION_FAILED;
	return code;
}

/*
 * Kafka's checks of an offset commit: a commit of no member (generation
 * -1, as a consumer with assign() sends) only while the group has no
 * members; otherwise the member must be one at the group's generation, and
 * not while the group waits for its leader's assignments.
 *
 * A transactional commit (TxnOffsetCommit, KIP-447) is checked as Kafka's
 * ClassicGroup checks it: no generation and no member id (v0-v2, or a
 * producer given no group metadata) is no check at all, whatever the
 * group's members; a generation of a group unknown here is
 * ILLEGAL_GENERATION; and the group's state is not looked at.  Its
 * group_instance_id is not checked: every member here is dynamic (JoinGroup
 * ignores group.instance.id), so no instance is ever fenced.
 */
int16
MqKafkaGroupCommitCheck(const char *group, int32 generation, const char *member_id,
						bool transactional, bool *standalone)
{
	Group	   *g = find_group(group);
	Member	   *m;
	bool		no_member = member_id == NULL || member_id[0] == '\0';

	*standalone = false;
	if (generation < 0 && (g == NULL || g->members == NIL))
	{
		*standalone = !transactional;
		return MQK_NONE;
	}
	if (transactional && generation < 0 && no_member)
		return MQK_NONE;
	if (transactional && g == NULL)
		return MQK_ILLEGAL_GENERATION;
	m = find_member(g, member_id ? member_id : "");
	if (m == NULL)
		return MQK_UNKNOWN_MEMBER_ID;
	/* a member's commit is a heartbeat; a producer's is not its consumer's */
	if (!transactional)
		m->last_seen = GetCurrentTimestamp();
	if (generation != g->generation)
		return MQK_ILLEGAL_GENERATION;
	if (!transactional && g->state == G_COMPLETING)
		return MQK_REBALANCE_IN_PROGRESS;
	return MQK_NONE;
}

/* the lease the group was claimed under here (for coordinator.c); 0: not here */
static int64
claimed_under(const char *group)
{
	Group	   *g = find_group(group);

	return g != NULL ? g->claimed_lease : 0;
}

/*
 * The group's use, whether it is coordinated here, then the member a
 * SyncGroup, Heartbeat or LeaveGroup names
 */
static int16
lookup_member(const char *group_id, const char *member_id, Group **g, Member **m)
{
	int16		error = MqKafkaGroupAccess(group_id);
	char	   *holder;

	if (error == MQK_NONE)
		error = MqKafkaCoordinatorError(group_id, claimed_under(group_id), MQK_CLAIM_CHECK, &holder);
	*g = find_group(group_id);
	*m = find_member(*g, member_id);
	if (error == MQK_NONE && *m == NULL)
		error = MQK_UNKNOWN_MEMBER_ID;
	return error;
}

/*
 * The check of a request about a group's offsets or the group itself
 * (api_group_offsets.c, api_describe_groups.c, api_delete_groups.c): a
 * free group is claimed here
 */
int16
MqKafkaCoordinatesGroup(const char *group)
{
	char	   *holder;

	return MqKafkaCoordinatorError(group, claimed_under(group), MQK_CLAIM_CACHED, &holder);
}

/* ------------------------------------------------------------------------
 * FindCoordinator: this listener alone, or on a cluster the claim holder's
 * ------------------------------------------------------------------------ */

MqKafkaOutcome
MqKafkaFindCoordinator(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *key = MqKafkaReadString(r, false, NULL);
	int8		key_type = 0;
	int16		error;
	const char *message = NULL;
	char		host[256];
	int			port;
	int32		self = MqKafkaSelfBrokerId();
	int32		broker = self;
	char	   *holder = NULL;

	if (v >= 1)
		key_type = MqKafkaReadInt8(r);
	if (r->failed)
		return MQK_CLOSE;
	if (key_type == 1 && MqKafkaTxnRefused())
	{
		error = MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
		message = "Kafka transactions are not served on an mqlog cluster";
	}
	else if (key_type == 1)
		error = (key == NULL || key[0] == '\0') ? MQK_INVALID_REQUEST : MQK_NONE;
	else if (key_type != 0)
	{
		error = MQK_INVALID_REQUEST;
		message = "unknown coordinator key type";
	}
	else
		error = MqKafkaGroupAccess(key);
	/* a cluster node before it has its broker id (it registers within a second) */
	if (error == MQK_NONE && self < 0)
		error = MQK_COORDINATOR_NOT_AVAILABLE;
	MqKafkaAdvertised(host, sizeof(host), &port);
	/*
	 * on a cluster: the node that holds the group's claim, taken if free;
	 * a transactional id's coordinator is this node (single node only)
	 */
	if (error == MQK_NONE && key_type == 0)
	{
		error = MqKafkaCoordinatorError(key, claimed_under(key), MQK_CLAIM_CACHED, &holder);
		if (error == MQK_COORDINATOR_NOT_AVAILABLE)
			message = "this node cannot tell the group's coordinator now (it holds no lease in etcd, or cannot reach etcd)";
	}
	if (error == MQK_NOT_COORDINATOR)
	{
		int			nbrokers;
		MqKafkaBroker *brokers = MqKafkaBrokers(&nbrokers);
		const MqKafkaBroker *b = holder ? MqKafkaBrokerOf(brokers, nbrokers, holder) : NULL;

		if (b != NULL && b->listed)
		{
			error = MQK_NONE;
			broker = b->id;
			strlcpy(host, b->host, sizeof(host));
			port = b->port;
		}
		else
		{
			/* retriable: the claim ends with its node's lease */
			error = MQK_COORDINATOR_NOT_AVAILABLE;
			message = psprintf("consumer group \"%s\" is coordinated on node \"%s\", which has no Kafka listener that is alive",
							   key, holder ? holder : "?");
		}
	}
	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	if (v >= 1)
		MqKafkaWriteString(out, false, message);
	MqKafkaWriteInt32(out, error == MQK_NONE ? broker : -1);
	MqKafkaWriteString(out, false, error == MQK_NONE ? host : "");
	MqKafkaWriteInt32(out, error == MQK_NONE ? port : -1);
	return MQK_RESPOND;
}

/* ------------------------------------------------------------------------
 * JoinGroup
 * ------------------------------------------------------------------------ */

/* a member id for a member joining without one: client id and a random tail */
static void
new_member_id(char *id, const char *client_id)
{
	uint8		rnd[8];
	char		hex[17];

	if (!pg_strong_random(rnd, sizeof(rnd)))
		elog(ERROR, "mqlog: could not generate a random member id");
	for (int i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	snprintf(id, MQ_MEMBER_ID_LEN, "%.*s-%s", MQ_MEMBER_ID_LEN - 18,
			 client_id && client_id[0] ? client_id : "member", hex);
}

/*
 * A new group while the listener holds mqlog.kafka_max_groups groups
 * already (the group slots the shared table keeps for it).  Kafka's
 * COORDINATOR_NOT_AVAILABLE is retriable: a client looks the coordinator
 * up again and retries its join with backoff, so its group starts once
 * another group's members are all gone, instead of failing for good
 * (GROUP_MAX_SIZE_REACHED would be about members of one group, and fatal
 * to the member).  Logged once until a group is let go.
 */
static int16
refuse_full(const char *group, const char *client_id)
{
	if (!full_logged)
		ereport(LOG,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("Kafka JoinGroup of group \"%s\" from client \"%s\" refused: the listener holds mqlog.kafka_max_groups (%d) consumer groups",
						group, client_id ? client_id : "", mqlog_kafka_max_groups),
				 errdetail("The client is answered COORDINATOR_NOT_AVAILABLE and retries; a group's slot comes back when its last member leaves or its session times out. Further refusals are not logged until then."),
				 errhint("Raise mqlog.kafka_max_groups (restart), or stop consumers of groups no longer used.")));
	full_logged = true;
	return MQK_COORDINATOR_NOT_AVAILABLE;
}

/*
 * What the groups may hold: a member's protocols (their names and
 * metadata, a subscription a client sends and the leader's join answer
 * carries back) take at most MQK_MEMBER_MAX_BYTES, a leader's assignment
 * for one member as much, and the groups together (members, parked
 * answers, assignments) MQK_GROUPS_MAX_BYTES.  Kafka bounds neither but
 * by its frame size; here every member lives in the listener's memory, so
 * without them members joining with 100 MB frames of metadata would fill
 * it.  A client's subscription to 10,000 topics takes about 300 kB.
 */
#define MQK_MEMBER_MAX_BYTES	(1024 * 1024)
#define MQK_GROUPS_MAX_BYTES	(64 * 1024 * 1024)

/*
 * A member's protocols: Kafka's clients name one to three (range,
 * roundrobin, cooperative-sticky); choosing one and checking a join
 * against the group's members take time that grows with their count
 * squared (130,000 of them held the listener 47 s).  And the member ids
 * a group hands out with MEMBER_ID_REQUIRED (KIP-394) that have not come
 * back: each costs a list entry until its session timeout.
 */
#define MQK_MAX_PROTOCOLS		64
#define MQK_MAX_PENDING_IDS		1000

static TimestampTz bytes_logged = 0;	/* the last refusal for room logged */
static TimestampTz refusals_logged = 0;	/* the last refusal of a bad member */

/*
 * Is a refusal's line due (at most one per 10 s from *last)?  A client
 * repeating a refused join or sync at once must not fill the log.
 */
static bool
log_due(TimestampTz *last)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!TimestampDifferenceExceeds(*last, now, 10000))
		return false;
	*last = now;
	return true;
}

/* the bytes a context and its children use (their blocks, less what is free) */
static Size
context_used(MemoryContext cxt)
{
	MemoryContextCounters c;
	Size		used;

	memset(&c, 0, sizeof(c));
	cxt->methods->stats(cxt, NULL, NULL, &c, false);
	used = c.totalspace - c.freespace;
	for (MemoryContext child = cxt->firstchild; child != NULL; child = child->nextchild)
		used += context_used(child);
	return used;
}

/*
 * What the groups hold.  Their context's blocks stay allocated when the
 * chunks in them are freed, so past the bound its size says too much:
 * then the blocks' used bytes are counted (a walk of their free lists, at
 * most once a second), or groups that are gone would keep every new one
 * out until the listener restarts.
 */
static Size
groups_used(void)
{
	static TimestampTz measured_at = 0;
	static Size used = 0;
	Size		allocated = MemoryContextMemAllocated(groups_cxt, true);
	TimestampTz now;

	if (allocated <= MQK_GROUPS_MAX_BYTES)
		return allocated;
	now = GetCurrentTimestamp();
	if (TimestampDifferenceExceeds(measured_at, now, 1000))
	{
		used = context_used(groups_cxt);
		measured_at = now;
	}
	return used;
}

/* the groups' memory has room for bytes more (twice, for a join: see below) */
static bool
groups_have_room(Size bytes, const char *what, const char *group, const char *client_id)
{
	if (groups_cxt == NULL || groups_used() + bytes <= MQK_GROUPS_MAX_BYTES)
		return true;
	if (log_due(&bytes_logged))
		ereport(LOG,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("Kafka %s of group \"%s\" from client \"%s\" refused: the consumer groups hold %d bytes already",
						what, group, client_id ? client_id : "", MQK_GROUPS_MAX_BYTES),
				 errdetail("The client is answered COORDINATOR_NOT_AVAILABLE and retries; further refusals are logged once per 10 s.")));
	return false;
}

/*
 * The leader's assignments: one over MQK_MEMBER_MAX_BYTES is
 * INVALID_REQUEST, all of them with no room left COORDINATOR_NOT_AVAILABLE
 */
static int16
check_assignment_bytes(const char *group, const char *client_id, const int *len, int n)
{
	Size		bytes = 0;

	for (int i = 0; i < n; i++)
	{
		if (len[i] > MQK_MEMBER_MAX_BYTES)
		{
			if (log_due(&refusals_logged))
				ereport(LOG,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("Kafka SyncGroup of group \"%s\" from client \"%s\" refused: an assignment takes %d bytes, over %d",
								group, client_id ? client_id : "", len[i], MQK_MEMBER_MAX_BYTES)));
			return MQK_INVALID_REQUEST;
		}
		bytes += Max(len[i], 0);
	}
	return groups_have_room(bytes, "SyncGroup", group, client_id) ? MQK_NONE : MQK_COORDINATOR_NOT_AVAILABLE;
}

/*
 * A join's protocols over MQK_MEMBER_MAX_BYTES, or more than
 * MQK_MAX_PROTOCOLS of them, is INVALID_REQUEST (no client sends one); a
 * join the groups' memory has no room for is COORDINATOR_NOT_AVAILABLE,
 * retriable, as refuse_full
 */
static int16
check_member_bytes(const char *group, const char *client_id, const Protocol *protocols, int n)
{
	Size		bytes = 0;

	if (n > MQK_MAX_PROTOCOLS)
	{
		if (log_due(&refusals_logged))
			ereport(LOG,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Kafka JoinGroup of group \"%s\" from client \"%s\" refused: it names %d protocols, over %d",
							group, client_id ? client_id : "", n, MQK_MAX_PROTOCOLS)));
		return MQK_INVALID_REQUEST;
	}
	/* each protocol's entry and chunks too, not only its bytes */
	for (int i = 0; i < n; i++)
		bytes += strlen(protocols[i].name) + 1 + Max(protocols[i].len, 0) + 64;
	if (bytes > MQK_MEMBER_MAX_BYTES)
	{
		if (log_due(&refusals_logged))
			ereport(LOG,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("Kafka JoinGroup of group \"%s\" from client \"%s\" refused: its protocols take %zu bytes, over %d",
							group, client_id ? client_id : "", bytes, MQK_MEMBER_MAX_BYTES)));
		return MQK_INVALID_REQUEST;
	}
	/* twice: the member's copy, and the leader's join answer that carries it */
	return groups_have_room(2 * bytes, "JoinGroup", group, client_id) ? MQK_NONE : MQK_COORDINATOR_NOT_AVAILABLE;
}

static Group *
new_group(const char *name)
{
	Group	   *g = MemoryContextAllocZero(groups_cxt, sizeof(Group));
	MemoryContext old = MemoryContextSwitchTo(groups_cxt);

	strlcpy(g->name, name, MQ_GROUP_NAME_LEN);
	g->state = G_EMPTY;
	g->held = 1;				/* the caller's MqGroupHostExternally */
	g->claimed_lease = MqClusterEnabled() ? MqClusterCurrentLease() : 0;
	groups = lappend(groups, g);
	MemoryContextSwitchTo(old);
	return g;
}

static bool
take_pending(Group *g, const char *id)
{
	ListCell   *lc;

	foreach(lc, g->pending)
	{
		PendingId  *p = lfirst(lc);

		if (strcmp(p->id, id) == 0)
		{
			g->pending = foreach_delete_current(g->pending, lc);
			pfree(p);
			return true;
		}
	}
	return false;
}

static Member *
add_member(Group *g, const char *id)
{
	Member	   *m = MemoryContextAllocZero(groups_cxt, sizeof(Member));
	MemoryContext old = MemoryContextSwitchTo(groups_cxt);

	strlcpy(m->id, id, MQ_MEMBER_ID_LEN);
	m->serial = next_serial++;
	serial_enter(m);
	initStringInfo(&m->reply);
	g->members = lappend(g->members, m);
	MemoryContextSwitchTo(old);
	return m;
}

static void
set_protocols(Member *m, Protocol *protocols, int n)
{
	for (int i = 0; i < m->nprotocols; i++)
	{
		pfree(m->protocols[i].name);
		pfree(m->protocols[i].metadata);
	}
	if (m->protocols)
		pfree(m->protocols);
	m->protocols = MemoryContextAlloc(groups_cxt, sizeof(Protocol) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		m->protocols[i].name = MemoryContextStrdup(groups_cxt, protocols[i].name);
		m->protocols[i].metadata = MemoryContextAlloc(groups_cxt, Max(protocols[i].len, 1));
		memcpy(m->protocols[i].metadata, protocols[i].metadata, protocols[i].len);
		m->protocols[i].len = protocols[i].len;
	}
	m->nprotocols = n;
}

/* who the member is, as DescribeGroups shows it: its last join's */
static void
set_client(Member *m, MqKafkaRequest *req)
{
	if (m->client_id)
		pfree(m->client_id);
	if (m->client_host)
		pfree(m->client_host);
	m->client_id = MemoryContextStrdup(groups_cxt, req->client_id ? req->client_id : "");
	/* Kafka's form, Java's InetAddress.toString() */
	m->client_host = MemoryContextAlloc(groups_cxt, strlen(req->client_host ? req->client_host : "") + 2);
	sprintf(m->client_host, "/%s", req->client_host ? req->client_host : "");
	if (m->joined_at == 0)
		m->joined_at = GetCurrentTimestamp();
}

/* the answer of a parked request, or park it again */
static MqKafkaOutcome
parked_answer(MqKafkaRequest *req, Member *m, StringInfo out, TimestampTz wake_at)
{
	TimestampTz now;

	if (m->reply_ready)
	{
		appendBinaryStringInfo(out, m->reply.data, m->reply.len);
		m->reply_ready = false;
		resetStringInfo(&m->reply);
		return MQK_RESPOND;
	}
	req->park_token = m->serial;
	req->park_group = true;
	/*
	 * A deadline already past (the answer taken by another connection of
	 * the member): in a second, not at once again, which would spin the
	 * loop; its answer or the member's end wakes it sooner
	 */
	now = GetCurrentTimestamp();
	req->wake_at = wake_at > now ? wake_at : TimestampTzPlusMilliseconds(now, SYNC_RECHECK_MS);
	return MQK_PARK;
}

MqKafkaOutcome
MqKafkaJoinGroup(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *group_id;
	int32		session_timeout;
	int32		rebalance_timeout;
	char	   *member_id;
	char	   *protocol_type;
	int32		nprotocols;
	Protocol   *protocols;
	Group	   *g;
	Member	   *m;
	int16		error;
	char		id[MQ_MEMBER_ID_LEN];

	group_id = MqKafkaReadString(r, false, NULL);
	session_timeout = MqKafkaReadInt32(r);
	rebalance_timeout = v >= 1 ? MqKafkaReadInt32(r) : session_timeout;
	member_id = MqKafkaReadString(r, false, NULL);
	if (v >= 5)
		(void) MqKafkaReadString(r, false, NULL);	/* group_instance_id */
	protocol_type = MqKafkaReadString(r, false, NULL);
	nprotocols = MqKafkaReadArrayLen(r, false, 6);
	if (nprotocols < 0 || r->failed)
		return MQK_CLOSE;
	protocols = palloc0(sizeof(Protocol) * (nprotocols + 1));
	for (int i = 0; i < nprotocols && !r->failed; i++)
	{
		const char *meta;

		protocols[i].name = MqKafkaReadString(r, false, NULL);
		meta = MqKafkaReadBytes(r, false, &protocols[i].len);
		protocols[i].metadata = (char *) meta;
		if (protocols[i].name == NULL || protocols[i].len < 0)
			return MQK_CLOSE;
	}
	if (r->failed || group_id == NULL || member_id == NULL)
		return MQK_CLOSE;

	if (groups_cxt == NULL)
		groups_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog kafka groups",
										   ALLOCSET_DEFAULT_SIZES);
	g = find_group(group_id);

	/* a parked join again: its answer, or park on */
	if (req->park_token != 0)
	{
		m = find_serial(g, req->park_token);
		if (m == NULL)
		{
			write_join(out, v, MQK_UNKNOWN_MEMBER_ID, -1, NULL, NULL, member_id, NULL, false);
			return MQK_RESPOND;
		}
		return parked_answer(req, m, out, g->deadline);
	}

	error = MqKafkaGroupAccess(group_id);
	if (error == MQK_NONE && g != NULL)
	{
		drop_if_lost(g);
		g = find_group(group_id);
	}
	/* on a cluster, a group joins at its coordinator, which claims it if free */
	if (error == MQK_NONE)
	{
		char	   *holder;

		error = MqKafkaCoordinatorError(group_id, g != NULL ? g->claimed_lease : 0,
										g == NULL ? MQK_CLAIM_FRESH : MQK_CLAIM_CACHED,
										&holder);
	}
	if (error == MQK_NONE &&
		(session_timeout < MIN_SESSION_TIMEOUT_MS || session_timeout > MAX_SESSION_TIMEOUT_MS))
		error = MQK_INVALID_SESSION_TIMEOUT;
	if (error == MQK_NONE &&
		(protocol_type == NULL || protocol_type[0] == '\0' || nprotocols == 0))
		error = MQK_INCONSISTENT_GROUP_PROTOCOL;
	/* before compatible(), whose work grows with the protocols' count */
	if (error == MQK_NONE)
		error = check_member_bytes(group_id, req->client_id, protocols, nprotocols);
	m = find_member(g, member_id);
	if (error == MQK_NONE && member_id[0] != '\0' && m == NULL &&
		(g == NULL || !take_pending(g, member_id)))
		error = MQK_UNKNOWN_MEMBER_ID;
	if (error == MQK_NONE && g != NULL &&
		!compatible(g, protocol_type, protocols, nprotocols, m))
		error = MQK_INCONSISTENT_GROUP_PROTOCOL;
	if (error == MQK_NONE && g == NULL)
	{
		bool		full;

		/* held for Kafka first, or refused if SQL sessions are members */
		if (MqGroupHostExternally(group_id, 1, &full))
			g = new_group(group_id);
		else if (full)
			error = refuse_full(group_id, req->client_id);
		else
		{
			if (log_due(&refusals_logged))
				ereport(LOG,
						(errmsg("Kafka JoinGroup of group \"%s\" from client \"%s\" refused: SQL sessions are members of the group",
								group_id, req->client_id ? req->client_id : ""),
						 errdetail("A group's members are SQL sessions or Kafka clients, not both at once; they share its committed offsets. Such refusals are logged once per 10 s.")));
			error = MQK_INCONSISTENT_GROUP_PROTOCOL;
		}
	}
	if (error != MQK_NONE)
	{
		write_join(out, v, error, -1, NULL, NULL, member_id, NULL, false);
		return MQK_RESPOND;
	}

	if (m == NULL)
	{
		if (member_id[0] == '\0')
		{
			new_member_id(id, req->client_id);
			if (v >= 4 && list_length(g->pending) >= MQK_MAX_PENDING_IDS)
			{
				/* joins that never come back: retriable, as a full listener */
				write_join(out, v, MQK_COORDINATOR_NOT_AVAILABLE, -1, NULL, NULL, member_id, NULL, false);
				return MQK_RESPOND;
			}
			if (v >= 4)
			{
				/* KIP-394: the client joins again with this id */
				PendingId  *p = MemoryContextAllocZero(groups_cxt, sizeof(PendingId));

				MemoryContext old = MemoryContextSwitchTo(groups_cxt);

				strlcpy(p->id, id, MQ_MEMBER_ID_LEN);
				p->expires = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), session_timeout);
				g->pending = lappend(g->pending, p);
				MemoryContextSwitchTo(old);
				update_hold(g);
				write_join(out, v, MQK_MEMBER_ID_REQUIRED, -1, NULL, NULL, id, NULL, false);
				return MQK_RESPOND;
			}
		}
		else
			strlcpy(id, member_id, sizeof(id));
		if (g->members == NIL)
		{
			if (g->protocol_type)
				pfree(g->protocol_type);
			g->protocol_type = MemoryContextStrdup(groups_cxt, protocol_type);
		}
		m = add_member(g, id);
		update_hold(g);
		prepare_rebalance(g);
	}
	else
		prepare_rebalance(g);	/* a member joining again, as after a rebalance */

	set_protocols(m, protocols, nprotocols);
	set_client(m, req);
	m->session_timeout = session_timeout;
	m->rebalance_timeout = Max(rebalance_timeout, session_timeout);
	m->last_seen = GetCurrentTimestamp();
	m->join_version = v;
	m->awaiting_join = true;
	m->reply_ready = false;
	resetStringInfo(&m->reply);
	/* a rebalance's deadline covers the timeouts of those that joined it */
	g->deadline = Max(g->deadline,
					  TimestampTzPlusMilliseconds(GetCurrentTimestamp(), m->rebalance_timeout));
	maybe_complete_join(g);
	return parked_answer(req, m, out, g->deadline);
}

/* ------------------------------------------------------------------------
 * SyncGroup
 * ------------------------------------------------------------------------ */

MqKafkaOutcome
MqKafkaSyncGroup(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *group_id;
	int32		generation;
	char	   *member_id;
	int32		nassign;
	char	  **assign_ids;
	const char **assign_data;
	int		   *assign_len;
	Group	   *g;
	Member	   *m;
	int16		error;

	group_id = MqKafkaReadString(r, false, NULL);
	generation = MqKafkaReadInt32(r);
	member_id = MqKafkaReadString(r, false, NULL);
	if (v >= 3)
		(void) MqKafkaReadString(r, false, NULL);	/* group_instance_id */
	nassign = MqKafkaReadArrayLen(r, false, 6);
	if (nassign < 0 || r->failed)
		return MQK_CLOSE;
	assign_ids = palloc0(sizeof(char *) * (nassign + 1));
	assign_data = palloc0(sizeof(char *) * (nassign + 1));
	assign_len = palloc0(sizeof(int) * (nassign + 1));
	for (int i = 0; i < nassign && !r->failed; i++)
	{
		assign_ids[i] = MqKafkaReadString(r, false, NULL);
		assign_data[i] = MqKafkaReadBytes(r, false, &assign_len[i]);
		if (assign_ids[i] == NULL)
			return MQK_CLOSE;
	}
	if (r->failed || group_id == NULL || member_id == NULL)
		return MQK_CLOSE;

	g = find_group(group_id);
	if (req->park_token != 0)
	{
		m = find_serial(g, req->park_token);
		if (m == NULL)
		{
			write_sync(out, v, MQK_UNKNOWN_MEMBER_ID, NULL, 0);
			return MQK_RESPOND;
		}
		return parked_answer(req, m, out,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SYNC_RECHECK_MS));
	}

	error = lookup_member(group_id, member_id, &g, &m);
	if (error == MQK_NONE && generation != g->generation)
		error = MQK_ILLEGAL_GENERATION;
	if (error == MQK_NONE && g->state == G_PREPARING)
		error = MQK_REBALANCE_IN_PROGRESS;
	if (error == MQK_NONE && strcmp(m->id, g->leader) == 0 && g->state != G_STABLE)
		error = check_assignment_bytes(group_id, req->client_id, assign_len, nassign);
	if (error != MQK_NONE)
	{
		write_sync(out, v, error, NULL, 0);
		return MQK_RESPOND;
	}
	m->last_seen = GetCurrentTimestamp();
	if (g->state == G_STABLE)
	{
		write_sync(out, v, MQK_NONE, m->assignment, m->assignment_len);
		return MQK_RESPOND;
	}

	/* CompletingRebalance: wait for the leader's assignments */
	m->awaiting_sync = true;
	m->sync_version = v;
	m->reply_ready = false;
	resetStringInfo(&m->reply);
	if (strcmp(m->id, g->leader) == 0)
	{
		ListCell   *lc;

		foreach(lc, g->members)
		{
			Member	   *o = lfirst(lc);

			for (int i = 0; i < nassign; i++)
				if (strcmp(assign_ids[i], o->id) == 0 && assign_len[i] > 0)
				{
					/* a member named twice: its last assignment */
					if (o->assignment)
						pfree(o->assignment);
					o->assignment = MemoryContextAlloc(groups_cxt, assign_len[i]);
					memcpy(o->assignment, assign_data[i], assign_len[i]);
					o->assignment_len = assign_len[i];
				}
		}
		g->state = G_STABLE;
		foreach(lc, g->members)
		{
			Member	   *o = lfirst(lc);

			if (!o->awaiting_sync)
				continue;
			o->awaiting_sync = false;
			resetStringInfo(&o->reply);
			{
				MemoryContext old = MemoryContextSwitchTo(groups_cxt);

				write_sync(&o->reply, o->sync_version, MQK_NONE, o->assignment,
						   o->assignment_len);
				MemoryContextSwitchTo(old);
			}
			answer_ready(o);
		}
	}
	return parked_answer(req, m, out,
						 TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SYNC_RECHECK_MS));
}

/* ------------------------------------------------------------------------
 * Heartbeat and LeaveGroup
 * ------------------------------------------------------------------------ */

MqKafkaOutcome
MqKafkaHeartbeat(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *group_id = MqKafkaReadString(r, false, NULL);
	int32		generation = MqKafkaReadInt32(r);
	char	   *member_id = MqKafkaReadString(r, false, NULL);
	Group	   *g;
	Member	   *m;
	int16		error;

	if (v >= 3)
		(void) MqKafkaReadString(r, false, NULL);	/* group_instance_id */
	if (r->failed || group_id == NULL || member_id == NULL)
		return MQK_CLOSE;
	error = lookup_member(group_id, member_id, &g, &m);
	if (error == MQK_NONE)
	{
		m->last_seen = GetCurrentTimestamp();
		if (generation != g->generation)
			error = MQK_ILLEGAL_GENERATION;
		else if (g->state == G_PREPARING)
			error = MQK_REBALANCE_IN_PROGRESS;
	}
	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	return MQK_RESPOND;
}

MqKafkaOutcome
MqKafkaLeaveGroup(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	char	   *group_id = MqKafkaReadString(r, false, NULL);
	char	   *member_id = MqKafkaReadString(r, false, NULL);
	Group	   *g;
	Member	   *m;
	int16		error;

	if (r->failed || group_id == NULL || member_id == NULL)
		return MQK_CLOSE;
	error = lookup_member(group_id, member_id, &g, &m);
	if (error == MQK_NONE)
	{
		remove_member(g, m, "left");
		if (g->members == NIL && g->pending == NIL)
			drop_if_unused(g);
		else
			update_hold(g);
	}
	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	return MQK_RESPOND;
}

/* ------------------------------------------------------------------------
 * A group as DescribeGroups, ListGroups and OffsetDelete see it
 * ------------------------------------------------------------------------ */

static const char *const state_names[] = {
	[G_EMPTY] = "Empty",
	[G_PREPARING] = "PreparingRebalance",
	[G_COMPLETING] = "CompletingRebalance",
	[G_STABLE] = "Stable"
};

bool
MqKafkaGroupInfoOf(const char *group, MqKafkaGroupInfo *info)
{
	Group	   *g = find_group(group);
	int			i = 0;
	ListCell   *lc;

	memset(info, 0, sizeof(*info));
	if (g == NULL)
		return false;
	info->state = state_names[g->state];
	info->protocol_type = g->protocol_type ? g->protocol_type : "";
	/* as Kafka: the protocol once a generation chose it, not while rebalancing */
	info->protocol = (g->state != G_PREPARING && g->protocol) ? g->protocol : "";
	info->generation = g->generation;
	info->nmembers = list_length(g->members);
	info->members = palloc0(sizeof(MqKafkaGroupMember) * Max(info->nmembers, 1));
	foreach(lc, g->members)
	{
		Member	   *m = lfirst(lc);
		MqKafkaGroupMember *out = &info->members[i++];
		Protocol   *p = g->protocol ? member_protocol(m, g->protocol) : NULL;

		if (p == NULL && m->nprotocols > 0)
			p = &m->protocols[0];	/* joined since: its first choice */
		out->member_id = m->id;
		out->client_id = m->client_id ? m->client_id : "";
		out->client_host = m->client_host ? m->client_host : "";
		out->metadata = p ? p->metadata : NULL;
		out->metadata_len = p ? p->len : 0;
		out->assignment = g->state == G_STABLE ? m->assignment : NULL;
		out->assignment_len = g->state == G_STABLE ? m->assignment_len : 0;
		out->joined_at = m->joined_at;
		out->last_seen = m->last_seen;
	}
	return true;
}

/* names[] sorted, by index: equal names side by side */
static const char **sort_names;

static int
index_cmp(const void *a, const void *b)
{
	return strcmp(sort_names[*(const int *) a], sort_names[*(const int *) b]);
}

/* the first of order[] (sorted by name) holding name, or -1 */
static int
first_named(const char **names, const int *order, int n, const char *name)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (strcmp(names[order[mid]], name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && strcmp(names[order[lo]], name) == 0 ? lo : -1;
}

void
MqKafkaGroupSubscribed(const char *group, const char **names, int n, bool *subscribed)
{
	MqKafkaGroupInfo info;
	MemoryContext cxt;
	MemoryContext old;
	int		   *order;

	memset(subscribed, 0, sizeof(bool) * n);
	if (n == 0 || !MqKafkaGroupInfoOf(group, &info))
		return;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog kafka subscriptions",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	order = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		order[i] = i;
	sort_names = names;
	qsort(order, n, sizeof(int), index_cmp);
	for (int i = 0; i < info.nmembers; i++)
	{
		ListCell   *lc;

		foreach(lc, MqKafkaSubscriptionTopics(info.members[i].metadata, info.members[i].metadata_len))
		{
			int			at = first_named(names, order, n, lfirst(lc));

			/* every request entry of that name at once, and once only */
			if (at < 0 || subscribed[order[at]])
				continue;
			for (int j = at; j < n && strcmp(names[order[j]], names[order[at]]) == 0; j++)
				subscribed[order[j]] = true;
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}
