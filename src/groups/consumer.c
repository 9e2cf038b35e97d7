/*-------------------------------------------------------------------------
 *
 * consumer.c
 *		A member's poll and its leave, the calls that span membership
 *		(ownership.c's check, then registry.c's join) and positions
 *		(positions.c): join, bring the positions in line with the
 *		assignment, read the assigned partitions from them, wait for
 *		records, give way to DDL.
 *
 * A poll enters ownership.c once (its check, from the cache once the group
 * has a durable owner) and then the registry once (the join, which hands
 * back the assignment and the live owner): the check comes first so that a
 * role that may not use the group does not even heartbeat a membership.
 * Only a role joining a group that another role's session created and
 * nobody committed to yet goes round twice (join).
 *
 * A poll waits on the condition variable that every committing producer,
 * every rebalance and every DDL announcement broadcasts, so it sleeps in
 * one member's poll at a time: a process that hosts many members and
 * waits for all of them would sleep on that condition variable itself and
 * read with the registry's and positions' functions, as poll_once does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgstat.h"
#include "storage/condition_variable.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "log/partition.h"
#include "groups/ownership.h"
#include "groups/positions.h"
#include "groups/registry.h"

/* settings (session): a SQL session's members take theirs from these */
int			mqlog_assignor = MQ_ASSIGN_RANGE;
int			mqlog_offset_reset = MQ_RESET_EARLIEST;
int			mqlog_max_poll_interval_ms = 300000;
bool		mqlog_enable_auto_commit = false;
int			mqlog_poll_recheck_interval = 1000;

/*
 * Where a poll starts among the member's partitions, so that one with data
 * cannot always come first: each poll of a member moves it on.  It is the
 * member's own (a session may poll as several members, of several groups):
 * with one counter for the process, a member of 2 partitions polled
 * between the polls of one of 12 set where the latter started, to 1 or 2
 * every time, and its partitions 3 to 11 got nothing while 1 and 2 had
 * data (sql/poll_rotation.sql).
 *
 * resumed: the member's last poll over many partitions ended on a
 * partition with the poll full, likely inside a stored batch, and its next
 * poll starts there again (rotation names it) to take the rest of that
 * batch, as a Kafka consumer hands out one partition's fetched records
 * before the next: its pages and its CRC were just paid for (and the
 * reader keeps the batch).  Once only: a poll that started there by
 * resuming moves on, so that a partition with endless data does not keep
 * the polls.
 *
 * The last few members polled are kept; one forgotten starts again at its
 * first partition.
 */
#define MQ_POLL_ROTATIONS	16

typedef struct PollRotation
{
	char	   *group;			/* NULL: unused */
	char	   *member_id;
	int			rotation;
	bool		resumed;
	uint64		used;
} PollRotation;

static PollRotation poll_rotations[MQ_POLL_ROTATIONS];
static uint64 poll_clock = 0;

/* the member's rotation, made (at 0) if it has none */
static PollRotation *
poll_rotation_of(const char *group, const char *member_id)
{
	PollRotation *r = &poll_rotations[0];

	for (int i = 0; i < MQ_POLL_ROTATIONS; i++)
	{
		PollRotation *e = &poll_rotations[i];

		if (e->group != NULL && strcmp(e->group, group) == 0 &&
			strcmp(e->member_id, member_id) == 0)
		{
			e->used = ++poll_clock;
			return e;
		}
		if (e->group == NULL || (r->group != NULL && e->used < r->used))
			r = e;
	}
	if (r->group != NULL)
	{
		pfree(r->group);
		pfree(r->member_id);
	}
	r->group = MemoryContextStrdup(TopMemoryContext, group);
	r->member_id = MemoryContextStrdup(TopMemoryContext, member_id);
	r->rotation = 0;
	r->resumed = false;
	r->used = ++poll_clock;
	return r;
}

/*
 * Where a position goes that is no offset yet (-1: the group never
 * committed this partition) or that retention has overtaken: Kafka's
 * auto.offset.reset, the member's offset_reset, for both cases.
 */
static int64
reset_position(const char *group, MqTopic *topic, int32 partition, int64 position,
			   int offset_reset)
{
	int64		start = MqLogStartOffset(topic, partition);
	int64		lso,
				hw;

	if (offset_reset == MQ_RESET_EARLIEST)
		return start;
	if (offset_reset == MQ_RESET_LATEST)
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
 * member's last_poll, so it never waits more than half of the member's
 * max_poll_interval_ms: a waiting member must not look idle to the
 * coordinator (the join stored that value in the member).
 */
static long
poll_sleep_ms(TimestampTz deadline, int max_poll_interval_ms)
{
	long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

	return Max(1, Min(Min(mqlog_poll_recheck_interval, max_poll_interval_ms / 2), left));
}

/* One round over the assigned partitions, starting at a rotating index. */
static int
poll_once(const char *group, const char *member_id, const MqAssignment *a,
		  MqTopic **topics, int ntopics, int offset_reset, int max_records,
		  MqRecordOutput *out)
{
	int			n = a->nparts;
	int			total = 0;
	PollRotation *rot = poll_rotation_of(group, member_id);
	int			start = n > 0 ? (rot->rotation % n) : 0;
	bool		resumed = rot->resumed;

	rot->rotation = start + 1;
	rot->resumed = false;
	for (int k = 0; k < n && total < max_records; k++)
	{
		const MqTopicPart *p = &a->parts[(start + k) % n];
		MqTopic    *topic = NULL;
		int64		position;
		int			got;
		int			fair;
		int			share;
		int64		next;

		for (int t = 0; t < ntopics; t++)
			if (topics[t]->topic_id == p->topic_id)
				topic = topics[t];
		if (topic == NULL ||
			!MqPositionGet(group, member_id, p->topic_id, p->partition, &position))
			continue;
		if (position < MqLogStartOffset(topic, p->partition))
		{
			position = reset_position(group, topic, p->partition, position, offset_reset);
			MqPositionMove(group, member_id, p->topic_id, p->partition, position, false);
		}

		/*
		 * A fair share per partition when several have data, so that one
		 * hot partition does not starve the rest; but at least an eighth
		 * of max_records: over a thousand partitions the fair share of 500
		 * is one record, and a read of one partition costs its lookup, a
		 * page and a batch's decoding however few records it takes (the
		 * scale bench: 15k records/s at 1,000 partitions against 660k at
		 * one).  The start rotating by one partition a poll, every
		 * partition is still read in turn.  Where that floor applies (the
		 * fair share is given up anyway), a batch begun is read on to its
		 * end within what the poll may still return: its pages and its CRC
		 * are paid for whatever share of it is taken, and the next poll
		 * would pay for them again (batches of 1,000 records over 1,000
		 * partitions: 62 records a read without this).
		 */
		fair = (max_records - total) / Max(n - k, 1);
		share = Max(fair, Max(max_records / 8, 1));
		next = MqReadPartition(topic, p->partition, position,
							   Min(share, max_records - total),
							   fair < share ? max_records - total : share,
							   PG_INT64_MAX, out, &got);
		if (next != position)
			MqPositionMove(group, member_id, p->topic_id, p->partition, next, true);
		total += got;

		/* full here while reading on a batch: the next poll resumes it */
		if (total >= max_records && fair < share && got > 0 && !(resumed && k == 0))
		{
			rot->rotation = start + k;
			rot->resumed = true;
		}
	}
	return total;
}

/*
 * A waiting poll whose topics changed meanwhile (mq_add_partitions, say, on
 * another session: the catalog generation moved) takes their new metadata,
 * and joins again if a partition count changed, so that the new partitions
 * are assigned and read while it waits.  False if nothing it reads changed.
 */
static bool
refresh_topics(MqTopic **topics, int ntopics, uint64 *catalog_seen)
{
	uint64		now = MqlogCatalogGeneration();
	bool		grown = false;

	if (now == *catalog_seen)
		return false;
	*catalog_seen = now;
	for (int t = 0; t < ntopics; t++)
	{
		MqTopic    *fresh = MqTopicLookup(topics[t]->name, true);

		/* gone, or another topic under its name: the drop's wakeup says so */
		if (fresh == NULL || fresh->topic_id != topics[t]->topic_id)
			continue;
		grown |= fresh->partitions != topics[t]->partitions;
		topics[t] = fresh;
	}
	return grown;
}

/*
 * Join (or refresh) a member hosted by this process, subscribed to topics
 * (the caller holds consume on them), once the role is known to be allowed
 * to use the group; rebalances at once if anything changed.  Also the
 * member's heartbeat.  The check is the durable owner's if the group has
 * one; else the registry joins only if the group's live owner is none or
 * the role itself, and otherwise names it: the role is checked against it
 * and joins again (and again, should yet another role's session have
 * created the group in between).
 */
static void
join(const char *group, const char *member_id, MqTopic **topics, int ntopics,
	 const MqMemberConfig *config, MqAssignment *a)
{
	bool		durable;
	Oid			seen = InvalidOid;
	Oid			owner = MqGroupCheckJoin(group, InvalidOid, false, &durable);

	while (!MqGroupJoinAs(group, member_id, topics, ntopics, config, durable, seen, owner, a))
	{
		CHECK_FOR_INTERRUPTS();
		seen = a->owner;
		owner = MqGroupCheckJoin(group, seen, true, &durable);
	}
}

void
MqGroupPoll(const char *group, const char *member_id, MqTopic **caller_topics, int ntopics,
			const MqMemberConfig *config, int max_records, int64 timeout_ms,
			MqRecordOutput *out)
{
	MqAssignment *a = palloc(sizeof(MqAssignment));
	MqTopic   **topics = palloc(sizeof(MqTopic *) * Max(ntopics, 1));
	TimestampTz deadline;
	int			generation = -1;
	bool		sleeping = false;
	uint64		ddl_seen;
	uint64		catalog_seen = MqlogCatalogGeneration();
	bool		auto_committed = false;
	bool		fresh;			/* *a is the join's, read just now */

	memcpy(topics, caller_topics, sizeof(MqTopic *) * ntopics);
	join(group, member_id, topics, ntopics, config, a);
	fresh = true;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	ddl_seen = MqDdlCount(NULL);

	for (;;)
	{
		int			got;

		if (!fresh && !MqGroupAssignment(group, member_id, a))
		{
			/*
			 * Evicted meanwhile: join again, and reload the positions (the
			 * group may be a new one, its generation counting from 0).
			 */
			join(group, member_id, topics, ntopics, config, a);
			generation = -1;
			fresh = true;
			continue;
		}
		fresh = false;
		if (a->generation != generation)
		{
			MqPositionsSync(group, member_id, a, topics, ntopics);
			generation = a->generation;
		}
		/* what the previous poll handed out, once per poll */
		if (config->auto_commit && !auto_committed)
		{
			(void) MqGroupAutoCommit(group, member_id, a);
			auto_committed = true;
		}
		got = poll_once(group, member_id, a, topics, ntopics, config->offset_reset,
						max_records, out);
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
										   poll_sleep_ms(deadline, config->max_poll_interval_ms),
										   PG_WAIT_EXTENSION);
		MqGroupHeartbeat(group, member_id);
		CHECK_FOR_INTERRUPTS();
		yield_to_ddl(&ddl_seen, topics, ntopics);
		if (refresh_topics(topics, ntopics, &catalog_seen))
		{
			join(group, member_id, topics, ntopics, config, a);
			generation = -1;
			fresh = true;
		}
	}
	if (sleeping)
		ConditionVariableCancelSleep();
	pfree(a);
	pfree(topics);
}

bool
MqGroupLeave(const char *group, const char *member_id)
{
	bool		was = MqGroupRemoveMember(group, member_id);

	MqPositionsForget(group, member_id);
	return was;
}
