/*-------------------------------------------------------------------------
 *
 * replica.c
 *		A partition's log as a follower writes it, and what a leader logs
 *		for its followers.
 *
 * A follower's log is the leader's, byte for byte: every batch at the
 * leader's offset with the leader's epoch, aborted ones included, so that
 * offsets, CRCs and later epoch truncation line up.  The follower writes a
 * batch only once the leader has decided its fate, and writes that fate
 * into mqlog's prefix (MQ_BATCH_COMMITTED or MQ_BATCH_ABORTED), so its
 * visibility never depends on the follower's own transaction: an apply
 * transaction that aborts or crashes after the pages were written leaves
 * the leader's batch in place, and applying it again finds it present.
 *
 * acks=all (mqlog.acks) is Kafka's: a produce is refused up front when the
 * partition has fewer in-sync replicas than min.insync.replicas, and the
 * commit returns once the high watermark has passed every record the
 * transaction produced to a replicated partition.  As with PostgreSQL's
 * synchronous replication, the commit is already durable and visible here
 * when the wait begins, so a wait that times out or is cancelled ends in a
 * WARNING, never an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/replica.h"
#include "log/topic.h"
#include "cluster/metadata.h"

static void
diverged(MqTopic *topic, int32 partition, int64 offset, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("replica of partition %d of topic \"%s\" diverges from its leader at offset " INT64_FORMAT,
					partition, topic->name, offset),
			 errdetail("%s", why),
			 errhint("The replica must be truncated to the leader's log before it can follow again.")));
}

/* the batch this log holds at offset base, compared with the leader's */
static MqReplicaAppend
check_present(MqTopic *topic, int32 partition, const char *kafka, Size len,
			  const MqBatchHeader *theirs)
{
	MqLogIter	it;
	bool		found = false;

	MqLogIterBegin(&it, topic, partition, theirs->base_offset, -1,
				   MQ_ITER_BYTES | MQ_ITER_ANY_FATE);
	it.max_bytes = PG_INT64_MAX;
	if (MqLogNextBatch(&it))
	{
		if (it.hdr.base_offset != theirs->base_offset)
			diverged(topic, partition, theirs->base_offset,
					 psprintf("The replica's batch there starts at offset " INT64_FORMAT ".",
							  it.hdr.base_offset));
		if (it.hdr.length - MQ_PREFIX_SIZE != len ||
			memcmp(it.stored + MQ_PREFIX_SIZE, kafka, len) != 0)
			diverged(topic, partition, theirs->base_offset,
					 "The replica holds other bytes there than the leader sends.");
		found = true;
	}
	MqLogIterEnd(&it);
	if (!found)
		diverged(topic, partition, theirs->base_offset,
				 "The replica has no batch there, below its log end offset.");
	return MQ_REPLICA_PRESENT;
}

MqReplicaAppend
MqLogAppendReplica(MqTopic **topicp, int32 partition, const char *kafka, Size len,
				   bool committed, int64 *next_offset)
{
	MqTopic    *topic = *topicp;
	const char *why = MqBatchCheckKafka(kafka, len);
	StringInfoData stored;
	MqBatchHeader hdr;
	int64		lso,
				leo;

	if (why)
		diverged(topic, partition, -1, psprintf("The leader sent a batch that is not valid: %s.", why));
	initStringInfo(&stored);
	MqBatchWrapKafka(&stored, kafka, (uint32) len, GetCurrentTransactionId());
	if (!MqBatchParseHeader(stored.data, stored.len, &hdr) || !MqBatchCheckCrc(stored.data, stored.len))
		diverged(topic, partition, -1, "The leader sent a batch whose header or CRC is not valid.");
	*next_offset = MqBatchNextOffset(&hdr);

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	if (hdr.base_offset < leo)
	{
		pfree(stored.data);
		return check_present(topic, partition, kafka, len, &hdr);
	}
	if (hdr.base_offset > leo)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("replica of partition %d of topic \"%s\" would skip offsets " INT64_FORMAT " to " INT64_FORMAT,
						partition, topic->name, leo, hdr.base_offset - 1)));

	/* the leader's verdict, not this transaction's, decides visibility */
	stored.data[0] = committed ? MQ_BATCH_COMMITTED : MQ_BATCH_ABORTED;
	{
		MqPartition *part = MqTopicPartition(topic, partition);

		MqPartitionCheckInflightRoom(&part, 1);
	}
	(void) MqPartitionAppend(topicp, partition, &stored, hdr.base_offset, -1, NULL);
	pfree(stored.data);
	return MQ_REPLICA_APPENDED;
}

/*
 * Tell the followers' streams how far this partition is decided.  The LSO
 * is read before the message is written, so every commit below it is
 * already in the WAL ahead of the message, with its commit marker.
 */
int64
MqLogMarkLso(MqTopic *topic, int32 partition)
{
	MqLsoMark	mark;
	int64		hw;

	MqPartitionLogEnd(topic, partition, &mark.lso, &hw);
	mark.topic_id = topic->topic_id;
	mark.partition = partition;
	(void) MqLogMessage(MQ_MSG_LSO, (const char *) &mark, sizeof(mark));
	return mark.lso;
}

/* ------------------------------------------------------------------------
 * acks
 * ------------------------------------------------------------------------ */

int			mqlog_acks = MQ_ACKS_LEADER;
int			mqlog_acks_timeout = 30000;

static void acks_at_xact_end(bool commit);

static const struct config_enum_entry acks_options[] = {
	{"1", MQ_ACKS_LEADER, false},
	{"all", MQ_ACKS_ALL, false},
	{"-1", MQ_ACKS_ALL, true},
	{NULL, 0, false}
};

/*
 * mqlog.acks and mqlog.acks_timeout, and the hook that makes a commit wait
 * as they say: called once, when mqlog is loaded (_PG_init).
 */
void
MqReplicaDefineSettings(void)
{
	DefineCustomEnumVariable("mqlog.acks",
							 "When a commit that produced to a replicated partition returns (Kafka's acks).",
							 "1: when this leader has committed it; all: when every in-sync replica holds it too. "
							 "0 has no meaning for SQL, where a produce returns its offset.",
							 &mqlog_acks, MQ_ACKS_LEADER, acks_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.acks_timeout",
							"How long a commit with acks=all waits for the in-sync replicas.",
							"After it the commit returns with a WARNING: it is committed on the leader only.",
							&mqlog_acks_timeout, 30000, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	MqPartitionSetXactEndHook(acks_at_xact_end);
}

typedef struct MqAckWait
{
	MqPartition *part;
	MqReplicaInfo ri;			/* copied: the topic cache may go */
	int			min_isr;
	bool		unclean;		/* the topic's unclean.leader.election.enable */
	int64		end_offset;		/* the transaction's records end before it */
	char		topic[NAMEDATALEN];
	int32		partition;
} MqAckWait;

static List *ack_waits = NIL;	/* MqAckWait, in TopTransactionContext */

/* Kafka's NOT_ENOUGH_REPLICAS, before anything is written */
void
MqReplicaCheckAcks(MqTopic *topic, int32 partition)
{
	const MqReplicaInfo *ri;

	if (mqlog_acks != MQ_ACKS_ALL || topic->replicas == NULL)
		return;
	ri = &topic->replicas[partition];
	if (ri->nisr < topic->min_insync_replicas)
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_ENOUGH_REPLICAS),
				 errmsg("not enough in-sync replicas for partition %d of topic \"%s\"",
						partition, topic->name),
				 errdetail("The partition has %d in-sync replica%s; min.insync.replicas is %d.",
						   ri->nisr, ri->nisr == 1 ? "" : "s", topic->min_insync_replicas),
				 errhint("Produce with mqlog.acks = 1, or wait until the replicas are back in sync (see mqlog.partitions).")));
}

/* remember to wait at commit until the high watermark reaches end_offset */
void
MqReplicaAwaitAt(MqTopic *topic, int32 partition, int64 end_offset)
{
	MemoryContext old;
	MqAckWait  *w;
	ListCell   *lc;

	if (mqlog_acks != MQ_ACKS_ALL || topic->replicas == NULL)
		return;
	foreach(lc, ack_waits)
	{
		w = lfirst(lc);
		if (w->part == MqTopicPartition(topic, partition))
		{
			w->end_offset = Max(w->end_offset, end_offset);
			return;
		}
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	w = palloc0(sizeof(MqAckWait));
	w->part = MqTopicPartition(topic, partition);
	w->ri = topic->replicas[partition];
	w->ri.leader = w->ri.leader ? pstrdup(w->ri.leader) : NULL;
	w->ri.isr = palloc0(sizeof(char *) * Max(w->ri.nisr, 1));
	for (int i = 0; i < w->ri.nisr; i++)
		w->ri.isr[i] = pstrdup(topic->replicas[partition].isr[i]);
	w->min_isr = topic->min_insync_replicas;
	w->unclean = topic->unclean_election;
	w->end_offset = end_offset;
	strlcpy(w->topic, topic->name, NAMEDATALEN);
	w->partition = partition;
	ack_waits = lappend(ack_waits, w);
	MemoryContextSwitchTo(old);
}

/* acks=all waits of this process that ended before the high watermark came */
static uint64 acks_not_reached = 0;

uint64
MqReplicaAcksNotReached(void)
{
	return acks_not_reached;
}

/* ... of which ended because the ISR fell below min.insync.replicas */
static uint64 acks_isr_below = 0;

uint64
MqReplicaAcksIsrBelow(void)
{
	return acks_isr_below;
}

static void
ack_warning(MqAckWait *w, int64 hw, const char *why)
{
	acks_not_reached++;
	ereport(WARNING,
			(errmsg("%s: the transaction has committed on this node, but the in-sync replicas of partition %d of topic \"%s\" may not hold it",
					why, w->partition, w->topic),
			 errdetail("The high watermark is " INT64_FORMAT "; the transaction's records end before " INT64_FORMAT ".",
					   hw, w->end_offset),
			 errhint("With acks=all, treat the commit as uncertain: after the replicas are back in sync (mqlog.partitions), read the partition to see whether the records are there.")));
}

/*
 * Called last at commit (acks_at_xact_end): the commit is durable and
 * visible, locks are still held.  Waits on each partition's condition
 * variable, woken when a follower reports or the high watermark moves,
 * without CHECK_FOR_INTERRUPTS (an error here would be too late): a
 * cancel or a termination ends the wait with a warning, as
 * SyncRepWaitForLSN does.  statement_timeout is off during COMMIT, so
 * mqlog.acks_timeout alone bounds the wait.
 */
static void
await_acks(void)
{
	List	   *waits = ack_waits;
	ListCell   *lc;
	TimestampTz deadline;
	const char *stop_why = NULL;	/* set when the wait ends early */

	ack_waits = NIL;
	if (waits == NIL)
		return;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), mqlog_acks_timeout);
	foreach(lc, waits)
	{
		MqAckWait  *w = lfirst(lc);
		ConditionVariable *cv = MqPartitionCV(w->part);
		int64		hw;

		for (;;)
		{
			long		left;

			/*
			 * A broadcast takes us off the wait list: join it again before
			 * each look, so that no wakeup between the look and the sleep
			 * is lost.
			 */
			ConditionVariablePrepareToSleep(cv);
			hw = MqPartitionUpdateHighWatermark(w->part, &w->ri, w->min_isr);
			if (hw >= w->end_offset)
				break;
			/* the ISR round shrank it below min.insync.replicas: Kafka fails the wait at once */
			if (stop_why == NULL && MqPartitionIsrBelow(w->part, w->ri.leader_epoch, w->min_isr))
			{
				acks_isr_below++;
				ack_warning(w, hw, "the in-sync replicas fell below min.insync.replicas while the transaction waited for them");
				break;
			}
			/* a leader that may have been replaced acknowledges nothing more */
			if (stop_why == NULL &&
				MqClusterLeaderFence((const char *const *) w->ri.isr, w->ri.nisr, w->unclean) != NULL)
				stop_why = "this node's lease in etcd lapsed while it waited for the in-sync replicas";
			if (stop_why != NULL)
			{
				/* the wait has ended (the postmaster died, or for an earlier partition): report */
				ack_warning(w, hw, stop_why);
				break;
			}
			left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (left <= 0)
				stop_why = "timed out waiting for the in-sync replicas";
			else if (ProcDiePending)
			{
				stop_why = "terminating the wait for the in-sync replicas";
				/* as SyncRepWaitForLSN: the client must not take this as a success */
				whereToSendOutput = DestNone;
			}
			else if (QueryCancelPending)
			{
				QueryCancelPending = false;
				stop_why = "canceled the wait for the in-sync replicas";
			}
			if (stop_why != NULL)
			{
				ack_warning(w, hw, stop_why);
				break;
			}
			/*
			 * Not WL_EXIT_ON_PM_DEATH: exiting here, with the commit
			 * recorded, would abort the committed transaction on the way
			 * out, which PANICs.  As SyncRepWaitForLSN does, the wait ends
			 * and the exit comes at the next CHECK_FOR_INTERRUPTS, after
			 * the commit.
			 */
			if (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
						  Min(left, 1000), PG_WAIT_EXTENSION) & WL_POSTMASTER_DEATH)
			{
				ProcDiePending = true;
				whereToSendOutput = DestNone;
				stop_why = "the postmaster died while the transaction waited for the in-sync replicas";
				continue;		/* reported above, after a last look */
			}
			ResetLatch(MyLatch);
		}
		ConditionVariableCancelSleep();
	}
}

/*
 * The partition's hook at the end of every top transaction
 * (MqPartitionSetXactEndHook): at commit the acks=all wait, at abort the
 * waits are forgotten.
 */
static void
acks_at_xact_end(bool commit)
{
	if (commit)
		await_acks();
	else
		ack_waits = NIL;		/* its memory goes with the transaction */
}
