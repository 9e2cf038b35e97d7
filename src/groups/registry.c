/*-------------------------------------------------------------------------
 *
 * registry.c
 *		Consumer group membership in shared memory: groups and their members
 *		keyed by member id, join, heartbeat and leave, rebalances with the
 *		range, roundrobin and sticky assignors, evictions, and the
 *		group evictor's pass.
 *
 * A member is named by its member id, a string as in Kafka, and hosted by
 * the process that joined it: that process refreshes it and its exit
 * removes every member it hosts, at once (a before_shmem_exit callback).  A
 * SQL session is one kind of member, "sql-<pid>" in each group it polls; a
 * process may host many, in one group or in several.  The assignment of
 * partitions to members is computed under the groups lock whenever
 * membership or subscriptions change: inline by the join that notices it,
 * or by the group evictor (workers/group_evictor.c) after it evicted a
 * member that stopped polling for max.poll.interval.ms.  Each rebalance
 * bumps the group's generation; partitions that keep their owner keep
 * flowing, which makes every assignor cooperative.
 *
 * Nothing here knows of positions or offsets: an assignment carries its
 * generation and which join of the member it belongs to (its membership),
 * and positions.c brings a member's positions in line with that.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"
#include "log/partition.h"
#include "groups/registry.h"

#define MQ_MAX_EVICTIONS	64		/* groups one transaction forces */

int			mqlog_max_groups_per_session = 8;
int			mqlog_kafka_max_groups = 256;

/*
 * A group member.  join_seq orders members by when they joined (the
 * assignors sort by it) and names the membership: a member that joins
 * again after an eviction or a leave gets a new one.
 */
typedef struct MqMember
{
	bool		in_use;
	Oid			dboid;
	char		group[MQ_GROUP_NAME_LEN];
	char		member_id[MQ_MEMBER_ID_LEN];
	uint64		join_seq;
	int			pid;			/* the process that hosts the member */
	int			assignor;
	int			max_poll_interval_ms;
	TimestampTz joined_at;
	TimestampTz last_poll;
	int			generation;		/* of the assignment below */
	int			ntopics;
	int32		topic_ids[MQ_MAX_SUB_TOPICS];
	int32		topic_parts[MQ_MAX_SUB_TOPICS];
	int			nassigned;
	MqTopicPart assigned[MQ_MAX_ASSIGNED];
} MqMember;

typedef struct MqGroupState
{
	bool		in_use;
	Oid			dboid;
	char		name[MQ_GROUP_NAME_LEN];
	int			generation;
	bool		needs_rebalance;
	Oid			owner;			/* whose group it is, while it has members (ownership.c) */
	int64		claimed_lease;	/* claimed in etcd under this lease (a group of
								 * replicated topics, cluster/group_claims.c) */
	int			external_pid;	/* a process coordinating it outside the
								 * registry (MqGroupHostExternally), or 0 */
	int			external_members;	/* how many members it has there */
} MqGroupState;

typedef struct MqGroupsShared
{
	LWLock	   *lock;
	uint64		next_join_seq;
	Latch	   *evictor_latch;
	int			nslots;			/* member slots */
	int			ngroups;		/* group slots: nslots + mqlog.kafka_max_groups */
	MqGroupState *groups;		/* ngroups */
	MqMember	members[FLEXIBLE_ARRAY_MEMBER];	/* nslots */
} MqGroupsShared;

static MqGroupsShared *gs = NULL;

/* ------------------------------------------------------------------------
 * Shared memory
 * ------------------------------------------------------------------------ */

/*
 * Every process may host mqlog.max_groups_per_session members, and the
 * tables are sized so that every possible backend can: one process joining
 * group after group cannot take the slots others need.  A group of SQL
 * members has at least one member slot, so they take at most this many
 * group slots; the groups the Kafka listener holds have no member slot
 * here (MqGroupHostExternally), and the group table has
 * mqlog.kafka_max_groups slots more for them, which is also the most the
 * listener may hold: SQL sessions always find the rest.
 */
static int
group_slots(void)
{
	return MaxBackends * mqlog_max_groups_per_session;
}

Size
MqGroupsExternalShmemSize(void)
{
	return mul_size(mqlog_kafka_max_groups, sizeof(MqGroupState));
}

Size
MqGroupsShmemSize(void)
{
	Size		sz = offsetof(MqGroupsShared, members);

	sz = add_size(sz, mul_size(group_slots(), sizeof(MqMember)));
	sz = add_size(sz, mul_size(group_slots(), sizeof(MqGroupState)));
	return add_size(sz, MqGroupsExternalShmemSize());
}

void
MqGroupsShmemInit(void)
{
	bool		found;

	gs = ShmemInitStruct("mqlog groups", MqGroupsShmemSize(), &found);
	if (!found)
	{
		memset(gs, 0, MqGroupsShmemSize());
		gs->lock = &(GetNamedLWLockTranche("mqlog_groups"))->lock;
		gs->next_join_seq = 1;
		gs->nslots = group_slots();
		gs->ngroups = gs->nslots + mqlog_kafka_max_groups;
	}
	gs->groups = (MqGroupState *) ((char *) gs + offsetof(MqGroupsShared, members) +
								   sizeof(MqMember) * gs->nslots);
}

static MqGroupState *
find_group(Oid dboid, const char *name, bool create)
{
	MqGroupState *free_slot = NULL;

	for (int i = 0; i < gs->ngroups; i++)
	{
		MqGroupState *g = &gs->groups[i];

		if (g->in_use && g->dboid == dboid && strcmp(g->name, name) == 0)
			return g;
		if (!g->in_use && free_slot == NULL)
			free_slot = g;
	}
	if (!create)
		return NULL;
	if (free_slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many active consumer groups")));
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->in_use = true;
	free_slot->dboid = dboid;
	strlcpy(free_slot->name, name, MQ_GROUP_NAME_LEN);
	return free_slot;
}

static bool
is_member_of(MqMember *m, MqGroupState *g)
{
	return m->in_use && m->dboid == g->dboid && strcmp(m->group, g->name) == 0;
}

static MqMember *
find_member(Oid dboid, const char *group, const char *member_id)
{
	for (int i = 0; i < gs->nslots; i++)
	{
		MqMember   *m = &gs->members[i];

		if (m->in_use && m->dboid == dboid && strcmp(m->member_id, member_id) == 0 &&
			strcmp(m->group, group) == 0)
			return m;
	}
	return NULL;
}

static int
group_member_count(MqGroupState *g)
{
	int			n = 0;

	for (int i = 0; i < gs->nslots; i++)
		if (is_member_of(&gs->members[i], g))
			n++;
	return n;
}

/* ------------------------------------------------------------------------
 * Assignment
 * ------------------------------------------------------------------------ */

static bool
subscribes(MqMember *m, int32 topic_id)
{
	for (int i = 0; i < m->ntopics; i++)
		if (m->topic_ids[i] == topic_id)
			return true;
	return false;
}

static void
assign_to(MqMember *m, int32 topic_id, int32 partition)
{
	if (m->nassigned >= MQ_MAX_ASSIGNED)
		return;					/* documented limit; the partition waits */
	m->assigned[m->nassigned].topic_id = topic_id;
	m->assigned[m->nassigned].partition = partition;
	m->nassigned++;
}

/* is (topic, partition) in the list? */
bool
MqTopicPartListed(const MqTopicPart *tp, int n, int32 topic_id, int32 partition)
{
	for (int i = 0; i < n; i++)
		if (tp[i].topic_id == topic_id && tp[i].partition == partition)
			return true;
	return false;
}

static int
cmp_topic_part(const void *a, const void *b)
{
	const MqTopicPart *x = a;
	const MqTopicPart *y = b;

	if (x->topic_id != y->topic_id)
		return (x->topic_id > y->topic_id) - (x->topic_id < y->topic_id);
	return (x->partition > y->partition) - (x->partition < y->partition);
}

/*
 * A list sorted for MqTopicPartInSorted: for a caller that looks up many
 * pairs in one list (hundreds of positions against an assignment of as
 * many partitions), where MqTopicPartListed would be quadratic.
 */
void
MqTopicPartSort(MqTopicPart *tp, int n)
{
	qsort(tp, n, sizeof(MqTopicPart), cmp_topic_part);
}

bool
MqTopicPartInSorted(const MqTopicPart *sorted, int n, int32 topic_id, int32 partition)
{
	MqTopicPart key = {topic_id, partition};

	return bsearch(&key, sorted, n, sizeof(MqTopicPart), cmp_topic_part) != NULL;
}

static int
cmp_join_seq(const void *a, const void *b)
{
	uint64		x = (*(MqMember *const *) a)->join_seq;
	uint64		y = (*(MqMember *const *) b)->join_seq;

	return (x > y) - (x < y);
}

/*
 * Recompute a group's assignment.  Caller holds gs->lock exclusively.  The
 * assignor is the oldest member's, as Kafka lets the group leader choose.
 */
static void
rebalance(MqGroupState *g)
{
	MqMember  **mem = palloc(sizeof(MqMember *) * gs->nslots);
	int			nmem = 0;
	MqTopicPart *all;
	int			nall = 0,
				maxall = 64;
	MqTopicPart **prev;
	int		   *nprev;
	int			assignor;

	for (int i = 0; i < gs->nslots; i++)
		if (is_member_of(&gs->members[i], g))
			mem[nmem++] = &gs->members[i];
	g->generation++;
	g->needs_rebalance = false;
	if (nmem == 0)
	{
		pfree(mem);
		return;
	}
	qsort(mem, nmem, sizeof(MqMember *), cmp_join_seq);
	assignor = mem[0]->assignor;

	/* every subscribed partition, at the largest partition count seen */
	all = palloc(sizeof(MqTopicPart) * maxall);
	for (int i = 0; i < nmem; i++)
		for (int t = 0; t < mem[i]->ntopics; t++)
		{
			int32		tid = mem[i]->topic_ids[t];
			int			parts = mem[i]->topic_parts[t];

			for (int j = 0; j < nmem; j++)
				for (int u = 0; u < mem[j]->ntopics; u++)
					if (mem[j]->topic_ids[u] == tid)
						parts = Max(parts, mem[j]->topic_parts[u]);
			for (int p = 0; p < parts; p++)
			{
				bool		dup = false;

				for (int k = 0; k < nall && !dup; k++)
					dup = (all[k].topic_id == tid && all[k].partition == p);
				if (dup)
					continue;
				if (nall == maxall)
				{
					maxall *= 2;
					all = repalloc(all, sizeof(MqTopicPart) * maxall);
				}
				all[nall].topic_id = tid;
				all[nall].partition = p;
				nall++;
			}
		}
	qsort(all, nall, sizeof(MqTopicPart), cmp_topic_part);

	prev = palloc(sizeof(MqTopicPart *) * nmem);
	nprev = palloc(sizeof(int) * nmem);
	for (int i = 0; i < nmem; i++)
	{
		prev[i] = palloc(sizeof(MqTopicPart) * Max(mem[i]->nassigned, 1));
		memcpy(prev[i], mem[i]->assigned, sizeof(MqTopicPart) * mem[i]->nassigned);
		nprev[i] = mem[i]->nassigned;
		mem[i]->nassigned = 0;
	}

	if (assignor == MQ_ASSIGN_RANGE)
	{
		/* per topic, contiguous ranges over the members subscribing to it */
		for (int k = 0; k < nall;)
		{
			int32		tid = all[k].topic_id;
			int			nparts = 0,
						nsubs = 0,
						idx = 0;

			while (k + nparts < nall && all[k + nparts].topic_id == tid)
				nparts++;
			for (int i = 0; i < nmem; i++)
				if (subscribes(mem[i], tid))
					nsubs++;
			for (int i = 0; i < nmem && nsubs > 0; i++)
			{
				int			share;

				if (!subscribes(mem[i], tid))
					continue;
				share = nparts / nsubs + (idx < nparts % nsubs ? 1 : 0);
				for (int s = 0; s < share; s++)
					assign_to(mem[i], tid, all[k + (nparts / nsubs) * idx + Min(idx, nparts % nsubs) + s].partition);
				idx++;
			}
			k += nparts;
		}
	}
	else if (assignor == MQ_ASSIGN_ROUNDROBIN)
	{
		int			next = 0;

		for (int k = 0; k < nall; k++)
			for (int tries = 0; tries < nmem; tries++)
			{
				MqMember   *m = mem[(next + tries) % nmem];

				if (subscribes(m, all[k].topic_id))
				{
					assign_to(m, all[k].topic_id, all[k].partition);
					next = (next + tries + 1) % nmem;
					break;
				}
			}
	}
	else
	{
		/*
		 * sticky: keep what each member had while it stays within its fair
		 * share, then hand the rest to the least loaded subscribers.
		 */
		int			cap = (nall + nmem - 1) / nmem;
		bool	   *taken = palloc0(sizeof(bool) * nall);

		for (int i = 0; i < nmem; i++)
			for (int k = 0; k < nall; k++)
				if (!taken[k] && mem[i]->nassigned < cap &&
					subscribes(mem[i], all[k].topic_id) &&
					MqTopicPartListed(prev[i], nprev[i], all[k].topic_id, all[k].partition))
				{
					assign_to(mem[i], all[k].topic_id, all[k].partition);
					taken[k] = true;
				}
		for (int k = 0; k < nall; k++)
		{
			MqMember   *best = NULL;

			if (taken[k])
				continue;
			for (int i = 0; i < nmem; i++)
				if (subscribes(mem[i], all[k].topic_id) &&
					(best == NULL || mem[i]->nassigned < best->nassigned))
					best = mem[i];
			if (best)
				assign_to(best, all[k].topic_id, all[k].partition);
		}
	}

	for (int i = 0; i < nmem; i++)
		mem[i]->generation = g->generation;
	ConditionVariableBroadcast(MqDataArrivedCV());
}

/* Remove one member slot; caller holds the lock exclusively. */
static void
remove_member(MqMember *m)
{
	MqGroupState *g = find_group(m->dboid, m->group, false);

	m->in_use = false;
	if (g)
	{
		if (group_member_count(g) == 0)
			g->in_use = g->external_pid != 0;
		else
			g->needs_rebalance = true;
	}
}

/*
 * The evictor's pass: evict members that stopped polling, rebalance groups
 * that need it.  Returns how many members were evicted.
 */
int
MqGroupsEvictIdle(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int			evicted = 0;

	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	for (int i = 0; i < gs->nslots; i++)
	{
		MqMember   *m = &gs->members[i];

		if (m->in_use &&
			TimestampDifferenceExceeds(m->last_poll, now, m->max_poll_interval_ms))
		{
			elog(LOG, "mqlog: evicting member %s (pid %d) of group \"%s\": no poll for %d ms",
				 m->member_id, m->pid, m->group, m->max_poll_interval_ms);
			remove_member(m);
			evicted++;
		}
	}
	for (int i = 0; i < gs->ngroups; i++)
		if (gs->groups[i].in_use && gs->groups[i].needs_rebalance)
			rebalance(&gs->groups[i]);
	LWLockRelease(gs->lock);
	return evicted;
}

void
MqGroupsSetEvictorLatch(Latch *latch)
{
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	gs->evictor_latch = latch;
	LWLockRelease(gs->lock);
}

/* ------------------------------------------------------------------------
 * Evictions at commit
 * ------------------------------------------------------------------------ */

/*
 * Groups whose members a forced mq_reset_offsets or mq_delete_group of this
 * transaction evicts when it commits: they rejoin at their next poll (a
 * waiting poll at once) and start again from the new committed offsets;
 * a transaction of theirs that polled under the old membership cannot
 * commit.  Evicting earlier would let them reload the old offsets.  The
 * list is the transaction's, whichever member it acts for.
 */
typedef struct PendingEviction
{
	char		group[MQ_GROUP_NAME_LEN];
	SubTransactionId subid;
} PendingEviction;

static PendingEviction *evictions = NULL;
static int	nevictions = 0;

void
MqGroupEvictAtCommit(const char *group)
{
	if (evictions == NULL)
		evictions = MemoryContextAlloc(TopMemoryContext, sizeof(PendingEviction) * MQ_MAX_EVICTIONS);
	for (int i = 0; i < nevictions; i++)
		if (strcmp(evictions[i].group, group) == 0)
			return;
	if (nevictions == MQ_MAX_EVICTIONS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a transaction may force at most %d consumer groups", MQ_MAX_EVICTIONS)));
	strlcpy(evictions[nevictions].group, group, MQ_GROUP_NAME_LEN);
	evictions[nevictions].subid = GetCurrentSubTransactionId();
	nevictions++;
}

static void
apply_evictions(void)
{
	if (nevictions == 0 || gs == NULL)
		return;
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	for (int e = 0; e < nevictions; e++)
		for (int i = 0; i < gs->nslots; i++)
		{
			MqMember   *m = &gs->members[i];

			if (m->in_use && m->dboid == MyDatabaseId && strcmp(m->group, evictions[e].group) == 0)
				remove_member(m);
		}
	LWLockRelease(gs->lock);
	ConditionVariableBroadcast(MqDataArrivedCV());
}

static void
registry_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		apply_evictions();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		nevictions = 0;
}

/* a subtransaction's evictions go with it, or to its parent */
static void
registry_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	int			keep = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < nevictions; i++)
	{
		if (evictions[i].subid == mySubid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
				continue;
			evictions[i].subid = parentSubid;
		}
		evictions[keep++] = evictions[i];
	}
	nevictions = keep;
}

void
MqGroupsInitCallbacks(void)
{
	RegisterXactCallback(registry_xact_callback, NULL);
	RegisterSubXactCallback(registry_subxact_callback, NULL);
}

/* ------------------------------------------------------------------------
 * The hosting process
 * ------------------------------------------------------------------------ */

static bool exit_hook_set = false;

/* every member this process hosts goes when it exits */
static void
groups_exit(int code, Datum arg)
{
	if (gs == NULL)
		return;
	LWLockReleaseAll();
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	for (int i = 0; i < gs->nslots; i++)
		if (gs->members[i].in_use && gs->members[i].pid == MyProcPid)
			remove_member(&gs->members[i]);
	for (int i = 0; i < gs->ngroups; i++)
		if (gs->groups[i].in_use && gs->groups[i].external_pid == MyProcPid)
			gs->groups[i].in_use = false;
	if (gs->evictor_latch)
		SetLatch(gs->evictor_latch);
	LWLockRelease(gs->lock);
	ConditionVariableBroadcast(MqDataArrivedCV());
}

void
MqGroupsCheckReady(void)
{
	if (gs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mqlog must be loaded via shared_preload_libraries")));
	if (!exit_hook_set)
	{
		before_shmem_exit(groups_exit, 0);
		exit_hook_set = true;
	}
}

/* ------------------------------------------------------------------------
 * Members
 * ------------------------------------------------------------------------ */

static void
copy_assignment(MqGroupState *g, MqMember *m, MqAssignment *a)
{
	a->owner = g ? g->owner : InvalidOid;
	if (m == NULL)
	{
		a->membership = 0;
		a->generation = -1;
		a->nparts = 0;
		return;
	}
	a->membership = m->join_seq;
	a->generation = m->generation;
	a->nparts = m->nassigned;
	memcpy(a->parts, m->assigned, sizeof(MqTopicPart) * m->nassigned);
}

/* a member of a group of this database, with the lock taken; NULL if none */
static MqMember *
lock_member(const char *group, const char *member_id, LWLockMode mode)
{
	LWLockAcquire(gs->lock, mode);
	return find_member(MyDatabaseId, group, member_id);
}

bool
MqGroupAssignment(const char *group, const char *member_id, MqAssignment *assignment)
{
	MqMember   *m = lock_member(group, member_id, LW_SHARED);

	copy_assignment(find_group(MyDatabaseId, group, false), m, assignment);
	LWLockRelease(gs->lock);
	return m != NULL;
}

/* the owner kept with a live group's members, or InvalidOid */
Oid
MqGroupLiveOwner(const char *group)
{
	MqGroupState *g;
	Oid			owner = InvalidOid;

	LWLockAcquire(gs->lock, LW_SHARED);
	g = find_group(MyDatabaseId, group, false);
	if (g)
		owner = g->owner;
	LWLockRelease(gs->lock);
	return owner;
}

/* a join that fails gives back the group slot find_group made for it */
static void
drop_if_empty(MqGroupState *g)
{
	if (group_member_count(g) == 0 && g->external_pid == 0)
		g->in_use = false;
}

/* a slot of its own for a member this process does not host yet */
static MqMember *
new_member(MqGroupState *g, const char *member_id, TimestampTz now)
{
	MqMember   *m = NULL;
	int			mine = 0;

	for (int i = 0; i < gs->nslots; i++)
		if (gs->members[i].in_use && gs->members[i].pid == MyProcPid)
			mine++;
	if (mine >= mqlog_max_groups_per_session)
	{
		drop_if_empty(g);
		LWLockRelease(gs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("this session is a member of too many consumer groups"),
				 errdetail("A session may be a member of at most %d groups (mqlog.max_groups_per_session).",
						   mqlog_max_groups_per_session),
				 errhint("Call mq_leave() for the groups this session no longer polls.")));
	}
	for (int i = 0; i < gs->nslots && m == NULL; i++)
		if (!gs->members[i].in_use)
			m = &gs->members[i];
	if (m == NULL)
	{
		drop_if_empty(g);
		LWLockRelease(gs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many consumer group members")));
	}
	memset(m, 0, offsetof(MqMember, assigned));
	m->in_use = true;
	m->dboid = MyDatabaseId;
	strlcpy(m->group, g->name, MQ_GROUP_NAME_LEN);
	strlcpy(m->member_id, member_id, MQ_MEMBER_ID_LEN);
	m->join_seq = gs->next_join_seq++;
	m->pid = MyProcPid;
	m->joined_at = now;
	return m;
}

/*
 * Join or refresh a membership; rebalance inline if anything changed.  The
 * caller's access check (see MqGroupJoinAs) was made against the group's
 * durable owner, or against seen_owner; if the group's live owner is a role
 * that check did not cover (another role's session created the group
 * meanwhile), nothing is done, assignment->owner says who it is, and false
 * is returned, to check again.
 */
static bool
join_group(const char *group, const char *member_id, MqTopic **topics, int ntopics,
		   const MqMemberConfig *config, bool durable, Oid seen_owner, Oid owner,
		   MqAssignment *assignment)
{
	MqMember   *m;
	MqGroupState *g;
	bool		changed = false;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	g = find_group(MyDatabaseId, group, true);
	if (!durable && OidIsValid(g->owner) && g->owner != seen_owner && g->owner != owner)
	{
		assignment->owner = g->owner;
		LWLockRelease(gs->lock);
		return false;
	}
	if (g->external_pid != 0)
	{
		int			host = g->external_pid;
		int			n = g->external_members;

		LWLockRelease(gs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("consumer group \"%s\" has %d member%s that %s Kafka client%s", group,
						n, n == 1 ? "" : "s", n == 1 ? "is a" : "are", n == 1 ? "" : "s"),
				 errdetail("The Kafka listener (process %d) coordinates the group while it has members there; "
						   "a group's members are SQL sessions or Kafka clients, not both at once.", host),
				 errhint("Use another group name, or stop the group's Kafka consumers first: both kinds share the group's committed offsets.")));
	}
	if (!OidIsValid(g->owner))
		g->owner = owner;
	m = find_member(MyDatabaseId, group, member_id);
	if (m != NULL && m->pid != MyProcPid)
	{
		int			host = m->pid;

		LWLockRelease(gs->lock);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("member \"%s\" of consumer group \"%s\" is hosted by another process",
						member_id, group),
				 errdetail("Process %d hosts it.", host)));
	}
	if (m == NULL)
	{
		m = new_member(g, member_id, now);
		m->assignor = config->assignor;
		changed = true;
	}
	m->max_poll_interval_ms = config->max_poll_interval_ms;
	m->last_poll = now;
	if (m->ntopics != ntopics)
		changed = true;
	for (int i = 0; i < ntopics; i++)
	{
		if (i < m->ntopics &&
			(m->topic_ids[i] != topics[i]->topic_id || m->topic_parts[i] != topics[i]->partitions))
			changed = true;
		m->topic_ids[i] = topics[i]->topic_id;
		m->topic_parts[i] = topics[i]->partitions;
	}
	m->ntopics = ntopics;
	if (changed)
		g->needs_rebalance = true;
	if (g->needs_rebalance)
		rebalance(g);
	copy_assignment(g, m, assignment);
	LWLockRelease(gs->lock);
	return true;
}

/*
 * A group of replicated topics runs on one node of the cluster at a time
 * (cluster/group_claims.c): the first join here under this node's lease
 * claims it in etcd; a join where another node holds it is refused.
 * Returns the lease it is claimed under, 0 for a group with no replicated
 * topic (or no cluster).
 */
static int64
claim_for_cluster(const char *group, MqTopic **topics, int ntopics)
{
	bool		replicated = false;
	int64		lease;
	MqGroupState *g;
	bool		claimed;
	char	   *holder;

	for (int i = 0; i < ntopics; i++)
		replicated |= topics[i]->replicas != NULL;
	if (!replicated || !MqClusterEnabled())
		return 0;
	lease = MqClusterCurrentLease();
	if (lease == 0)
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_COORDINATOR),
				 errmsg("node \"%s\" cannot coordinate consumer group \"%s\" now", MqClusterNodeName(), group),
				 errdetail("The group reads replicated topics, and this node holds no lease in etcd (it is starting, or cannot reach etcd)."),
				 errhint("Retry in a moment.")));
	LWLockAcquire(gs->lock, LW_SHARED);
	g = find_group(MyDatabaseId, group, false);
	claimed = g != NULL && g->claimed_lease == lease;
	LWLockRelease(gs->lock);
	if (claimed)
		return lease;
	holder = MqClusterClaimGroup(group, lease);
	if (holder != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_COORDINATOR),
				 errmsg("consumer group \"%s\" is coordinated on node \"%s\"", group, holder),
				 errdetail("A group of replicated topics has its members on one node at a time: the first where a member joined, while it has members there."),
				 errhint("Poll on node \"%s\"; mqlog.nodes says how to reach it.", holder)));
	return lease;
}

/*
 * The names of the groups with members here, in any database (char *):
 * SQL sessions, or Kafka clients the listener holds the group for
 * (MqGroupHostExternally), whose claims the cluster worker keeps
 */
List *
MqGroupsWithMembers(void)
{
	List	   *names = NIL;

	LWLockAcquire(gs->lock, LW_SHARED);
	for (int i = 0; i < gs->ngroups; i++)
		if (gs->groups[i].in_use &&
			(gs->groups[i].external_pid != 0 || group_member_count(&gs->groups[i]) > 0))
			names = lappend(names, pstrdup(gs->groups[i].name));
	LWLockRelease(gs->lock);
	return names;
}

/* Kafka's rule, kept short enough for the member table (MqGroupState) */
void
MqCheckGroupName(const char *group)
{
	if (group[0] == '\0' || strlen(group) >= MQ_GROUP_NAME_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid consumer group name \"%s\"", group),
				 errdetail("A group name is 1 to %d bytes long.", MQ_GROUP_NAME_LEN - 1)));
}

/*
 * A join: what it checks before it takes the groups lock, for a group of
 * replicated topics its claim in the cluster, then the membership (see
 * registry.h for the access check it relies on).
 */
bool
MqGroupJoinAs(const char *group, const char *member_id, MqTopic **topics, int ntopics,
			  const MqMemberConfig *config, bool durable, Oid seen_owner, Oid owner,
			  MqAssignment *assignment)
{
	int64		lease;

	MqGroupsCheckReady();		/* the host's exit must remove the member */
	MqCheckGroupName(group);
	if (member_id[0] == '\0' || strlen(member_id) >= MQ_MEMBER_ID_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid consumer group member id \"%s\"", member_id),
				 errdetail("A member id is 1 to %d bytes long.", MQ_MEMBER_ID_LEN - 1)));
	if (ntopics > MQ_MAX_SUB_TOPICS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a member may subscribe to at most %d topics", MQ_MAX_SUB_TOPICS)));
	lease = claim_for_cluster(group, topics, ntopics);
	if (!join_group(group, member_id, topics, ntopics, config, durable, seen_owner, owner,
					assignment))
		return false;
	if (lease != 0)
	{
		MqGroupState *g;

		LWLockAcquire(gs->lock, LW_EXCLUSIVE);
		if ((g = find_group(MyDatabaseId, group, false)) != NULL)
			g->claimed_lease = lease;
		LWLockRelease(gs->lock);
	}
	return true;
}

void
MqGroupHeartbeat(const char *group, const char *member_id)
{
	MqMember   *m = lock_member(group, member_id, LW_SHARED);

	if (m && m->pid == MyProcPid)
		m->last_poll = GetCurrentTimestamp();	/* only the hosting process writes it */
	LWLockRelease(gs->lock);
}

/* leave: the member goes, the others are rebalanced at once */
bool
MqGroupRemoveMember(const char *group, const char *member_id)
{
	MqMember   *m = lock_member(group, member_id, LW_EXCLUSIVE);

	if (m)
	{
		MqGroupState *g;

		remove_member(m);
		g = find_group(MyDatabaseId, group, false);
		if (g && g->needs_rebalance)
			rebalance(g);
	}
	LWLockRelease(gs->lock);
	return m != NULL;
}

int
MqGroupMemberCount(const char *group)
{
	MqGroupState *g;
	int			n = 0;

	LWLockAcquire(gs->lock, LW_SHARED);
	g = find_group(MyDatabaseId, group, false);
	if (g)
		n = group_member_count(g) + g->external_members;
	LWLockRelease(gs->lock);
	return n;
}

/*
 * A group coordinated by this process outside the registry (the Kafka
 * listener's groups, kafka/api_groups.c), with nmembers members there;
 * 0 lets it go.  While it is held, SQL sessions cannot join the group and
 * resets and deletes count its members as active; it is let go when this
 * process exits, too.  false: the group has members here (SQL sessions)
 * or another process coordinates it, and nothing is changed.
 */
bool
MqGroupHostExternally(const char *group, int nmembers, bool *full)
{
	MqGroupState *g;
	bool		ok = true;

	*full = false;
	MqGroupsCheckReady();		/* this process's exit lets the group go */
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	g = find_group(MyDatabaseId, group, false);
	if (g == NULL && nmembers > 0)
	{
		int			held = 0;

		for (int i = 0; i < gs->ngroups; i++)
			if (gs->groups[i].in_use && gs->groups[i].external_pid == MyProcPid)
				held++;
		if (held >= mqlog_kafka_max_groups)
		{
			LWLockRelease(gs->lock);
			*full = true;
			return false;
		}
		g = find_group(MyDatabaseId, group, true);	/* an ERROR releases the lock */
	}
	if (g == NULL)
		ok = true;
	else if (group_member_count(g) > 0 ||
			 (g->external_pid != 0 && g->external_pid != MyProcPid))
		ok = false;
	else if (nmembers > 0)
	{
		g->external_pid = MyProcPid;
		g->external_members = nmembers;
		if (!OidIsValid(g->owner))
			g->owner = GetUserId();
	}
	else
	{
		g->external_pid = 0;
		g->external_members = 0;
		g->in_use = false;
	}
	LWLockRelease(gs->lock);
	return ok;
}

MqExternalGroupInfo *
MqGroupsHostedExternally(bool all_databases, int *ngroups)
{
	MqExternalGroupInfo *info;
	int			n = 0;

	*ngroups = 0;
	if (gs == NULL)
		return NULL;
	info = palloc(sizeof(MqExternalGroupInfo) * gs->ngroups);
	LWLockAcquire(gs->lock, LW_SHARED);
	for (int i = 0; i < gs->ngroups; i++)
	{
		MqGroupState *g = &gs->groups[i];

		if (!g->in_use || g->external_pid == 0 || (g->dboid != MyDatabaseId && !all_databases))
			continue;
		info[n].dboid = g->dboid;
		strlcpy(info[n].group, g->name, MQ_GROUP_NAME_LEN);
		info[n].pid = g->external_pid;
		info[n].members = g->external_members;
		n++;
	}
	LWLockRelease(gs->lock);
	*ngroups = n;
	return info;
}

/* is the group coordinated outside the registry (MqGroupHostExternally)? */
static bool
hosted_externally(const char *group)
{
	MqGroupState *g;
	bool		external;

	LWLockAcquire(gs->lock, LW_SHARED);
	g = find_group(MyDatabaseId, group, false);
	external = g != NULL && g->external_pid != 0;
	LWLockRelease(gs->lock);
	return external;
}

/*
 * What changes a group's offsets under its members (a reset, a delete)
 * refuses while it has any, unless forced; returns how many it has, which
 * the caller, once it checked that the role may force the group, evicts
 * when the transaction commits (MqGroupEvictAtCommit).
 */
int
MqGroupRefuseIfActive(const char *group, bool force, const char *what)
{
	int			n = MqGroupMemberCount(group);

	if (n > 0 && force && hosted_externally(group))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot %s of consumer group \"%s\" while it has %d Kafka member%s",
						what, group, n, n == 1 ? "" : "s"),
				 errdetail("force evicts SQL members only; the Kafka listener coordinates this group."),
				 errhint("Stop the group's Kafka consumers first.")));
	if (n > 0 && !force)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot %s of consumer group \"%s\" while it has %d active member%s",
						what, group, n, n == 1 ? "" : "s"),
				 errhint("Stop the consumers (or call mq_leave), or pass force => true.")));
	return n;
}

MqMemberInfo *
MqGroupMembers(bool all_databases, int *nmembers)
{
	MqMemberInfo *info;
	int			n = 0;

	if (gs == NULL)
	{
		*nmembers = 0;
		return NULL;
	}
	/*
	 * Room for the members there are, not for every slot: an entry takes
	 * about 4 kB, and a Kafka request's partitions may each ask (an
	 * OffsetDelete naming one partition 1,000 times took 4 GB here).
	 */
	LWLockAcquire(gs->lock, LW_SHARED);
	for (int i = 0; i < gs->nslots; i++)
		if (gs->members[i].in_use &&
			(gs->members[i].dboid == MyDatabaseId || all_databases))
			n++;
	info = palloc(sizeof(MqMemberInfo) * Max(n, 1));
	n = 0;
	for (int i = 0; i < gs->nslots; i++)
	{
		MqMember   *m = &gs->members[i];
		MqGroupState *g;
		MqMemberInfo *out;

		if (!m->in_use || (m->dboid != MyDatabaseId && !all_databases))
			continue;
		g = find_group(m->dboid, m->group, false);
		out = &info[n++];
		out->dboid = m->dboid;
		strlcpy(out->group, m->group, MQ_GROUP_NAME_LEN);
		strlcpy(out->member_id, m->member_id, MQ_MEMBER_ID_LEN);
		out->pid = m->pid;
		out->assignor = m->assignor;
		out->generation = m->generation;
		out->owner = g ? g->owner : InvalidOid;
		out->joined_at = m->joined_at;
		out->last_poll = m->last_poll;
		out->max_poll_interval_ms = m->max_poll_interval_ms;
		out->ntopics = m->ntopics;
		memcpy(out->topic_ids, m->topic_ids, sizeof(int32) * m->ntopics);
		out->nassigned = m->nassigned;
		memcpy(out->assigned, m->assigned, sizeof(MqTopicPart) * m->nassigned);
	}
	LWLockRelease(gs->lock);
	*nmembers = n;
	return info;
}

int
MqGroupSlotsInUse(int *groups)
{
	int			nmembers = 0;
	int			ngroups = 0;

	if (gs == NULL)
	{
		*groups = 0;
		return 0;
	}
	LWLockAcquire(gs->lock, LW_SHARED);
	for (int i = 0; i < gs->nslots; i++)
		nmembers += gs->members[i].in_use ? 1 : 0;
	for (int i = 0; i < gs->ngroups; i++)
		ngroups += gs->groups[i].in_use ? 1 : 0;
	LWLockRelease(gs->lock);
	*groups = ngroups;
	return nmembers;
}

/*
 * At commit, as a forced reset evicts: a member removed at once would be
 * rolled back by nothing, and one that polled under the old membership in
 * a transaction still open must not commit it.
 */
int
MqGroupRemoveMembers(const char *group)
{
	int			n;

	if (hosted_externally(group))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("consumer group \"%s\" is coordinated by the Kafka listener", group),
				 errdetail("Its members are Kafka clients, which the listener holds, not member slots of SQL sessions."),
				 errhint("Stop the group's Kafka consumers; the listener lets the group go when its last member leaves.")));
	n = MqGroupMemberCount(group);
	if (n > 0)
		MqGroupEvictAtCommit(group);
	return n;
}
