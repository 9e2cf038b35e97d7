/*-------------------------------------------------------------------------
 *
 * positions.c
 *		Members' positions (where each member this process hosts reads next
 *		on each partition assigned to it), their undo log for rollbacks, the
 *		fences, and the commit of positions into the committed-offset store.
 *
 * Positions are backend-local, in a hash keyed by member id, group, topic
 * and partition, as the registry keys members.  Exactly-once for
 * consume-transform-produce rests on two fences in a commit, both failing
 * with SQLSTATE 40001 so that a client retries the transaction:
 *	- ownership: the partition must still be assigned to the member;
 *	- no concurrent commit: the row must still hold the offset the member
 *	  started from (offsets.c).
 * and on a lock per (group, partition), in the advisory lock space with a
 * field of its own: a commit takes it in exclusive mode, before it checks
 * ownership, and keeps it to the end of its transaction; a member that
 * takes a partition over takes it in share mode and lets it go at once,
 * before it reads the committed offset.  So the new owner waits for a
 * commit of the previous owner that is in flight instead of reading past
 * it, and a previous owner that checks ownership after the handover fails.
 * A transaction that polled a partition its member then lost fails its
 * commits of that group too, since its work includes records now owned by
 * another member; so does one whose member was evicted and joined again.
 * A rolled-back transaction rewinds the positions it moved, so the same
 * member is handed the same records again.
 *
 * The positions, their undo log and the fences are the process's, for its
 * current transaction, whichever of its members they belong to.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lock.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "log/logiter.h"
#include "acl/acl.h"
#include "groups/offsets.h"
#include "groups/ownership.h"
#include "groups/positions.h"

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
	uint64		membership;		/* the member's join it was loaded in */
	SubTransactionId subid;		/* (sub)transaction of its newest undo record */
	bool		stale;			/* reload from the offsets table */
	bool		polled;			/* touched by a poll since the last commit */
	bool		listed;			/* in moved[] */
} Position;

static HTAB *positions = NULL;

/*
 * The positions that may have moved past their committed offset: every
 * one changed since the last commit that found it committed.  A commit
 * walks these instead of the whole table, which holds a position per
 * partition assigned (the scale bench: 512 a member, and the walk of them
 * all at every commit and transaction end cost 8% of a 1,000-partition
 * consume).  Entries are dynahash's, whose addresses stay put until
 * removed: every removal goes through remove_position, which unlists it.
 */
static Position **moved = NULL;
static int	nmoved = 0;
static int	maxmoved = 0;

/*
 * Counts every change to the set of positions or to one's freshness: an
 * entry made, removed or rewound, or marked stale.  MqPositionsSync
 * remembers it with the member, membership and generation of its last
 * sync that left every assigned partition with a fresh position, and
 * skips its walk when none of them moved: a poll over hundreds of
 * partitions would otherwise pay a hash lookup per partition per call
 * (the scale bench: 15% of a 1,000-partition poll).
 */
static uint64 positions_changed = 0;

static struct
{
	bool		valid;
	char		member_id[MQ_MEMBER_ID_LEN];
	char		group[MQ_GROUP_NAME_LEN];
	uint64		membership;
	int			generation;
	uint64		changed;
} last_sync;

static HTAB *
position_table(void)
{
	HASHCTL		ctl;

	if (positions)
		return positions;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(PosKey);
	ctl.entrysize = sizeof(Position);
	ctl.hcxt = TopMemoryContext;
	positions = hash_create("mqlog positions", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	return positions;
}

static void
make_key(PosKey *key, const char *group, const char *member_id, int32 topic_id, int32 partition)
{
	memset(key, 0, sizeof(*key));
	strlcpy(key->member_id, member_id, MQ_MEMBER_ID_LEN);
	strlcpy(key->group, group, MQ_GROUP_NAME_LEN);
	key->topic_id = topic_id;
	key->partition = partition;
}

static Position *
find_position(const char *group, const char *member_id, int32 topic_id, int32 partition)
{
	PosKey		key;

	make_key(&key, group, member_id, topic_id, partition);
	return hash_search(position_table(), &key, HASH_FIND, NULL);
}

static void
list_moved(Position *pos)
{
	if (pos->listed)
		return;
	if (nmoved == maxmoved)
	{
		maxmoved = Max(16, maxmoved * 2);
		moved = moved ? repalloc(moved, sizeof(Position *) * maxmoved)
			: MemoryContextAlloc(TopMemoryContext, sizeof(Position *) * maxmoved);
	}
	moved[nmoved++] = pos;
	pos->listed = true;
}

static void
unlist_moved(int i)
{
	moved[i]->listed = false;
	moved[i] = moved[--nmoved];
}

/* the only way a position leaves the table */
static void
remove_position(Position *pos)
{
	if (pos->listed)
		for (int i = 0; i < nmoved; i++)
			if (moved[i] == pos)
			{
				unlist_moved(i);
				break;
			}
	hash_search(positions, &pos->key, HASH_REMOVE, NULL);
}

/* is the position one of this member's in this group? */
static bool
belongs_to(Position *pos, const char *group, const char *member_id)
{
	return strcmp(pos->key.group, group) == 0 && strcmp(pos->key.member_id, member_id) == 0;
}

/* the lock that orders a partition's handover, see the file header */
static void
handover_locktag(LOCKTAG *tag, const char *group, int32 topic_id, int32 partition)
{
	uint32		h = hash_bytes((const unsigned char *) group, strlen(group));

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, h,
						 (uint32) topic_id * 65599u + (uint32) partition, 3);
}

/* ------------------------------------------------------------------------
 * Fences
 * ------------------------------------------------------------------------ */

/* a member of a group whose commits this transaction refuses */
typedef struct Fence
{
	char		member_id[MQ_MEMBER_ID_LEN];
	char		group[MQ_GROUP_NAME_LEN];
} Fence;

static List *fences = NIL;

static bool
is_fenced(const char *group, const char *member_id)
{
	ListCell   *lc;

	foreach(lc, fences)
	{
		Fence	   *f = lfirst(lc);

		if (strcmp(f->group, group) == 0 && strcmp(f->member_id, member_id) == 0)
			return true;
	}
	return false;
}

/*
 * Remember until the end of the transaction that a member may not commit
 * in a group.  The list lives as long as the transaction's state, beyond
 * the per-call memory of the poll that notices the loss: its cells and
 * entries are allocated in TopMemoryContext and freed by
 * positions_xact_callback.  (A cell once came from the caller's context,
 * and a later lappend or the list_free_deep at COMMIT touched freed
 * memory: issue 16's crash.)
 */
static void
fence(const char *group, const char *member_id)
{
	MemoryContext old;
	Fence	   *f;

	if (is_fenced(group, member_id))
		return;
	old = MemoryContextSwitchTo(TopMemoryContext);
	f = palloc0(sizeof(Fence));
	strlcpy(f->member_id, member_id, MQ_MEMBER_ID_LEN);
	strlcpy(f->group, group, MQ_GROUP_NAME_LEN);
	fences = lappend(fences, f);
	MemoryContextSwitchTo(old);
}

/* fence the position's member if this transaction handed out its records */
static void
fence_if_polled(Position *pos)
{
	if (pos->polled && pos->subid != InvalidSubTransactionId &&
		pos->position != pos->committed)
		fence(pos->key.group, pos->key.member_id);
}

/* A transaction that lost a partition it polled must not commit the rest. */
static void
check_not_fenced(const char *group, const char *member_id)
{
	if (is_fenced(group, member_id))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit offsets for group \"%s\"", group),
				 errdetail("A partition this transaction polled was reassigned to another member by a rebalance."),
				 errhint("Roll back and poll again: the records will be delivered to the partition's new owner.")));
}

/* ------------------------------------------------------------------------
 * Undo log
 * ------------------------------------------------------------------------ */

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
	bool		stale;			/* it was to be reloaded */
	uint64		membership;		/* the join its values were loaded in */
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
	u->stale = pos->stale;
	u->membership = pos->membership;
	u->position = pos->position;
	u->committed = pos->committed;
	pos->subid = u->subid;
}

/* a new entry; undone (removed) if this subtransaction aborts */
static void
init_position(Position *pos, uint64 membership, int64 committed)
{
	pos->polled = false;
	pos->stale = false;
	pos->listed = false;
	pos->membership = membership;
	pos->subid = InvalidSubTransactionId;
	pos->position = pos->committed = committed;
	push_undo(pos, true);
	positions_changed++;
}

/* call before changing a position: remembers its values once per subtransaction */
static void
save_position(Position *pos)
{
	if (pos->subid != GetCurrentSubTransactionId())
		push_undo(pos, false);
	list_moved(pos);
}

static void
apply_undo(Undo *u)
{
	Position   *pos = hash_search(positions, &u->key, HASH_FIND, NULL);

	if (pos == NULL)
		return;					/* revoked meanwhile: nothing to rewind */
	positions_changed++;
	if (u->created)
	{
		remove_position(pos);
		return;
	}
	list_moved(pos);
	pos->position = u->position;
	pos->committed = u->committed;
	pos->subid = u->prev_subid;

	/*
	 * Values from before a reload that is undone, or loaded in an earlier
	 * membership of the member: the next sync reloads them from the
	 * committed offset, as it would have without the rolled-back work (a
	 * member that joined again starts from the committed offset, whatever
	 * its old membership polled).
	 */
	if (u->stale || u->membership != pos->membership)
		pos->stale = true;
}

static void
positions_xact_callback(XactEvent event, void *arg)
{
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
	/* what had a subtransaction has an undo record (push_undo) */
	for (int i = 0; i < nundo; i++)
	{
		Position   *pos = hash_search(positions, &undo[i].key, HASH_FIND, NULL);

		if (pos)
			pos->subid = InvalidSubTransactionId;
	}
	nundo = 0;
	list_free_deep(fences);
	fences = NIL;
}

static void
positions_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
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

void
MqPositionsInitCallbacks(void)
{
	RegisterXactCallback(positions_xact_callback, NULL);
	RegisterSubXactCallback(positions_subxact_callback, NULL);
}

/* ------------------------------------------------------------------------
 * Positions
 * ------------------------------------------------------------------------ */

/*
 * A position from the committed offset (a new or a stale one): wait for a
 * commit of the partition's previous owner that is in flight, then read
 * where it left off.  Undone with the subtransaction, which leaves the
 * position stale again.
 */
static void
reload_begin(Position *pos)
{
	LOCKTAG		tag;

	save_position(pos);
	positions_changed++;
	pos->stale = false;
	handover_locktag(&tag, pos->key.group, pos->key.topic_id, pos->key.partition);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

static void
reload_finish(Position *pos, int64 committed)
{
	pos->committed = committed;
	/* no offset, or one retention removed: the poll applies the policy */
	pos->position = pos->committed;
}

static void
reload_position(Position *pos)
{
	reload_begin(pos);
	reload_finish(pos, MqOffsetRead(pos->key.group, pos->key.topic_id, pos->key.partition));
}

/*
 * Reload many positions: each waits for its handover first, then the
 * committed offsets of a topic with many of them are read in one scan.
 */
#define RELOAD_SCAN_MIN	8

static void
reload_positions(Position **todo, int n, MqTopic **topics, int ntopics)
{
	for (int i = 0; i < n; i++)
		reload_begin(todo[i]);
	for (int t = 0; t < ntopics; t++)
	{
		int			count = 0;
		int64	   *offsets;
		const char *group = NULL;

		/* (todo[i] is NULL once reloaded: a topic may be listed twice) */
		for (int i = 0; i < n; i++)
			if (todo[i] != NULL && todo[i]->key.topic_id == topics[t]->topic_id)
			{
				count++;
				group = todo[i]->key.group;
			}
		if (count < RELOAD_SCAN_MIN)
			continue;
		offsets = palloc(sizeof(int64) * topics[t]->partitions);
		MqOffsetReadTopic(group, topics[t]->topic_id, topics[t]->partitions, offsets);
		for (int i = 0; i < n; i++)
			if (todo[i] != NULL && todo[i]->key.topic_id == topics[t]->topic_id)
			{
				reload_finish(todo[i], offsets[todo[i]->key.partition]);
				todo[i] = NULL;
			}
		pfree(offsets);
	}
	for (int i = 0; i < n; i++)
		if (todo[i] != NULL)
			reload_finish(todo[i], MqOffsetRead(todo[i]->key.group, todo[i]->key.topic_id,
												todo[i]->key.partition));
}

void
MqPositionsSync(const char *group, const char *member_id, const MqAssignment *assignment,
				MqTopic **topics, int ntopics)
{
	HASH_SEQ_STATUS seq;
	Position   *pos;
	MqTopicPart *sorted;
	bool		complete = true;
	Position  **todo;
	int			ntodo = 0;

	if (last_sync.valid && last_sync.changed == positions_changed &&
		last_sync.membership == assignment->membership &&
		last_sync.generation == assignment->generation &&
		strcmp(last_sync.group, group) == 0 && strcmp(last_sync.member_id, member_id) == 0)
		return;
	last_sync.valid = false;

	/* every position of the member is looked up in the assignment */
	sorted = palloc(sizeof(MqTopicPart) * Max(assignment->nparts, 1));
	memcpy(sorted, assignment->parts, sizeof(MqTopicPart) * assignment->nparts);
	MqTopicPartSort(sorted, assignment->nparts);
	hash_seq_init(&seq, position_table());
	while ((pos = hash_seq_search(&seq)) != NULL)
	{
		if (!belongs_to(pos, group, member_id))
			continue;

		/*
		 * A new membership (after an eviction) starts from the committed
		 * offsets, as a Kafka consumer does after it rejoins; if this
		 * transaction had polled under the old membership, it may not
		 * commit.
		 */
		if (pos->membership != assignment->membership)
		{
			fence_if_polled(pos);
			positions_changed++;
			pos->stale = true;
			pos->membership = assignment->membership;
		}
		if (!MqTopicPartInSorted(sorted, assignment->nparts,
								 pos->key.topic_id, pos->key.partition))
		{
			/* records polled in this transaction now belong to another member */
			fence_if_polled(pos);
			positions_changed++;
			remove_position(pos);
		}
	}

	todo = palloc(sizeof(Position *) * Max(assignment->nparts, 1));
	for (int i = 0; i < assignment->nparts; i++)
	{
		const MqTopicPart *tp = &assignment->parts[i];
		PosKey		key;
		bool		found;
		MqTopic    *topic = NULL;

		make_key(&key, group, member_id, tp->topic_id, tp->partition);
		pos = hash_search(positions, &key, HASH_ENTER, &found);
		if (found && !pos->stale)
			continue;
		if (!found)
			pos->listed = false;
		for (int t = 0; t < ntopics; t++)
			if (topics[t]->topic_id == tp->topic_id)
				topic = topics[t];
		if (topic == NULL || tp->partition >= topic->partitions)
		{
			/* the caller's topics do not know it yet: try again next time */
			remove_position(pos);
			complete = false;
			continue;
		}
		if (!found)
			init_position(pos, assignment->membership, -1);
		todo[ntodo++] = pos;
	}
	reload_positions(todo, ntodo, topics, ntopics);
	pfree(todo);
	pfree(sorted);
	if (complete)
	{
		strlcpy(last_sync.group, group, MQ_GROUP_NAME_LEN);
		strlcpy(last_sync.member_id, member_id, MQ_MEMBER_ID_LEN);
		last_sync.membership = assignment->membership;
		last_sync.generation = assignment->generation;
		last_sync.changed = positions_changed;
		last_sync.valid = true;
	}
}

bool
MqPositionGet(const char *group, const char *member_id, int32 topic_id, int32 partition,
			  int64 *position)
{
	Position   *pos = find_position(group, member_id, topic_id, partition);

	if (pos == NULL)
		return false;
	*position = pos->position;
	return true;
}

void
MqPositionMove(const char *group, const char *member_id, int32 topic_id, int32 partition,
			   int64 position, bool polled)
{
	Position   *pos = find_position(group, member_id, topic_id, partition);

	if (pos == NULL)
		elog(ERROR, "mqlog: member %s of group \"%s\" has no position on partition %d of topic %d",
			 member_id, group, partition, topic_id);
	save_position(pos);
	pos->position = position;
	if (polled)
		pos->polled = true;
}

/* a member's leave: its positions go (this transaction's undo finds none) */
void
MqPositionsForget(const char *group, const char *member_id)
{
	HASH_SEQ_STATUS seq;
	Position   *pos;

	hash_seq_init(&seq, position_table());
	while ((pos = hash_seq_search(&seq)) != NULL)
		if (belongs_to(pos, group, member_id))
			remove_position(pos);
	positions_changed++;
}

/* a position the member did not have, from the committed offset */
static Position *
load_position(PosKey *key, uint64 membership)
{
	int64		committed = MqOffsetRead(key->group, key->topic_id, key->partition);
	Position   *pos = hash_search(position_table(), key, HASH_ENTER, NULL);

	/* entered only once the read succeeded: a failed read leaves no entry */
	init_position(pos, membership, committed);
	return pos;
}

/*
 * The member's position entry for an explicit partition (mq_seek, an
 * explicit commit), after the check that the role may use the group (and,
 * record, the group's ownership made durable for a commit) and before the
 * offset is checked against the log.  *a: the member's assignment, read
 * once for both.
 */
static Position *
explicit_position(const char *group, const char *member_id, MqTopic *topic,
				  int32 partition, int64 offset, MqGroupAccess access, bool record,
				  MqAssignment *a)
{
	PosKey		key;
	Position   *pos;

	(void) MqGroupAssignment(group, member_id, a);
	MqGroupAuthorizeCommit(group, access, a->owner, record);
	MqCheckPartition(topic, partition);
	make_key(&key, group, member_id, topic->topic_id, partition);
	pos = hash_search(position_table(), &key, HASH_FIND, NULL);

	/*
	 * Assigned, but its position was never loaded (a poll failed before it
	 * could, e.g. with mqlog.auto_offset_reset = none): load it now, so that
	 * mq_seek can position it.
	 */
	if (pos == NULL && MqTopicPartListed(a->parts, a->nparts, topic->topic_id, partition))
		pos = load_position(&key, a->membership);
	if (pos == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("partition %d of topic \"%s\" is not assigned to this session in group \"%s\"",
						partition, topic->name, group),
				 errhint("Poll first; see mqlog.group_members for the assignment.")));
	MqCheckOffsetRange(topic, partition, offset, true);
	return pos;
}

void
MqGroupSeek(const char *group, const char *member_id, MqTopic *topic, int32 partition,
			int64 offset)
{
	MqAssignment a;
	Position   *pos = explicit_position(group, member_id, topic, partition, offset,
										MQ_GROUP_USE_EXISTING, false, &a);

	/* a stale position is reloaded now, or the next poll's reload undoes the seek */
	if (pos->stale)
		reload_position(pos);
	save_position(pos);
	pos->position = offset;
}

/* ------------------------------------------------------------------------
 * Commits
 * ------------------------------------------------------------------------ */

static void
commit_fails(Position *pos, const char *topic_name, const char *detail)
{
	positions_changed++;
	pos->stale = true;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not commit offset of partition %d of topic \"%s\" for group \"%s\"",
					pos->key.partition, topic_name, pos->key.group),
			 errdetail("%s", detail),
			 errhint("Roll back and poll again.")));
}

/* a member that commits at a generation must still be at it */
static void
check_generation(const char *group, const MqAssignment *a, int generation)
{
	if (generation != MQ_ANY_GENERATION && a->generation != generation)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not commit offsets for group \"%s\"", group),
				 errdetail("The member consumed in generation %d; the group is at generation %d.",
						   generation, a->generation),
				 errhint("Roll back and poll again.")));
}

/* the partition must still be the member's, at the generation it commits at */
static void
check_assigned(Position *pos, const MqAssignment *a, int generation, const char *topic_name)
{
	if (!MqTopicPartListed(a->parts, a->nparts, pos->key.topic_id, pos->key.partition))
		commit_fails(pos, topic_name,
					 "The partition was reassigned to another member by a rebalance.");
	check_generation(pos->key.group, a, generation);
}

/*
 * Take the handover locks of the positions about to be committed, in their
 * order, as far as each is free at once; returns how many were taken.  The
 * caller then reads the member's assignment once, under those locks, which
 * is all a commit that meets no other commit needs.  A lock that is held
 * (another member's commit of the partition is in flight) is left to
 * commit_one, which fails at once if the partition is no longer the
 * member's and otherwise waits; the locks after it are left too, so that
 * every commit takes them in the same order.
 *
 * The locks come before the access check (which needs the assignment's
 * live owner): a role that may not use the group holds them only until its
 * check fails and aborts its (sub)transaction, and never waits for them.
 */
static int
lock_at_once(Position **todo, int n)
{
	LOCKTAG		tag;

	for (int i = 0; i < n; i++)
	{
		handover_locktag(&tag, todo[i]->key.group, todo[i]->key.topic_id, todo[i]->key.partition);
		if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
			return i;
	}
	return n;
}

/*
 * Commit one partition's offset: under the partition's handover lock, the
 * member's assignment read under it, then the conditional write (see the
 * file header).  *a is the assignment as the caller read it; locked: with
 * this partition's lock held already (lock_at_once).  If not, a member that
 * lost the partition fails at once, without waiting, and the assignment is
 * read again once the lock is held: the one case where a commit visits the
 * registry twice.
 */
static void
commit_one(Position *pos, int generation, int64 offset, const char *topic_name,
		   MqAssignment *a, bool locked)
{
	if (!locked)
	{
		LOCKTAG		tag;

		check_assigned(pos, a, generation, topic_name);
		handover_locktag(&tag, pos->key.group, pos->key.topic_id, pos->key.partition);
		(void) LockAcquire(&tag, ExclusiveLock, false, false);
		(void) MqGroupAssignment(pos->key.group, pos->key.member_id, a);
	}
	check_assigned(pos, a, generation, topic_name);
	if (!MqOffsetWriteIf(pos->key.group, pos->key.topic_id, pos->key.partition, pos->committed, offset))
		commit_fails(pos, topic_name,
					 "Another member or an offset reset committed this partition meanwhile.");
	save_position(pos);
	pos->committed = offset;
	pos->polled = false;
}

/*
 * A topic's name, once the caller is known to hold consume on it; NULL if
 * the topic was dropped since the member read it: its committed offsets
 * went with it, and there is nothing to commit there (as a Kafka consumer's
 * commit of a deleted topic's partition fails for that partition alone).
 */
static const char *
topic_name_of(int32 topic_id)
{
	MqTopic    *topic = MqTopicFindById(topic_id);

	if (topic == NULL)
		return NULL;
	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	return topic->name;
}

static int
position_cmp(const void *a, const void *b)
{
	const Position *pa = *(Position *const *) a;
	const Position *pb = *(Position *const *) b;

	if (pa->key.topic_id != pb->key.topic_id)
		return pa->key.topic_id < pb->key.topic_id ? -1 : 1;
	return pa->key.partition < pb->key.partition ? -1 :
		pa->key.partition > pb->key.partition ? 1 : 0;
}

/*
 * The member's positions that moved since their last commit, in the order
 * of their partitions (the table's walk has none); with only, just those
 * of the partitions it lists, loaded in its membership.  *n: how many.
 */
static Position **
moved_positions(const char *group, const char *member_id, const MqAssignment *only, int *n)
{
	Position  **todo = palloc(sizeof(Position *) * Max(nmoved, 1));

	*n = 0;
	for (int i = nmoved - 1; i >= 0; i--)
	{
		Position   *pos = moved[i];

		if (pos->position == pos->committed)
		{
			unlist_moved(i);	/* the last entry moves to i: already seen */
			continue;
		}
		if (belongs_to(pos, group, member_id) && pos->position >= 0 &&
			(only == NULL ||
			 (pos->membership == only->membership && !pos->stale &&
			  MqTopicPartListed(only->parts, only->nparts, pos->key.topic_id, pos->key.partition))))
			todo[(*n)++] = pos;
	}
	qsort(todo, *n, sizeof(Position *), position_cmp);
	return todo;
}

/* commit todo[0..n), of which the first nlocked hold their lock already */
static int64
commit_positions(Position **todo, int n, int nlocked, int generation, MqAssignment *a)
{
	int64		count = 0;

	for (int i = 0; i < n; i++)
	{
		const char *topic_name = topic_name_of(todo[i]->key.topic_id);

		if (topic_name == NULL)
			continue;
		commit_one(todo[i], generation, todo[i]->position, topic_name, a, i < nlocked);
		count++;
	}
	return count;
}

/*
 * mq_commit: the member's positions that moved.  One visit each of the
 * registry (the assignment and the live owner, read under the handover
 * locks) and of ownership.c (the check, and the group's ownership made
 * durable), then the writes (offsets.c).  The errors keep their order:
 * permission first, then membership, generation and fence.
 */
int64
MqGroupCommit(const char *group, const char *member_id, int generation)
{
	int			n;
	Position  **todo = moved_positions(group, member_id, NULL, &n);
	int			nlocked = lock_at_once(todo, n);
	MqAssignment a;
	bool		member = MqGroupAssignment(group, member_id, &a);

	MqGroupAuthorizeCommit(group, MQ_GROUP_USE, a.owner, member && n > 0);
	if (!member)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("this session is not a member of consumer group \"%s\"", group),
				 errhint("Call mq_poll() first; a member that did not poll for max.poll.interval.ms is evicted.")));
	check_generation(group, &a, generation);
	check_not_fenced(group, member_id);
	return commit_positions(todo, n, nlocked, generation, &a);
}

/*
 * Kafka's enable.auto.commit (mqlog.enable_auto_commit): at the start of a
 * poll, the member's positions in the partitions it holds now (a, just
 * joined) are committed in the poll's transaction, so that what the
 * previous poll handed out counts as processed once the application polls
 * again: at least once.  A member fenced in this transaction commits
 * nothing and no error is raised, as Kafka's auto-commit skips a commit a
 * rebalance made fail; partitions it no longer holds are left to their new
 * owner.  The poll's join checked the role: the group's ownership is made
 * durable with the live owner the join saw.  Returns how many offsets it
 * committed.
 */
int64
MqGroupAutoCommit(const char *group, const char *member_id, const MqAssignment *a)
{
	int			n;
	Position  **todo;
	MqAssignment now = *a;

	if (is_fenced(group, member_id))
		return 0;
	todo = moved_positions(group, member_id, a, &n);
	if (n == 0)
		return 0;
	MqGroupPersistOwner(group, a->owner);
	/* a was read before the locks: commit_one reads it again under each */
	return commit_positions(todo, n, 0, MQ_ANY_GENERATION, &now);
}

void
MqGroupCommitOffset(const char *group, const char *member_id, int generation,
					MqTopic *topic, int32 partition, int64 offset)
{
	MqAssignment a;
	Position   *pos = explicit_position(group, member_id, topic, partition, offset,
										MQ_GROUP_USE, true, &a);

	check_not_fenced(group, member_id);
	commit_one(pos, generation, offset, topic->name, &a, false);
}

/*
 * A commit for a member of a group coordinated outside the registry (the
 * Kafka listener's, which checked the member and its generation before):
 * the group's use, consume on the topic, the group's ownership made
 * durable, the handover lock, and the offset written whatever the row held,
 * as Kafka's coordinator writes it.  The registry keeps SQL sessions out of
 * such a group while it has members (MqGroupHostExternally), so no SQL
 * member's conditional write races this one.
 *
 * Any offset from 0 up is taken, past the log end too, as Kafka's
 * coordinator takes what a client commits without looking at the log (a
 * consumer's Fetch there is OFFSET_OUT_OF_RANGE and its auto.offset.reset
 * applies; kafka-consumer-groups --reset-offsets --to-offset and
 * librdkafka's own tests commit such offsets).  mq_commit and mq_seek keep
 * SQL positions inside the log; a SQL member that loads an offset past the
 * log end waits there for the log to reach it.
 */
void
MqGroupCommitExternal(const char *group, MqTopic *topic, int32 partition, int64 offset)
{
	LOCKTAG		tag;
	Oid			live = MqGroupAuthorize(group, MQ_GROUP_USE);

	MqTopicCheckPrivilege(topic, MQ_PRIV_CONSUME);
	MqCheckPartition(topic, partition);
	if (offset < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset " INT64_FORMAT " is out of range for partition %d of topic \"%s\"",
						offset, partition, topic->name),
				 errdetail("A committed offset is 0 or more.")));
	MqGroupPersistOwner(group, live);
	handover_locktag(&tag, group, topic->topic_id, partition);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	MqOffsetWrite(group, topic->topic_id, partition, offset);
}

/* a group's committed offset of a partition, -1 if none (describe needed) */
int64
MqGroupCommittedOffset(const char *group, MqTopic *topic, int32 partition)
{
	(void) MqGroupAuthorize(group, MQ_GROUP_USE_EXISTING);
	MqTopicCheckPrivilege(topic, MQ_PRIV_DESCRIBE);
	MqCheckPartition(topic, partition);
	return MqOffsetRead(group, topic->topic_id, partition);
}
