/*-------------------------------------------------------------------------
 *
 * groups.c
 *		Consumer groups: membership and assignment in shared memory,
 *		mq_poll, mq_commit, positioning, and the group coordinator.
 *
 * A member is a session.  It joins on its first mq_poll and leaves with
 * mq_leave or when its backend exits (an exit callback, so at once).  The
 * assignment of partitions to members is computed under the groups lock
 * whenever membership or subscriptions change: inline by the poll that
 * notices it, or by the coordinator worker (coordinator.c) after it evicted
 * a member that stopped polling for max.poll.interval.ms.  Each rebalance
 * bumps the group's generation; partitions that keep their owner keep
 * flowing, which makes every assignor cooperative.
 *
 * Positions are per session (backend-local).  Committed offsets live in the
 * ordinary table mqlog.committed_offset, written in the caller's
 * transaction.  Exactly-once for consume-transform-produce rests on two
 * fences in mq_commit, both failing with SQLSTATE 40001 so that a client
 * retries the transaction:
 *	- ownership: the partition must still be assigned to this session;
 *	- no concurrent commit: the row must still hold the offset this session
 *	  started from (UPDATE ... WHERE committed_offset = expected).
 * and on a lock per (group, partition), in the advisory lock space with a
 * field of its own: a commit takes it in exclusive mode, before it checks
 * ownership, and keeps it to the end of its transaction; a member that
 * takes a partition over takes it in share mode and lets it go at once,
 * before it reads the committed offset.  So the new owner waits for a
 * commit of the previous owner that is in flight instead of reading past
 * it, and a previous owner that checks ownership after the handover fails.  A transaction that polled a partition it then lost fails
 * its commit too, since its work includes records now owned by another.
 * A rolled-back transaction rewinds the positions it moved, so the same
 * session is handed the same records again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "common/hashfn.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "store/wal.h"
#include "mqlog.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "groups/groups.h"

PG_FUNCTION_INFO_V1(mq_poll);
PG_FUNCTION_INFO_V1(mq_commit);
PG_FUNCTION_INFO_V1(mq_commit_offset);
PG_FUNCTION_INFO_V1(mq_leave);
PG_FUNCTION_INFO_V1(mq_seek);
PG_FUNCTION_INFO_V1(mq_reset_offsets);
PG_FUNCTION_INFO_V1(mq_delete_group);
PG_FUNCTION_INFO_V1(mqlog_group_members);
PG_FUNCTION_INFO_V1(mq_grant_group);
PG_FUNCTION_INFO_V1(mq_revoke_group);
PG_FUNCTION_INFO_V1(mq_has_group_privilege);

#define MQ_MAX_SUB_TOPICS	16
#define MQ_MAX_ASSIGNED		512
#define MQ_MAX_POLL_TIMEOUT_MS	(600 * 1000)
#define MQ_MAX_EVICTIONS	64		/* groups one transaction forces */

/* settings (session) */
int			mqlog_assignor = MQ_ASSIGN_RANGE;
int			mqlog_offset_reset = MQ_RESET_EARLIEST;
int			mqlog_max_poll_interval_ms = 300000;
int			mqlog_max_groups_per_session = 8;
int			mqlog_poll_recheck_interval = 1000;

static const char *const assignor_names[] = {"range", "roundrobin", "sticky"};

typedef struct MqTopicPart
{
	int32		topic_id;
	int32		partition;
} MqTopicPart;

/*
 * A group member, keyed by its member id, a string as in Kafka.  A SQL
 * session is one kind of member ("sql-<pid>", one per group it polls); a
 * process may host many members (the Kafka listener will), and its exit
 * removes them all.
 */
typedef struct MqMember
{
	bool		in_use;
	Oid			dboid;
	char		group[MQ_GROUP_NAME_LEN];
	char		member_id[MQ_MEMBER_ID_LEN];
	uint64		join_seq;		/* join order: the assignors sort by it */
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
	Oid			owner;			/* whose group it is, while it has members (acl.c) */
} MqGroupState;

typedef struct MqGroupsShared
{
	LWLock	   *lock;
	uint64		next_join_seq;
	Latch	   *coordinator_latch;
	int			nslots;
	MqGroupState *groups;		/* nslots */
	MqMember	members[FLEXIBLE_ARRAY_MEMBER];	/* nslots */
} MqGroupsShared;

static MqGroupsShared *gs = NULL;

/* ------------------------------------------------------------------------
 * Shared memory
 * ------------------------------------------------------------------------ */

/*
 * Every session may be a member of mqlog.max_groups_per_session groups,
 * and the tables are sized so that every possible backend can be: one
 * session joining group after group cannot take the slots others need.
 */
static int
group_slots(void)
{
	return MaxBackends * mqlog_max_groups_per_session;
}

Size
MqGroupsShmemSize(void)
{
	Size		sz = offsetof(MqGroupsShared, members);

	sz = add_size(sz, mul_size(group_slots(), sizeof(MqMember)));
	sz = add_size(sz, mul_size(group_slots(), sizeof(MqGroupState)));
	return sz;
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
	}
	gs->groups = (MqGroupState *) ((char *) gs + offsetof(MqGroupsShared, members) +
								   sizeof(MqMember) * gs->nslots);
}

static MqGroupState *
find_group(Oid dboid, const char *name, bool create)
{
	MqGroupState *free_slot = NULL;

	for (int i = 0; i < gs->nslots; i++)
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

/* The member id of this SQL session in every group it polls. */
static const char *
session_member_id(void)
{
	static char id[MQ_MEMBER_ID_LEN];
	static int	for_pid = 0;

	if (for_pid != MyProcPid)
	{
		snprintf(id, sizeof(id), "sql-%d", MyProcPid);
		for_pid = MyProcPid;
	}
	return id;
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
static bool
assigned_here(MqTopicPart *tp, int n, int32 topic_id, int32 partition)
{
	for (int i = 0; i < n; i++)
		if (tp[i].topic_id == topic_id && tp[i].partition == partition)
			return true;
	return false;
}

static int
cmp_join_seq(const void *a, const void *b)
{
	uint64		x = (*(MqMember *const *) a)->join_seq;
	uint64		y = (*(MqMember *const *) b)->join_seq;

	return (x > y) - (x < y);
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
					assigned_here(prev[i], nprev[i], all[k].topic_id, all[k].partition))
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
			g->in_use = false;
		else
			g->needs_rebalance = true;
	}
}

/*
 * Coordinator pass: evict members that stopped polling, rebalance groups
 * that need it.  Returns how many members were evicted.
 */
int
MqGroupsCoordinate(void)
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
	for (int i = 0; i < gs->nslots; i++)
		if (gs->groups[i].in_use && gs->groups[i].needs_rebalance)
			rebalance(&gs->groups[i]);
	LWLockRelease(gs->lock);
	return evicted;
}

void
MqGroupsSetCoordinatorLatch(Latch *latch)
{
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	gs->coordinator_latch = latch;
	LWLockRelease(gs->lock);
}

/* ------------------------------------------------------------------------
 * Session state: positions
 * ------------------------------------------------------------------------ */

/* a member's position on a partition, keyed by member as the registry is */
typedef struct PosKey
{
	char		member_id[MQ_MEMBER_ID_LEN];
	char		group[MQ_GROUP_NAME_LEN];
	int32		topic_id;
	int32		partition;
} PosKey;

typedef struct Position
{
	PosKey		key;
	int64		position;		/* next offset to poll */
	int64		committed;		/* what the offsets table holds, as we know it */
	SubTransactionId subid;		/* (sub)transaction of its newest undo record */
	bool		stale;			/* reload from the offsets table */
	bool		polled;			/* touched by a poll since the last commit */
} Position;

static HTAB *positions = NULL;
static bool exit_hook_set = false;
static List *fenced_groups = NIL;	/* lost a partition polled in this transaction */
static int	poll_rotation = 0;

static void
init_positions(void)
{
	HASHCTL		ctl;

	if (positions)
		return;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(PosKey);
	ctl.entrysize = sizeof(Position);
	ctl.hcxt = TopMemoryContext;
	positions = hash_create("mqlog positions", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

static void
make_key(PosKey *key, const char *group, int32 topic_id, int32 partition)
{
	memset(key, 0, sizeof(*key));
	strlcpy(key->member_id, session_member_id(), MQ_MEMBER_ID_LEN);
	strlcpy(key->group, group, MQ_GROUP_NAME_LEN);
	key->topic_id = topic_id;
	key->partition = partition;
}

/* the lock that orders a partition's handover, see the file header */
static void
handover_locktag(LOCKTAG *tag, const char *group, int32 topic_id, int32 partition)
{
	uint32		h = hash_bytes((const unsigned char *) group, strlen(group));

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, h,
						 (uint32) topic_id * 65599u + (uint32) partition, 3);
}

static bool
group_fenced(const char *group)
{
	ListCell   *lc;

	foreach(lc, fenced_groups)
		if (strcmp((char *) lfirst(lc), group) == 0)
			return true;
	return false;
}

/*
 * Remember until the end of the transaction that a group may not commit.
 * The list lives as long as the transaction's state, beyond the per-call
 * memory of the mq_poll that notices the loss: its cells and names are
 * allocated in TopMemoryContext and freed by groups_xact_callback.  (A cell
 * once came from the caller's context, and a later lappend or the
 * list_free_deep at COMMIT touched freed memory: issue 16's crash.)
 */
static void
fence_group(const char *group)
{
	MemoryContext old;

	if (group_fenced(group))
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	fenced_groups = lappend(fenced_groups, pstrdup(group));
	MemoryContextSwitchTo(old);
}

/*
 * Undo log of position changes, so that a rolled-back transaction or
 * subtransaction rewinds what it polled and committed.  A record holds the
 * values a position had before the first change in one subtransaction.
 */
typedef struct Undo
{
	PosKey		key;
	SubTransactionId subid;		/* the subtransaction that changed it */
	SubTransactionId prev_subid;	/* the position's subid before */
	bool		created;		/* the position did not exist before */
	int64		position;
	int64		committed;
} Undo;

static Undo *undo = NULL;
static int	nundo = 0;
static int	maxundo = 0;

static void
push_undo(Position *pos, bool created)
{
	Undo	   *u;

	if (nundo == maxundo)
	{
		maxundo = Max(16, maxundo * 2);
		undo = undo ? repalloc(undo, sizeof(Undo) * maxundo)
			: MemoryContextAlloc(TopMemoryContext, sizeof(Undo) * maxundo);
	}
	u = &undo[nundo++];
	u->key = pos->key;
	u->subid = GetCurrentSubTransactionId();
	u->prev_subid = created ? InvalidSubTransactionId : pos->subid;
	u->created = created;
	u->position = pos->position;
	u->committed = pos->committed;
	pos->subid = u->subid;
}

/* call before changing a position: remembers its values once per subtransaction */
static void
save_position(Position *pos)
{
	if (pos->subid != GetCurrentSubTransactionId())
		push_undo(pos, false);
}

static void
apply_undo(Undo *u)
{
	Position   *pos = hash_search(positions, &u->key, HASH_FIND, NULL);

	if (pos == NULL)
		return;					/* revoked meanwhile: nothing to rewind */
	if (u->created)
	{
		hash_search(positions, &u->key, HASH_REMOVE, NULL);
		return;
	}
	pos->position = u->position;
	pos->committed = u->committed;
	pos->subid = u->prev_subid;
}

/*
 * Groups whose members a forced mq_reset_offsets or mq_delete_group of this
 * transaction evicts when it commits: they rejoin at their next poll (a
 * waiting poll at once) and start again from the new committed offsets;
 * a transaction of theirs that polled under the old membership cannot
 * commit.  Evicting earlier would let them reload the old offsets.
 */
typedef struct PendingEviction
{
	char		group[MQ_GROUP_NAME_LEN];
	SubTransactionId subid;
} PendingEviction;

static PendingEviction *evictions = NULL;
static int	nevictions = 0;

static void
evict_at_commit(const char *group)
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
groups_xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS seq;
	Position   *pos;

	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		apply_evictions();
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		nevictions = 0;
	if (positions == NULL)
		return;
	if (event == XACT_EVENT_PRE_PREPARE && nundo > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has polled or committed a consumer group"),
				 errdetail("Positions and partition handover locks of a session cannot outlive it in a prepared transaction."),
				 errhint("Commit the transaction instead of preparing it.")));
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		while (nundo > 0)
			apply_undo(&undo[--nundo]);
	}
	else if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_PARALLEL_COMMIT)
		return;
	nundo = 0;
	list_free_deep(fenced_groups);
	fenced_groups = NIL;
	hash_seq_init(&seq, positions);
	while ((pos = hash_seq_search(&seq)) != NULL)
		pos->subid = InvalidSubTransactionId;
}

static void
groups_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB)
	{
		int			keep = 0;

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
	if (positions == NULL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		/* a subtransaction's records are the newest: at the end */
		while (nundo > 0 && undo[nundo - 1].subid == mySubid)
			apply_undo(&undo[--nundo]);
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		int			keep = 0;

		for (int i = 0; i < nundo; i++)
		{
			Undo	   *u = &undo[i];

			if (u->subid == mySubid)
			{
				bool		parent_has = false;
				Position   *pos = hash_search(positions, &u->key, HASH_FIND, NULL);

				for (int j = 0; j < keep && !parent_has; j++)
					parent_has = (undo[j].subid == parentSubid &&
								  memcmp(&undo[j].key, &u->key, sizeof(PosKey)) == 0);
				if (pos && pos->subid == mySubid)
					pos->subid = parentSubid;
				if (parent_has)
					continue;	/* the parent's record has the older values */
				u->subid = parentSubid;
			}
			undo[keep++] = *u;
		}
		nundo = keep;
	}
}

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
	if (gs->coordinator_latch)
		SetLatch(gs->coordinator_latch);
	LWLockRelease(gs->lock);
	ConditionVariableBroadcast(MqDataArrivedCV());
}

void
MqGroupsInitCallbacks(void)
{
	RegisterXactCallback(groups_xact_callback, NULL);
	RegisterSubXactCallback(groups_subxact_callback, NULL);
}

/* ------------------------------------------------------------------------
 * The offsets table, written as the extension owner
 * ------------------------------------------------------------------------ */

/*
 * Committed offsets of replicated topics go to every other node: an mqlog
 * message record (store/wal.c: only mqlog writes those, so nobody can
 * forge one), decoded with the commit that wrote the offset (and never if
 * it aborts), which each node's apply worker from this one writes into its
 * own mqlog.committed_offset (workers/apply.c).  A group survives the loss
 * of the node it was coordinated on.  offset < 0: the group's offset of
 * that partition was deleted.
 */
static void
replicate_offset(int32 topic_id, int32 partition, const char *group, int64 offset)
{
	MqTopic    *topic = MqTopicLookupById(topic_id);
	MqOffsetMark mark;
	StringInfoData buf;

	if (topic->uuid == NULL)
		return;					/* a topic of this node only */
	memset(&mark, 0, sizeof(mark));
	strlcpy(mark.uuid, topic->uuid, sizeof(mark.uuid));
	mark.partition = partition;
	mark.group_len = strlen(group);
	mark.offset = offset;
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (const char *) &mark, sizeof(mark));
	appendBinaryStringInfo(&buf, group, mark.group_len);
	(void) MqLogMessage(MQ_MSG_OFFSET, buf.data, buf.len);
	pfree(buf.data);
}

/*
 * The statements on the offsets table run on every poll that takes over a
 * partition and on every commit, so their plans are prepared once per
 * backend and kept.
 */
enum
{
	Q_READ,
	Q_READ_LOCK,
	Q_INSERT_IF_ABSENT,
	Q_UPDATE_IF,
	Q_UPSERT,
	NUM_QUERIES
};

static const char *const query_text[NUM_QUERIES] = {
	"SELECT c.committed_offset FROM mqlog.committed_offset c"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
	" AND c.partition OPERATOR(pg_catalog.=) $3",
	"SELECT c.committed_offset FROM mqlog.committed_offset c"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
	" AND c.partition OPERATOR(pg_catalog.=) $3 FOR SHARE",
	"INSERT INTO mqlog.committed_offset (group_id, topic_id, partition, committed_offset)"
	" VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
	"UPDATE mqlog.committed_offset c SET committed_offset = $4, committed_at = pg_catalog.now()"
	" WHERE c.group_id OPERATOR(pg_catalog.=) $1 AND c.topic_id OPERATOR(pg_catalog.=) $2"
	" AND c.partition OPERATOR(pg_catalog.=) $3 AND c.committed_offset OPERATOR(pg_catalog.=) $5",
	"INSERT INTO mqlog.committed_offset (group_id, topic_id, partition, committed_offset)"
	" VALUES ($1, $2, $3, $4) ON CONFLICT (group_id, topic_id, partition)"
	" DO UPDATE SET committed_offset = $4, committed_at = pg_catalog.now()",
};

static SPIPlanPtr query_plan[NUM_QUERIES];

/* Run one of the statements with (group, topic, partition, offset, expected). */
static int
run_query(int q, const char *group, int32 topic_id, int32 partition,
		  int64 offset, int64 expected)
{
	Oid			types[5] = {TEXTOID, INT4OID, INT4OID, INT8OID, INT8OID};
	Datum		vals[5];
	int			nargs = (q == Q_READ || q == Q_READ_LOCK) ? 3 : (q == Q_UPDATE_IF ? 5 : 4);

	if (query_plan[q] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(query_text[q], nargs, types);

		if (plan == NULL)
			elog(ERROR, "mqlog: could not prepare \"%s\": %s", query_text[q],
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		query_plan[q] = plan;
	}
	vals[0] = CStringGetTextDatum(group);
	vals[1] = Int32GetDatum(topic_id);
	vals[2] = Int32GetDatum(partition);
	vals[3] = Int64GetDatum(offset);
	vals[4] = Int64GetDatum(expected);
	return SPI_execute_plan(query_plan[q], vals, NULL, q == Q_READ, q == Q_READ || q == Q_READ_LOCK ? 1 : 0);
}

/* committed offset of a partition, or -1; with lock, the row is locked FOR SHARE */
static int64
read_committed(const char *group, int32 topic_id, int32 partition, bool lock)
{
	MqSpi		spi;
	int64		result = -1;
	int			ret;

	MqSpiBegin(&spi, true);

	/*
	 * With a fresh snapshot: a poll that waited (for a handover, or in its
	 * timeout while a forced reset committed) must see what committed
	 * meanwhile, not what its statement's snapshot saw when it started.
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	ret = run_query(lock ? Q_READ_LOCK : Q_READ, group, topic_id, partition, 0, 0);
	PopActiveSnapshot();
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: reading committed offsets failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		bool		isnull;

		result = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	return result;
}

/*
 * Write a committed offset if the row still holds expected (-1: no row),
 * or whatever it holds when unconditional.  Returns false if someone else
 * changed it.
 */
static bool
write_committed(const char *group, int32 topic_id, int32 partition,
				int64 expected, int64 offset, bool unconditional)
{
	MqSpi		spi;
	int			ret;
	bool		ok;

	MqSpiBegin(&spi, true);
	ret = run_query(unconditional ? Q_UPSERT : (expected < 0 ? Q_INSERT_IF_ABSENT : Q_UPDATE_IF),
					group, topic_id, partition, offset, expected);
	if (ret != SPI_OK_INSERT && ret != SPI_OK_UPDATE)
		elog(ERROR, "mqlog: writing committed offsets failed: %s", SPI_result_code_string(ret));
	ok = (SPI_processed == 1);
	MqSpiEnd(&spi);
	if (ok)
		replicate_offset(topic_id, partition, group, offset);
	return ok;
}

/* ------------------------------------------------------------------------
 * Argument checks
 * ------------------------------------------------------------------------ */

static char *
group_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *group;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("group must not be null")));
	group = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	MqCheckGroupName(group);
	return group;
}

static void
check_groups_ready(void)
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
	init_positions();
}

/* this session's assignment in a group: copies under the lock */
static int
my_assignment(const char *group, MqTopicPart **out, int *generation)
{
	MqMember   *m;
	int			n = 0;

	LWLockAcquire(gs->lock, LW_SHARED);
	m = find_member(MyDatabaseId, group, session_member_id());
	if (m)
	{
		n = m->nassigned;
		*out = palloc(sizeof(MqTopicPart) * Max(n, 1));
		memcpy(*out, m->assigned, sizeof(MqTopicPart) * n);
		if (generation)
			*generation = m->generation;
	}
	LWLockRelease(gs->lock);
	if (m == NULL)
	{
		*out = NULL;
		return -1;
	}
	return n;
}

/* ------------------------------------------------------------------------
 * mq_poll
 * ------------------------------------------------------------------------ */

/* the owner kept with a live group's members, or InvalidOid */
static Oid
live_owner(const char *group)
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

/*
 * Join or refresh membership; rebalance inline if anything changed.  The
 * access check was made against seen_owner; if another role's session
 * created the group (and so became its owner) since, nothing is done and
 * false is returned, to check again.
 */
static bool
join_group(const char *group, MqTopic **topics, int ntopics, Oid seen_owner, Oid owner)
{
	MqMember   *m;
	MqGroupState *g;
	bool		changed = false;
	bool		joined = false;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	g = find_group(MyDatabaseId, group, true);
	if (OidIsValid(g->owner) && g->owner != seen_owner)
	{
		LWLockRelease(gs->lock);
		return false;
	}
	if (!OidIsValid(g->owner))
		g->owner = owner;
	m = find_member(MyDatabaseId, group, session_member_id());
	if (m == NULL)
	{
		int			mine = 0;

		for (int i = 0; i < gs->nslots; i++)
			if (gs->members[i].in_use && gs->members[i].pid == MyProcPid)
				mine++;
		if (mine >= mqlog_max_groups_per_session)
		{
			if (group_member_count(g) == 0)
				g->in_use = false;	/* find_group made it for us */
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
			LWLockRelease(gs->lock);
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many consumer group members")));
		}
		memset(m, 0, offsetof(MqMember, assigned));
		m->in_use = true;
		m->dboid = MyDatabaseId;
		strlcpy(m->group, group, MQ_GROUP_NAME_LEN);
		strlcpy(m->member_id, session_member_id(), MQ_MEMBER_ID_LEN);
		m->join_seq = gs->next_join_seq++;
		m->pid = MyProcPid;
		m->joined_at = now;
		m->assignor = mqlog_assignor;
		changed = true;
		joined = true;
	}
	m->max_poll_interval_ms = mqlog_max_poll_interval_ms;
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
	LWLockRelease(gs->lock);

	/*
	 * A new membership (the first, or after an eviction) starts from the
	 * committed offsets, as a Kafka consumer does after it rejoins; if this
	 * transaction had polled under the old membership, it may not commit.
	 */
	if (joined)
	{
		HASH_SEQ_STATUS seq;
		Position   *pos;

		hash_seq_init(&seq, positions);
		while ((pos = hash_seq_search(&seq)) != NULL)
			if (strcmp(pos->key.group, group) == 0)
			{
				if (pos->polled && pos->subid != InvalidSubTransactionId &&
					pos->position != pos->committed)
					fence_group(group);
				pos->stale = true;
			}
	}
	return true;
}

/* Check the role may use the group, then join it. */
static void
join_checked(const char *group, MqTopic **topics, int ntopics)
{
	for (;;)
	{
		Oid			seen = live_owner(group);
		Oid			owner = MqGroupCheckAccess(group, MQ_GROUP_USE, seen);

		if (join_group(group, topics, ntopics, seen, owner))
			return;
		CHECK_FOR_INTERRUPTS();
	}
}

static void
heartbeat(const char *group)
{
	MqMember   *m;

	LWLockAcquire(gs->lock, LW_SHARED);
	m = find_member(MyDatabaseId, group, session_member_id());
	if (m)
		m->last_poll = GetCurrentTimestamp();	/* only this backend writes it */
	LWLockRelease(gs->lock);
}

/*
 * Bring session positions in line with the assignment: forget revoked
 * partitions, load newly assigned ones from the offsets table.
 */
static void
sync_positions(const char *group, MqTopicPart *tp, int n, MqTopic **topics, int ntopics)
{
	HASH_SEQ_STATUS seq;
	Position   *pos;

	hash_seq_init(&seq, positions);
	while ((pos = hash_seq_search(&seq)) != NULL)
		if (strcmp(pos->key.group, group) == 0 &&
			!assigned_here(tp, n, pos->key.topic_id, pos->key.partition))
		{
			/* records polled in this transaction now belong to another member */
			if (pos->polled && pos->subid != InvalidSubTransactionId &&
				pos->position != pos->committed)
				fence_group(group);
			hash_search(positions, &pos->key, HASH_REMOVE, NULL);
		}

	for (int i = 0; i < n; i++)
	{
		PosKey		key;
		bool		found;
		MqTopic    *topic = NULL;
		int64		committed;

		make_key(&key, group, tp[i].topic_id, tp[i].partition);
		pos = hash_search(positions, &key, HASH_ENTER, &found);
		if (found && !pos->stale)
			continue;
		for (int t = 0; t < ntopics; t++)
			if (topics[t]->topic_id == tp[i].topic_id)
				topic = topics[t];
		if (topic == NULL || tp[i].partition >= topic->partitions)
		{
			hash_search(positions, &key, HASH_REMOVE, NULL);
			continue;
		}
		if (!found)
		{
			pos->polled = false;
			pos->position = pos->committed = -1;
			pos->subid = InvalidSubTransactionId;
			push_undo(pos, true);
		}
		else
			save_position(pos);
		pos->stale = false;

		/*
		 * Wait for a commit of the previous owner that is in flight, then
		 * read where it left off.
		 */
		{
			LOCKTAG		tag;

			handover_locktag(&tag, group, tp[i].topic_id, tp[i].partition);
			(void) LockAcquire(&tag, ShareLock, false, false);
			LockRelease(&tag, ShareLock, false);
		}
		committed = read_committed(group, tp[i].topic_id, tp[i].partition, false);
		pos->committed = committed;
		/* no offset, or one retention removed: poll_once applies the policy */
		pos->position = committed;
	}
}

static MqTopic **
resolve_topics(FunctionCallInfo fcinfo, int *ntopics)
{
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	MqTopic   **topics;
	int			n = 0;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topics must not be null")));
	if (argtype == TEXTOID)
	{
		topics = palloc(sizeof(MqTopic *));
		topics[n++] = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
		MqTopicCheckPrivilege(topics[0], MQ_PRIV_CONSUME);
	}
	else
	{
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &nelems);
		if (nelems == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("topics must not be empty")));
		if (nelems > MQ_MAX_SUB_TOPICS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a member may subscribe to at most %d topics", MQ_MAX_SUB_TOPICS)));
		topics = palloc(sizeof(MqTopic *) * nelems);
		for (int i = 0; i < nelems; i++)
		{
			MqTopic    *t;
			bool		dup = false;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("topic names must not be null")));
			t = MqTopicLookup(TextDatumGetCString(elems[i]), false);
			MqTopicCheckPrivilege(t, MQ_PRIV_CONSUME);
			for (int j = 0; j < n; j++)
				dup |= (topics[j] == t);
			if (!dup)
				topics[n++] = t;
		}
	}
	*ntopics = n;
	return topics;
}

/*
 * Where a position goes that is no offset yet (-1: the group never
 * committed this partition) or that retention has overtaken: Kafka's
 * auto.offset.reset, mqlog.auto_offset_reset here, for both cases.
 */
static int64
reset_position(const char *group, MqTopic *topic, int32 partition, int64 position)
{
	int64		start = MqLogStartOffset(topic, partition);
	int64		lso,
				hw;

	if (mqlog_offset_reset == MQ_RESET_EARLIEST)
		return start;
	if (mqlog_offset_reset == MQ_RESET_LATEST)
	{
		MqPartitionOffsets(topic, partition, &lso, &hw);
		return lso >= 0 ? lso : start;
	}
	if (position < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("consumer group \"%s\" has no offset for partition %d of topic \"%s\"",
						group, partition, topic->name),
				 errdetail("mqlog.auto_offset_reset is \"none\"."),
				 errhint("Position the group with mq_seek() or mq_reset_offsets(), or set mqlog.auto_offset_reset to earliest or latest.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("offset " INT64_FORMAT " of partition %d of topic \"%s\" is no longer in the log",
					position, partition, topic->name),
			 errdetail("Retention removed offsets " INT64_FORMAT " to " INT64_FORMAT " before consumer group \"%s\" read them; the log now starts at " INT64_FORMAT ".",
					   position, start - 1, group, start),
			 errhint("Position the group with mq_seek() or mq_reset_offsets(), or set mqlog.auto_offset_reset to earliest or latest.")));
	return start;				/* keep the compiler quiet */
}

/*
 * A waiting poll holds AccessShareLock on mqlog's catalog and on the
 * segments it has read, to the end of its transaction, so DDL that needs
 * them (mq_drop_topic, DROP EXTENSION) would wait behind it for the whole
 * poll timeout.  That DDL announces itself first (MqAnnounceDdl) and wakes
 * the waiting polls; a poll that learns of DDL on one of its topics, or on
 * the extension, ends with a retryable error: its transaction rolls back,
 * its positions rewind, the DDL goes ahead, and the consumer's next poll
 * sees what it did.  (Lock-waiter checks cannot be used here: the locks
 * are fast-path locks, which LockHasWaiters does not handle.)
 */
static void
yield_to_ddl(uint64 *seen, MqTopic **topics, int ntopics)
{
	int32		topic_id;
	uint64		now = MqDdlCount(&topic_id);
	const char *what = NULL;

	if (now == *seen)
		return;
	if (topic_id < 0)
	{
		*seen = now;			/* DDL in another database */
		return;
	}
	if (topic_id == 0 || now > *seen + 1)
		what = "mqlog";			/* the extension, or more than one change */
	for (int t = 0; t < ntopics && what == NULL; t++)
		if (topics[t]->topic_id == topic_id)
			what = topics[t]->name;
	if (what == NULL)
	{
		*seen = now;			/* DDL on another topic */
		return;
	}
	ConditionVariableCancelSleep();
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("mq_poll gave way to a concurrent drop of %s%s%s",
					strcmp(what, "mqlog") == 0 ? "" : "topic \"", what,
					strcmp(what, "mqlog") == 0 ? " or one of its topics" : "\""),
			 errdetail("Another session is dropping it and needs the locks this transaction holds."),
			 errhint("Roll back and poll again.")));
}

/*
 * How long a waiting poll sleeps before it looks again by itself.  What
 * makes records readable, a producer's commit, wakes the waiting polls, and
 * so do rebalances, evictions and DDL on their topics; the timed wakeup
 * catches what wakes nobody (records replayed on a hot standby, committed
 * records that an aborted transaction held back).  It also refreshes the
 * member's last_poll, so it never waits more than half of
 * mqlog.max_poll_interval_ms: a waiting member must not look idle to the
 * coordinator (join_checked stored this session's value in the member).
 */
static long
poll_sleep_ms(TimestampTz deadline)
{
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	return Max(1, Min(Min(mqlog_poll_recheck_interval, mqlog_max_poll_interval_ms / 2), left));
}

/* One round over the assigned partitions, starting at a rotating index. */
static int
poll_once(const char *group, MqTopicPart *tp, int n, MqTopic **topics, int ntopics,
		  int max_records, MqRecordOutput *out)
{
	int			total = 0;
	int			start = n > 0 ? (poll_rotation++ % n) : 0;

	for (int k = 0; k < n && total < max_records; k++)
	{
		MqTopicPart *p = &tp[(start + k) % n];
		PosKey		key;
		Position   *pos;
		MqTopic    *topic = NULL;
		int			got;
		int64		next;

		make_key(&key, group, p->topic_id, p->partition);
		pos = hash_search(positions, &key, HASH_FIND, NULL);
		for (int t = 0; t < ntopics; t++)
			if (topics[t]->topic_id == p->topic_id)
				topic = topics[t];
		if (pos == NULL || topic == NULL)
			continue;
		if (pos->position < MqLogStartOffset(topic, p->partition))
		{
			int64		target = reset_position(group, topic, p->partition, pos->position);

			save_position(pos);
			pos->position = target;
		}

		/*
		 * A fair share per partition when several have data, so that one
		 * hot partition does not starve the rest.
		 */
		next = MqReadPartition(topic, p->partition, pos->position,
							   Max((max_records - total) / Max(n - k, 1), 1),
							   PG_INT64_MAX, out, &got);
		if (next != pos->position)
		{
			save_position(pos);
			pos->position = next;
			pos->polled = true;
		}
		total += got;
	}
	return total;
}

Datum
mq_poll(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic   **topics;
	int			ntopics;
	int32		max_records;
	int64		timeout_ms = 0;
	MqRecordOutput out;
	TimestampTz deadline;
	MqTopicPart *tp = NULL;
	int			ntp = 0;
	int			generation = -1;
	bool		sleeping = false;
	uint64		ddl_seen;

	check_groups_ready();
	group = group_arg(fcinfo, 0);
	topics = resolve_topics(fcinfo, &ntopics);
	max_records = PG_ARGISNULL(2) ? 500 : PG_GETARG_INT32(2);
	if (max_records < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_records must be at least 1")));
	if (!PG_ARGISNULL(3))
	{
		Interval   *iv = PG_GETARG_INTERVAL_P(3);
		int64		us = iv->time + (int64) iv->day * USECS_PER_DAY +
			(int64) iv->month * 30 * USECS_PER_DAY;

		if (us < 0 || us > (int64) MQ_MAX_POLL_TIMEOUT_MS * 1000)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("poll timeout must be between 0 and %d seconds", MQ_MAX_POLL_TIMEOUT_MS / 1000),
					 errhint("Poll again in a loop for longer waits.")));
		timeout_ms = us / 1000;
	}

	MqInitRecordOutput(fcinfo, &out);
	join_checked(group, topics, ntopics);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	ddl_seen = MqDdlCount(NULL);

	for (;;)
	{
		int			gen;
		int			got;

		ntp = my_assignment(group, &tp, &gen);
		if (ntp < 0)
		{
			/*
			 * Evicted meanwhile: join again, and reload the positions (the
			 * group may be a new one, its generation counting from 0).
			 */
			join_checked(group, topics, ntopics);
			generation = -1;
			continue;
		}
		if (gen != generation)
		{
			sync_positions(group, tp, ntp, topics, ntopics);
			generation = gen;
		}
		got = poll_once(group, tp, ntp, topics, ntopics, max_records, &out);
		if (got > 0 || GetCurrentTimestamp() >= deadline)
			break;
		if (!sleeping)
		{
			/* prepare, then check once more before the first sleep */
			ConditionVariablePrepareToSleep(MqDataArrivedCV());
			sleeping = true;
			continue;
		}
		(void) ConditionVariableTimedSleep(MqDataArrivedCV(),
										   poll_sleep_ms(deadline),
										   PG_WAIT_EXTENSION);
		heartbeat(group);
		CHECK_FOR_INTERRUPTS();
		yield_to_ddl(&ddl_seen, topics, ntopics);
	}
	if (sleeping)
		ConditionVariableCancelSleep();
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * mq_commit
 * ------------------------------------------------------------------------ */

static void
commit_fails(Position *pos, const char *group, const char *topic_name, const char *detail)
{
	pos->stale = true;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not commit offset of partition %d of topic \"%s\" for group \"%s\"",
					pos->key.partition, topic_name, group),
			 errdetail("%s", detail),
			 errhint("Roll back and poll again.")));
}

/*
 * Commit one partition's offset: the handover lock first, then ownership,
 * then the conditional write (see the file header).
 */
static void
commit_one(const char *group, Position *pos, int64 offset, const char *topic_name)
{
	LOCKTAG		tag;
	MqTopicPart *tp;
	int			ntp;

	/* a member that lost the partition fails at once, without waiting */
	for (int pass = 0; pass < 2; pass++)
	{
		ntp = my_assignment(group, &tp, NULL);
		if (!assigned_here(tp, Max(ntp, 0), pos->key.topic_id, pos->key.partition))
			commit_fails(pos, group, topic_name,
						 "The partition was reassigned to another member by a rebalance.");
		if (pass == 0)
		{
			handover_locktag(&tag, group, pos->key.topic_id, pos->key.partition);
			(void) LockAcquire(&tag, ExclusiveLock, false, false);
		}
	}
	if (!write_committed(group, pos->key.topic_id, pos->key.partition, pos->committed, offset, false))
		commit_fails(pos, group, topic_name,
					 "Another member or an offset reset committed this partition meanwhile.");
	save_position(pos);
	pos->committed = offset;
	pos->polled = false;
}

/* A transaction that lost a partition it polled must not commit the rest. */
static void
check_not_fenced(const char *group)
{
	if (group_fenced(group))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit offsets for group \"%s\"", group),
				 errdetail("A partition this transaction polled was reassigned to another member by a rebalance."),
				 errhint("Roll back and poll again: the records will be delivered to the partition's new owner.")));
}

/* a topic's name, once the caller is known to hold consume on it */
static const char *
topic_name_of(int32 topic_id)
{
	MqTopic    *topic = MqTopicLookupById(topic_id);

	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	return topic->name;
}

Datum
mq_commit(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopicPart *tp;
	int			ntp;
	HASH_SEQ_STATUS seq;
	Position   *pos;
	int64		count = 0;
	List	   *todo = NIL;
	ListCell   *lc;
	Oid			owner;

	check_groups_ready();
	group = group_arg(fcinfo, 0);
	PreventCommandIfReadOnly("mq_commit");
	owner = live_owner(group);
	MqGroupCheckAccess(group, MQ_GROUP_USE, owner);
	ntp = my_assignment(group, &tp, NULL);
	if (ntp < 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("this session is not a member of consumer group \"%s\"", group),
				 errhint("Call mq_poll() first; a member that did not poll for max.poll.interval.ms is evicted.")));

	check_not_fenced(group);
	hash_seq_init(&seq, positions);
	while ((pos = hash_seq_search(&seq)) != NULL)
		if (strcmp(pos->key.group, group) == 0 && pos->position >= 0 &&
			pos->position != pos->committed)
			todo = lappend(todo, pos);
	if (todo != NIL)
		MqGroupPersistOwner(group, owner);
	foreach(lc, todo)
	{
		pos = lfirst(lc);
		commit_one(group, pos, pos->position, topic_name_of(pos->key.topic_id));
		count++;
	}
	PG_RETURN_INT64(count);
}

/* look up this session's position entry for an explicit partition */
static Position *
explicit_position(const char *group, MqTopic *topic, int32 partition)
{
	PosKey		key;
	Position   *pos;
	MqTopicPart *tp;
	int			ntp;

	MqCheckPartition(topic, partition);
	make_key(&key, group, topic->topic_id, partition);
	pos = hash_search(positions, &key, HASH_FIND, NULL);

	/*
	 * Assigned, but its position was never loaded (a poll failed before it
	 * could, e.g. with mqlog.auto_offset_reset = none): load it now, so that
	 * mq_seek can position it.
	 */
	ntp = my_assignment(group, &tp, NULL);
	if (pos == NULL && assigned_here(tp, Max(ntp, 0), topic->topic_id, partition))
	{
		pos = hash_search(positions, &key, HASH_ENTER, NULL);
		pos->polled = false;
		pos->stale = false;
		pos->subid = InvalidSubTransactionId;
		pos->committed = read_committed(group, topic->topic_id, partition, false);
		pos->position = pos->committed;
		push_undo(pos, true);
	}
	if (pos == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("partition %d of topic \"%s\" is not assigned to this session in group \"%s\"",
						partition, topic->name, group),
				 errhint("Poll first; see mqlog.group_members for the assignment.")));
	return pos;
}

/*
 * Arguments (group, topic, partition, offset) of mq_commit and mq_seek:
 * checked, and the session's position entry for that partition.
 */
static Position *
explicit_args(FunctionCallInfo fcinfo, char **group, MqTopic **topic, int64 *offset,
			  MqGroupAccess access)
{
	int32		partition;
	Position   *pos;

	check_groups_ready();
	*group = group_arg(fcinfo, 0);
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic, partition and offset must not be null")));
	partition = PG_GETARG_INT32(2);
	*offset = PG_GETARG_INT64(3);
	if (*offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset must not be negative"),
				 errhint("An offset is the next offset to read, from 0 to the high watermark.")));
	*topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
	MqTopicCheckPrivilege(*topic, MQ_PRIV_CONSUME);
	MqGroupCheckAccess(*group, access, live_owner(*group));
	pos = explicit_position(*group, *topic, partition);
	MqCheckOffsetRange(*topic, partition, *offset, true);
	return pos;
}

Datum
mq_commit_offset(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	int64		offset;
	Position   *pos;

	PreventCommandIfReadOnly("mq_commit");
	pos = explicit_args(fcinfo, &group, &topic, &offset, MQ_GROUP_USE);
	check_not_fenced(group);
	MqGroupPersistOwner(group, live_owner(group));
	commit_one(group, pos, offset, topic->name);
	PG_RETURN_INT64(1);
}

Datum
mq_seek(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	int64		offset;
	Position   *pos = explicit_args(fcinfo, &group, &topic, &offset, MQ_GROUP_USE_EXISTING);

	save_position(pos);
	pos->position = offset;
	PG_RETURN_VOID();
}

Datum
mq_leave(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqMember   *m;
	bool		was = false;
	HASH_SEQ_STATUS seq;
	Position   *pos;

	check_groups_ready();
	group = group_arg(fcinfo, 0);
	LWLockAcquire(gs->lock, LW_EXCLUSIVE);
	m = find_member(MyDatabaseId, group, session_member_id());
	if (m)
	{
		MqGroupState *g;

		remove_member(m);
		g = find_group(MyDatabaseId, group, false);
		if (g && g->needs_rebalance)
			rebalance(g);
		was = true;
	}
	LWLockRelease(gs->lock);

	hash_seq_init(&seq, positions);
	while ((pos = hash_seq_search(&seq)) != NULL)
		if (strcmp(pos->key.group, group) == 0)
			hash_search(positions, &pos->key, HASH_REMOVE, NULL);
	PG_RETURN_BOOL(was);
}

static int
active_members(const char *group)
{
	MqGroupState *g;
	int			n = 0;

	LWLockAcquire(gs->lock, LW_SHARED);
	g = find_group(MyDatabaseId, group, false);
	if (g)
		n = group_member_count(g);
	LWLockRelease(gs->lock);
	return n;
}

static void
refuse_if_active(const char *group, bool force, const char *what)
{
	int			n = active_members(group);

	if (n > 0 && force)
	{
		MqGroupCheckAccess(group, MQ_GROUP_OWNER, live_owner(group));
		evict_at_commit(group);
	}
	if (n > 0 && !force)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot %s of consumer group \"%s\" while it has %d active member%s",
						what, group, n, n == 1 ? "" : "s"),
				 errhint("Stop the consumers (or call mq_leave), or pass force => true.")));
}

/* an optional sign and digits only: what mq_reset_offsets takes for an offset */
static bool
looks_like_integer(const char *s)
{
	while (isspace((unsigned char) *s))
		s++;
	if (*s == '+' || *s == '-')
		s++;
	if (!isdigit((unsigned char) *s))
		return false;
	while (isdigit((unsigned char) *s))
		s++;
	while (isspace((unsigned char) *s))
		s++;
	return *s == '\0';
}

/*
 * A reset target that is neither a keyword nor an offset must be a
 * timestamp; the parser's own error would not say what else was allowed,
 * so it runs in a subtransaction and its error is replaced.
 */
static TimestampTz
parse_reset_time(const char *to)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	TimestampTz ts = 0;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(to),
													 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid offset reset target \"%s\"", to),
				 errhint("Reset to 'earliest', 'latest', an offset from 0 to the high watermark, or a timestamp such as '2026-01-31 12:00:00+00'.")));
	return ts;
}

Datum
mq_reset_offsets(PG_FUNCTION_ARGS)
{
	char	   *group;
	MqTopic    *topic;
	char	   *to;
	bool		force;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *end;
	int64		exact = -1;
	bool		is_time = false;
	TimestampTz ts = 0;

	check_groups_ready();
	group = group_arg(fcinfo, 0);
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic and target must not be null")));
	topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(1)), false);
	to = text_to_cstring(PG_GETARG_TEXT_PP(2));
	force = PG_ARGISNULL(3) ? false : PG_GETARG_BOOL(3);
	PreventCommandIfReadOnly("mq_reset_offsets");

	if (pg_strcasecmp(to, "earliest") != 0 && pg_strcasecmp(to, "latest") != 0)
	{
		errno = 0;
		exact = strtoll(to, &end, 10);
		if (looks_like_integer(to))
		{
			int			code = (errno == ERANGE) ? ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE :
				ERRCODE_INVALID_PARAMETER_VALUE;

			if (code == ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE || exact < 0)
				ereport(ERROR,
						(errcode(code),
						 errmsg("offset \"%s\" is out of range", to),
						 errhint("Reset to 'earliest', 'latest', an offset from 0 to the high watermark, or a timestamp such as '2026-01-31 12:00:00+00'.")));
		}
		else
		{
			exact = -1;
			is_time = true;
			ts = parse_reset_time(to);
		}
	}
	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	MqGroupCheckAccess(group, MQ_GROUP_USE, live_owner(group));
	refuse_if_active(group, force, "reset offsets");
	MqGroupPersistOwner(group, live_owner(group));

	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < topic->partitions; p++)
	{
		int64		lso,
					hw,
					target;
		Datum		values[2];
		bool		nulls[2] = {false, false};

		MqPartitionOffsets(topic, p, &lso, &hw);
		if (pg_strcasecmp(to, "earliest") == 0)
			target = MqLogStartOffset(topic, p);
		else if (pg_strcasecmp(to, "latest") == 0)
			target = lso;
		else if (is_time)
		{
			/* the first record at or after ts, else the end */
			target = MqOffsetForTime(topic, p, ts, NULL);
			if (target < 0)
				target = lso;
		}
		else
		{
			MqCheckOffsetRange(topic, p, exact, false);
			target = exact;
		}
		(void) write_committed(group, topic->topic_id, p, -1, target, true);
		values[0] = Int32GetDatum(p);
		values[1] = Int64GetDatum(target);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
mq_delete_group(PG_FUNCTION_ARGS)
{
	char	   *group;
	bool		force;
	MqSpi		spi;
	Oid			type = TEXTOID;
	Datum		val;
	int64		n;
	uint64		owned;

	check_groups_ready();
	group = group_arg(fcinfo, 0);
	force = PG_ARGISNULL(1) ? false : PG_GETARG_BOOL(1);
	PreventCommandIfReadOnly("mq_delete_group");
	MqGroupCheckAccess(group, MQ_GROUP_USE_EXISTING, live_owner(group));
	refuse_if_active(group, force, "delete the offsets");
	val = CStringGetTextDatum(group);
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.committed_offset c WHERE c.group_id OPERATOR(pg_catalog.=) $1"
							  " RETURNING c.topic_id, c.partition",
							  1, &type, &val, NULL, false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "mqlog: deleting committed offsets failed");
	n = SPI_processed;
	/* the other nodes forget these offsets, of replicated topics, and no others */
	{
		SPITupleTable *rows = SPI_tuptable;
		int32	   *tids = palloc(sizeof(int32) * (n + 1));
		int32	   *parts = palloc(sizeof(int32) * (n + 1));

		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;

			tids[i] = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 1, &isnull));
			parts[i] = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
		}
		for (uint64 i = 0; i < n; i++)
			replicate_offset(tids[i], parts[i], group, -1);
	}
	/* its ownership and grants go with it (group_acl cascades) */
	if (SPI_execute_with_args("DELETE FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) $1",
							  1, &type, &val, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog: deleting the group failed");
	owned = SPI_processed;
	MqSpiEnd(&spi);
	MqGroupForget(group);
	MqlogCatalogChanged();
	if (n == 0 && owned == 0 && active_members(group) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("consumer group \"%s\" does not exist", group)));
	PG_RETURN_INT64(n);
}

/* ------------------------------------------------------------------------
 * mqlog.group_members
 * ------------------------------------------------------------------------ */

Datum
mqlog_group_members(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MqMember   *copy;
	Oid		   *owners;
	int			n = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (gs == NULL)
		return (Datum) 0;
	copy = palloc(sizeof(MqMember) * gs->nslots);
	owners = palloc(sizeof(Oid) * gs->nslots);
	LWLockAcquire(gs->lock, LW_SHARED);
	for (int i = 0; i < gs->nslots; i++)
		if (gs->members[i].in_use && gs->members[i].dboid == MyDatabaseId)
		{
			MqGroupState *g = find_group(MyDatabaseId, gs->members[i].group, false);

			owners[n] = g ? g->owner : InvalidOid;
			copy[n++] = gs->members[i];
		}
	LWLockRelease(gs->lock);

	for (int i = 0; i < n; i++)
	{
		MqMember   *m = &copy[i];
		Datum		values[9];
		bool		nulls[9] = {0};
		bool		visible;
		int			j;
		Datum	   *topics;
		Datum	   *assigned;

		/*
		 * Only the groups the caller may use.  Asked once per group: the
		 * in_use flag of the copies is reused to hold the answer.
		 */
		for (j = 0; j < i; j++)
			if (strcmp(copy[j].group, m->group) == 0)
				break;
		visible = (j < i) ? copy[j].in_use : MqGroupHasAccess(m->group, GetUserId(), owners[i]);
		m->in_use = visible;
		if (!visible)
			continue;
		topics = palloc(sizeof(Datum) * Max(m->ntopics, 1));
		assigned = palloc(sizeof(Datum) * Max(m->nassigned, 1));

		for (int t = 0; t < m->ntopics; t++)
			topics[t] = CStringGetTextDatum(MqTopicNameOrId(m->topic_ids[t]));
		for (int a = 0; a < m->nassigned; a++)
			assigned[a] = CStringGetTextDatum(psprintf("%s-%d", MqTopicNameOrId(m->assigned[a].topic_id),
													   m->assigned[a].partition));
		values[0] = CStringGetTextDatum(m->group);
		values[1] = CStringGetTextDatum(m->member_id);
		values[2] = Int32GetDatum(m->pid);
		values[3] = CStringGetTextDatum(assignor_names[m->assignor]);
		values[4] = Int32GetDatum(m->generation);
		values[5] = PointerGetDatum(construct_array(topics, m->ntopics, TEXTOID, -1, false, TYPALIGN_INT));
		values[6] = PointerGetDatum(construct_array(assigned, m->nassigned, TEXTOID, -1, false, TYPALIGN_INT));
		values[7] = TimestampTzGetDatum(m->joined_at);
		values[8] = TimestampTzGetDatum(m->last_poll);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ------------------------------------------------------------------------
 * mq_grant_group, mq_revoke_group, mq_has_group_privilege
 * ------------------------------------------------------------------------ */

static void
change_group_grant(FunctionCallInfo fcinfo, bool grant)
{
	char	   *group = MqTextArg(fcinfo, 0, "group name");
	Oid			grantee = MqGranteeArg(fcinfo, 1);
	Oid			live;

	check_groups_ready();
	MqCheckGroupName(group);
	PreventCommandIfReadOnly(grant ? "mq_grant_group" : "mq_revoke_group");
	live = live_owner(group);
	/* a group nobody owns yet becomes the granter's */
	if (grant)
	{
		MqGroupCheckAccess(group, MQ_GROUP_USE, live);
		MqGroupPersistOwner(group, live);
	}
	MqGroupCheckAccess(group, MQ_GROUP_GRANT, live);
	MqGroupChangeGrant(group, grantee, grant);
}

Datum
mq_grant_group(PG_FUNCTION_ARGS)
{
	change_group_grant(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
mq_revoke_group(PG_FUNCTION_ARGS)
{
	change_group_grant(fcinfo, false);
	PG_RETURN_VOID();
}

Datum
mq_has_group_privilege(PG_FUNCTION_ARGS)
{
	char	   *group = text_to_cstring(PG_GETARG_TEXT_PP(0));

	check_groups_ready();
	PG_RETURN_BOOL(MqGroupHasAccess(group, GetUserId(), live_owner(group)));
}
