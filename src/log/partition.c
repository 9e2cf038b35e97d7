/*-------------------------------------------------------------------------
 *
 * partition.c
 *		The append protocol every writer goes through, in its order: the
 *		in-flight appends that define the last stable offset, the append
 *		itself with its roll into a segment prepared ahead
 *		(MqPartitionAppend), and what commit and abort release and apply.
 *
 * The rest of a partition's shared state has files of its own beside this
 * one: partition_shmem.c (the entries), partition_tail.c (a partition's
 * tail, read into its entry), partition_offsets.c (what readers may see;
 * the high watermark), partition_roll.c (rolling: the spares, the worker's
 * rolls, the segment switches at commit; the roll decision, inline in
 * partition_internal.h), partition_extend.c (the worker's extension ahead),
 * partition_signal.c (the catalog generation, the change counters, the
 * wake-ups); the fields are partition_internal.h's.
 *
 * Offsets are assigned under the partition's LWLock at append time, so the
 * log is physically in offset order.  Before an appender writes a batch it
 * registers (partition, first offset) as in flight, unless its transaction
 * already holds an earlier entry for the partition.  Entries are appended
 * to the partition's list in offset order, so the list head is the lowest
 * in-flight offset: the last stable offset (LSO).  A reader never reads at
 * or past the LSO, which is what keeps a consumer from committing offset 12
 * while offset 10 of a slower transaction is still to come.
 *
 * Entries are released in the transaction callbacks: at commit and abort of
 * the top transaction (after the clog records its fate, so a reader that no
 * longer sees the entry finds the outcome in the clog), at abort of the
 * subtransaction that made them, and at backend exit (see mq_backend_exit).
 * A crash of a backend restarts the whole server and with it this shared
 * memory.
 *
 * Partition entries of a dropped topic are removed when the drop commits.
 * Every use of an entry happens while holding a lock on one of the topic's
 * segments, which the drop waits for, so no backend is inside one then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "nodes/pg_list.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "store/segment.h"
#include "log/partition.h"
#include "log/partition_internal.h"
#include "log/producers.h"
#include "log/topic.h"

/* this backend's in-flight entries */
typedef struct LocalInflight
{
	MqPartition *part;
	MqInflight *entry;
	SubTransactionId subid;
	int64		adopted;		/* a Kafka transaction's hold this transaction
								 * took over with its marker (-1: none): it
								 * goes back to the Kafka transaction if the
								 * marker's transaction aborts */
} LocalInflight;

static LocalInflight *local = NULL;
static int	nlocal = 0;
static int	maxlocal = 0;
static MqXactEndHook xact_end_hook = NULL;

static void mq_backend_exit(int code, Datum arg);

static void too_many_partitions(void) pg_attribute_noreturn();

/* ------------------------------------------------------------------------
 * In-flight appends
 * ------------------------------------------------------------------------ */

/* The LSO: the lowest in-flight offset, or the high watermark. */
int64
MqPartitionLso(MqPartition *part, int64 *high_watermark)
{
	int64		lso;

	if (high_watermark)
		*high_watermark = part->next_offset;
	if (dlist_is_empty(&part->inflight))
		lso = part->next_offset;
	else
		lso = dlist_head_element(MqInflight, node, &part->inflight)->offset;
	return lso;
}

/* an unused entry of the pool */
static MqInflight *
take_entry(void)
{
	MqInflight *entry;

	SpinLockAcquire(&mqlog_partition_shmem->free_lock);
	if (dlist_is_empty(&mqlog_partition_shmem->free_list))
		entry = NULL;
	else
		entry = dlist_container(MqInflight, node, dlist_pop_head_node(&mqlog_partition_shmem->free_list));
	SpinLockRelease(&mqlog_partition_shmem->free_lock);
	if (entry == NULL)
		elog(ERROR, "mqlog in-flight append pool exhausted");
	entry->producer_id = -1;
	return entry;
}

/* entry (in part's list) is this backend's, released at its transaction's end */
static void
add_local(MqPartition *part, MqInflight *entry)
{
	static bool exit_hook_set = false;

	/* exit callbacks do not survive the fork from the postmaster */
	if (!exit_hook_set)
	{
		before_shmem_exit(mq_backend_exit, 0);
		exit_hook_set = true;
	}
	if (nlocal == maxlocal)
	{
		int			newmax = Max(16, maxlocal * 2);

		if (local == NULL)
			local = MemoryContextAlloc(TopMemoryContext, sizeof(LocalInflight) * newmax);
		else
			local = repalloc(local, sizeof(LocalInflight) * newmax);
		maxlocal = newmax;
	}
	local[nlocal].part = part;
	local[nlocal].entry = entry;
	local[nlocal].subid = GetCurrentSubTransactionId();
	local[nlocal].adopted = -1;
	nlocal++;
}

/*
 * Called by the appender holding part->lock exclusively, before it writes
 * the batch starting at offset.
 */
static void
register_inflight(MqPartition *part, int64 offset)
{
	MqInflight *entry;

	for (int i = 0; i < nlocal; i++)
		if (local[i].part == part)
			return;				/* an earlier offset already holds the LSO */
	if (nlocal >= mqlog_max_inflight)
		too_many_partitions();
	/* the local array has room before the entry is taken: no leak on error */
	add_local(part, NULL);
	nlocal--;
	entry = take_entry();
	entry->offset = offset;
	dlist_push_tail(&part->inflight, &entry->node);
	add_local(part, entry);
}

/* the hold of producer_id's open Kafka transaction on part, if any */
static MqInflight *
find_kafka_hold(MqPartition *part, int64 producer_id)
{
	dlist_iter	it;

	dlist_foreach(it, &part->inflight)
	{
		MqInflight *e = dlist_container(MqInflight, node, it.cur);

		if (e->producer_id == producer_id)
			return e;
	}
	return NULL;
}

/*
 * A Kafka transaction's batch at offset (part->lock held exclusively):
 * the transaction's first batch on the partition leaves an entry of no
 * backend's at its offset, which holds the LSO there until the
 * transaction's marker (Kafka's "first offset of an open transaction").
 * Its offset is the log end, so the list stays in offset order.  A
 * PostgreSQL transaction whose batch it was may roll back: the hold then
 * stays on a hole until the marker, which costs readers only the wait.
 */
static void
hold_kafka_transaction(MqPartition *part, int64 producer_id, int64 offset)
{
	MqInflight *entry;

	if (find_kafka_hold(part, producer_id) != NULL)
		return;
	entry = take_entry();
	entry->offset = offset;
	entry->producer_id = producer_id;
	dlist_push_tail(&part->inflight, &entry->node);
}

/*
 * A Kafka transaction's marker at offset (part->lock held exclusively):
 * the transaction's hold becomes the marker's PostgreSQL transaction's own
 * entry, released when that transaction ends, so the LSO passes the Kafka
 * transaction's batches only once its marker (and, for an abort, the
 * aborted range that hides them) is committed.  Without a hold (a
 * transaction that wrote nothing here, or a restart lost it) the marker
 * is registered as any append.
 */
static void
adopt_kafka_hold(MqPartition *part, int64 producer_id, int64 offset)
{
	MqInflight *entry = find_kafka_hold(part, producer_id);

	if (entry == NULL)
	{
		register_inflight(part, offset);
		return;
	}
	if (nlocal >= mqlog_max_inflight)
		too_many_partitions();
	add_local(part, NULL);
	nlocal--;
	entry->producer_id = -1;
	add_local(part, entry);
	local[nlocal - 1].adopted = producer_id;
}

/*
 * A Kafka transaction's hold at offset, in offset order (part->lock held
 * exclusively), unless the producer has one or offset is past the log:
 * a hold put back after a restart.
 */
static void
insert_kafka_hold(MqPartition *part, int64 producer_id, int64 offset)
{
	MqInflight *entry;
	dlist_mutable_iter it;

	if (find_kafka_hold(part, producer_id) != NULL || offset >= part->next_offset)
		return;
	entry = take_entry();		/* an error releases the lock with the rest */
	entry->offset = offset;
	entry->producer_id = producer_id;
	dlist_foreach_modify(it, &part->inflight)
	{
		MqInflight *e = dlist_container(MqInflight, node, it.cur);

		if (e->offset > offset)
		{
			dlist_insert_before(&e->node, &entry->node);
			return;
		}
	}
	dlist_push_tail(&part->inflight, &entry->node);
}

/*
 * Holds put back (insert_kafka_hold), after reading the partition's tail
 * into its entry if it was not yet; once: only if the entry has not had
 * them yet, and then never again.
 */
static void
put_kafka_holds(MqTopic *topic, int32 partition, int n, const int64 *producer_ids,
				const int64 *offsets, bool once)
{
	MqPartition *part;
	int64		lso,
				leo;

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	part = MqTopicPartition(topic, partition);
	LWLockAcquire(&part->lock, LW_EXCLUSIVE);
	if (!once || !part->kafka_holds_checked)
	{
		for (int i = 0; i < n; i++)
			insert_kafka_hold(part, producer_ids[i], offsets[i]);
		if (once)
			part->kafka_holds_checked = true;
	}
	LWLockRelease(&part->lock);
	note_change(part);
}

/*
 * After a restart, the hold of a Kafka transaction still open (its
 * coordinator's table says where it began), put back in offset order:
 * the listener's first turn (kafka/txn_coordinator.c), which finds them
 * put back already by the partition's first use (below) but for a
 * partition nobody has used yet.
 */
void
MqPartitionHoldKafkaTransaction(MqTopic *topic, int32 partition, int64 producer_id,
								int64 offset)
{
	put_kafka_holds(topic, partition, 1, &producer_id, &offset, false);
}

/*
 * The holds of the Kafka transactions open on the partition, read by the
 * caller (log/kafka_holds.c) before any append of this server's life went
 * into the partition, put back once per partition entry: the first caller
 * to get here puts its holds, the others find them put.  Since every
 * appender calls first, no marker can have ended one of these
 * transactions between the caller's read and this.
 */
void
MqPartitionRestoreKafkaHolds(MqTopic *topic, int32 partition, int n,
							 const int64 *producer_ids, const int64 *offsets)
{
	put_kafka_holds(topic, partition, n, producer_ids, offsets, true);
}

static void
too_many_partitions(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("transaction writes to too many mqlog partitions"),
			 errdetail("One transaction may produce to at most %d partitions.", mqlog_max_inflight),
			 errhint("Raise mqlog.max_inflight_partitions and restart the server, or split the transaction.")));
}

/*
 * Before a call writes anything: would appending to these partitions
 * (distinct) take this transaction past mqlog.max_inflight_partitions?
 * Then it fails here, with nothing written, not after some batches went in
 * and left holes in their partitions.
 */
void
MqPartitionCheckInflightRoom(MqPartition **parts, int nparts)
{
	int			more = 0;

	for (int i = 0; i < nparts; i++)
	{
		bool		here = false;

		for (int j = 0; j < nlocal && !here; j++)
			here = (local[j].part == parts[i]);
		if (!here)
			more++;
	}
	if (nlocal + more > mqlog_max_inflight)
		too_many_partitions();
}

static void
release_entry(LocalInflight *li, bool wake, bool commit)
{
	/* a marker that did not commit: the Kafka transaction holds on */
	if (!commit && li->adopted >= 0)
	{
		LWLockAcquire(&li->part->lock, LW_EXCLUSIVE);
		li->entry->producer_id = li->adopted;
		LWLockRelease(&li->part->lock);
		return;
	}
	LWLockAcquire(&li->part->lock, LW_EXCLUSIVE);
	dlist_delete(&li->entry->node);
	LWLockRelease(&li->part->lock);
	note_change(li->part);

	SpinLockAcquire(&mqlog_partition_shmem->free_lock);
	dlist_push_tail(&mqlog_partition_shmem->free_list, &li->entry->node);
	SpinLockRelease(&mqlog_partition_shmem->free_lock);

	if (wake)
		ConditionVariableBroadcast(&li->part->cv);
}

/*
 * Release entries of the given subtransaction, or all when subid is
 * invalid; commit: the transaction committed (else a Kafka transaction's
 * hold it took over goes back to it).
 */
static void
release_inflight(SubTransactionId subid, bool wake, bool commit)
{
	int			keep = 0;

	for (int i = 0; i < nlocal; i++)
	{
		if (subid == InvalidSubTransactionId || local[i].subid == subid)
			release_entry(&local[i], wake, commit);
		else
			local[keep++] = local[i];
	}
	nlocal = keep;
}

/* ------------------------------------------------------------------------
 * Extension ahead of the appender: the appender asks here, the worker
 * extends (MqPartitionsExtendAhead, partition_extend.c)
 * ------------------------------------------------------------------------ */

/* an appender asks again if its request went unanswered this long */
#define MQ_EXTEND_REASK_MS		1000
/*
 * A segment whose log is smaller than this is not extended ahead: by the
 * doubling rule below its pages ahead would be as many as its log, and a
 * produce spread over a thousand partitions made the worker write as many
 * zero pages as the producer wrote log, on a core the readers needed (the
 * scale bench: a 1,000-partition read 32-42 % slower than one partition's
 * with extension ahead, within 15 % without; doc/benchmarks.md).  A busy
 * partition passes 4 MB within its first tens of milliseconds; a small
 * one extends itself page by page, which costs it little.
 */
#define MQ_EXTEND_MIN_LOG_BLOCKS	512

/*
 * After an append that left the segment nblocks long: should the worker
 * extend it ahead of the appender (doc/architecture.md, "Segment growth")?
 * The pages ahead aim at min(mqlog.segment_extend_ahead, what the log of
 * the segment already holds) once that log is 4 MB (MQ_EXTEND_MIN_LOG_BLOCKS),
 * never past what segment.bytes leaves, and
 * are asked for when fewer than half of them are left: a segment at most
 * doubles its pages on disk, a partition that is appended to rarely asks
 * rarely (at the doublings), a busy one is kept ahead by the setting.
 * Caller holds part->lock exclusively.
 */
static bool
want_extension(MqPartition *part, MqTopic *topic, BlockNumber nblocks)
{
	BlockNumber used = MqLposBlock(part->end_lpos) + 1;
	/* and no more than an eighth of shared buffers, which the appender fills them through */
	int64		cap = Min((int64) mqlog_segment_extend_ahead * 1024 / BLCKSZ, NBuffers / 8);
	int64		ahead = Min(cap, (int64) used);
	int64		limit = topic->segment_bytes / BLCKSZ;
	int64		target = Min((int64) used + ahead, limit);
	TimestampTz now;

	if (cap <= 0 || (int64) used < MQ_EXTEND_MIN_LOG_BLOCKS || target <= (int64) nblocks ||
		(int64) nblocks - (int64) used >= ahead / 2)
		return false;
	now = GetCurrentTimestamp();
	if (part->extend_asked != 0 && part->extend_relid == part->active_relid &&
		!TimestampDifferenceExceeds(part->extend_asked, now, MQ_EXTEND_REASK_MS))
	{
		/* asked already: the worker, on it or still to come, goes this far */
		part->extend_to = Max(part->extend_to, (BlockNumber) target);
		return false;
	}
	part->extend_relid = part->active_relid;
	part->extend_to = (BlockNumber) target;
	part->extend_asked = now;
	return true;
}

/* ------------------------------------------------------------------------
 * The append protocol
 * ------------------------------------------------------------------------ */

/*
 * Append one stored batch (mqlog's prefix and Kafka's bytes, checksummed)
 * to a partition and return its base offset.  at_offset < 0 lets the log
 * assign the next offset, as a produce does; otherwise the batch must start
 * exactly at the log end (a follower copying its leader).  leader_epoch >= 0
 * is stamped into the batch.  The caller holds an xid (the prefix names it)
 * and has checked the batch and the in-flight room.  producer, for a
 * leader's batch with a producer id, is checked under the lock: a
 * duplicate returns its original's base offset without appending, and a
 * partition whose producers are not loaded returns -1 (verdict
 * MQ_PRODUCER_NOT_LOADED) for the caller to load them and call again.
 *
 * Every append goes through here, so the rules hold for all of them: the
 * partition lock serializes appenders, the in-flight entry is registered
 * under it before a byte is written (the LSO cannot pass the batch), and
 * a torn tail left by a crash is cut off first.  If a roll made the cached
 * segment chain stale, *topicp is refreshed and the append goes to the new
 * active segment.
 */
int64
MqPartitionAppend(MqTopic **topicp, int32 partition, StringInfo batch,
				  int64 at_offset, int32 leader_epoch, MqProducerAppend *producer)
{
	MqTopic    *topic = *topicp;
	MqBatchHeader hdr;
	int64		span;
	int64		base;
	Relation	spare_rel = NULL;
	int			spare_tries = 0;
	int			refreshes = 0;	/* chain re-reads after another's roll */

	if (!MqBatchParseHeader(batch->data, batch->len, &hdr) || hdr.length != batch->len)
		elog(ERROR, "mqlog: appending a malformed batch");
	span = (int64) hdr.last_offset_delta + 1;

	for (int attempt = 0;; attempt++)
	{
		const MqSegmentRef *seg;
		MqPartition *part;
		Relation	rel;
		bool		rolled = false;
		bool		ask = false;
		BlockNumber nblocks;

		/* a partition whose first segment the worker has yet to make */
		if (MqTopicPartitionPending(topic, partition))
			topic = *topicp = MqTopicAwaitPartition(topic, partition);
		/* open Kafka transactions' holds back before the first append */
		MqPartitionFirstUse(topic, partition);
		seg = MqTopicActiveSegment(topic, partition);
		part = MqTopicPartition(topic, partition);

		rel = try_table_open(seg->relid, RowExclusiveLock);
		if (rel == NULL && ++refreshes <= 3)
		{
			topic = *topicp = MqTopicRefresh(topic->name);
			continue;
		}
		if (rel == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("topic \"%s\" was dropped", topic->name)));

		LWLockAcquire(&part->lock, LW_EXCLUSIVE);
		if ((!part->loaded || seg->sealed) && attempt == 0)
		{
			/*
			 * The first append since start-up (or promotion) reads the tail
			 * of the active segment: make sure our chain is current, never
			 * a stale one whose "active" segment has been sealed.
			 */
			LWLockRelease(&part->lock);
			table_close(rel, NoLock);
			topic = *topicp = MqTopicRefresh(topic->name);
			continue;
		}
		MqPartitionEnsureLoaded(part, rel, seg->base_offset);
		if (part->active_relid != seg->relid)
		{
			if (attempt == 0)
			{
				/* a roll sealed the segment since our cache was loaded */
				LWLockRelease(&part->lock);
				table_close(rel, NoLock);
				topic = *topicp = MqTopicRefresh(topic->name);
				continue;
			}

			/*
			 * Shared memory is ahead of the catalog we read: an appender
			 * rolled into the spare segment, which the catalog still lists
			 * as a spare.  Read the chain again; it places the spare.
			 */
			if (seg->base_offset < part->active_base)
			{
				LWLockRelease(&part->lock);
				table_close(rel, NoLock);
				if (++refreshes > 8)
					elog(ERROR, "mqlog: the segment chain of partition %d of topic \"%s\" does not settle",
						 partition, topic->name);
				topic = *topicp = MqTopicRefresh(topic->name);
				continue;
			}

			/*
			 * The catalog, freshly read, names another active segment than
			 * shared memory: a roll that committed an instant ago and whose
			 * commit callback has not run yet.  The catalog is right; read
			 * the new segment's tail.  Never go back to a sealed one.
			 */
			if (seg->sealed)
				elog(ERROR, "mqlog: the active segment of partition %d of topic \"%s\" is sealed",
					 partition, topic->name);
			MqPartitionLoadTail(part, rel, seg->base_offset);
		}
		if (!OidIsValid(part->spare_relid) && OidIsValid(topic->spares[partition]) &&
			topic->spares[partition] != part->active_relid)
			part->spare_relid = topic->spares[partition];

		if (part->torn_lpos != part->end_lpos)
		{
			/*
			 * A crash tore the last batch.  Cut it off under an exclusive
			 * lock, so that no reader has the pages pinned; take it without
			 * holding the LWLock or the weaker lock, to keep the lock order
			 * simple.
			 */
			MqSegmentTail tail;

			LWLockRelease(&part->lock);
			table_close(rel, NoLock);
			UnlockRelationOid(seg->relid, RowExclusiveLock);
			rel = table_open(seg->relid, AccessExclusiveLock);
			LWLockAcquire(&part->lock, LW_EXCLUSIVE);
			MqPartitionLoadTail(part, rel, seg->base_offset);
			if (part->torn_lpos != part->end_lpos)
			{
				tail.end_lpos = part->end_lpos;
				tail.torn_lpos = part->torn_lpos;
				tail.next_offset = part->next_offset;
				MqSegmentRepairTail(rel, &tail);
				part->torn_lpos = part->end_lpos;
			}
		}

		/*
		 * Roll where Kafka rolls: when this batch would take the segment
		 * past segment.bytes, or its records are segment.ms younger than
		 * the segment's first.  The next segment was prepared ahead by the
		 * maintenance worker and committed; taking it is a change of
		 * shared state only, so no appender ever creates a relation
		 * (partition_roll.c tells the whole story).
		 */
		if (roll_due(part, topic->segment_bytes, topic->segment_ms, batch->len,
					 hdr.max_timestamp))
		{
			Oid			spare = part->spare_relid;

			if (OidIsValid(spare) && spare_rel != NULL && RelationGetRelid(spare_rel) == spare)
			{
				if (MqPartitionTakeSpare(part, spare_rel))
				{
					table_close(rel, NoLock);
					rel = spare_rel;
					spare_rel = NULL;
					rolled = true;
				}
			}
			else if (OidIsValid(spare) && spare_tries++ < 3)
			{
				/* lock the spare first, without holding the partition lock */
				LWLockRelease(&part->lock);
				table_close(rel, NoLock);
				if (spare_rel != NULL)
					table_close(spare_rel, NoLock);
				spare_rel = try_table_open(spare, RowExclusiveLock);
				continue;
			}
			else if (!OidIsValid(spare) && MqPartitionWaitForSpare(part))
			{
				table_close(rel, NoLock);
				continue;
			}
		}

		/*
		 * A leader's own append (not a follower's copy) under a leader epoch
		 * older than a move this node made: refused here, under the lock,
		 * so that nothing is appended after the move has measured the log.
		 * The epoch is the one the caller checked its leadership under (a
		 * refresh of the topic above may know a newer one).
		 */
		if (at_offset < 0 && topic->replicas != NULL && leader_epoch < part->min_leader_epoch)
		{
			LWLockRelease(&part->lock);
			ereport(ERROR,
					(errcode(ERRCODE_MQ_NOT_LEADER),
					 errmsg("partition %d of topic \"%s\" is moving to another leader",
							partition, topic->name),
					 errhint("Retry: the new leader is in mqlog.partitions once the move is done.")));
		}

		base = part->next_offset;
		if (at_offset >= 0 && at_offset != base)
		{
			LWLockRelease(&part->lock);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("batch at offset " INT64_FORMAT " does not follow the end of partition %d of topic \"%s\"",
							at_offset, partition, topic->name),
					 errdetail("The log end offset is " INT64_FORMAT ".", base)));
		}

		/*
		 * A leader's batch with a producer id: checked here, under the
		 * lock, so that no other append of its producer comes between the
		 * check and the write (producers.c).  Whatever is not an append
		 * leaves the lock: a retry is answered with its original offset, a
		 * refusal is an error, a producer another transaction is writing
		 * waits for that transaction, and a partition whose producers are
		 * not loaded goes back to the caller, which loads them.
		 */
		if (producer != NULL)
		{
			MqProducerVerdict v = MqProducersCheck(producer, base);

			if (v != MQ_PRODUCER_APPEND)
			{
				LWLockRelease(&part->lock);
				table_close(rel, NoLock);
				if (v == MQ_PRODUCER_WAIT && !producer->nowait)
				{
					XactLockTableWait(producer->wait_for, NULL, NULL, XLTW_None);
					continue;
				}
				if (spare_rel != NULL)
					table_close(spare_rel, NoLock);
				if (v == MQ_PRODUCER_DUPLICATE)
					return producer->dup_first;
				if (v == MQ_PRODUCER_NOT_LOADED)
					return -1;
				MqProducersRefuse(producer, topic->name);
			}
		}
		MqBatchSetOffset(batch->data, base);
		if (leader_epoch >= 0)
			MqBatchSetEpoch(batch->data, leader_epoch);
		if (hdr.attributes & MQ_ATTR_CONTROL)
			adopt_kafka_hold(part, hdr.producer_id, base);
		else
		{
			register_inflight(part, base);
			if ((hdr.attributes & MQ_ATTR_TRANSACTIONAL) && hdr.producer_id >= 0)
				hold_kafka_transaction(part, hdr.producer_id, base);
		}

		part->dirty = true;
		nblocks = MqSegmentAppend(rel, topic->topic_id, partition, part->end_lpos,
								  batch->data, batch->len, MqPartitionLso(part, NULL), 0);
		part->end_lpos += batch->len;
		part->torn_lpos = part->end_lpos;
		part->next_offset = base + span;
		if (part->active_since == NO_ACTIVE_SINCE)
			part->active_since = hdr.first_timestamp;
		part->dirty = false;
		note_change(part);
		/* past half of segment.bytes or segment.ms: have the next segment prepared */
		if (roll_ask_spare(part, topic->segment_bytes, topic->segment_ms, hdr.max_timestamp))
			ask = true;
		if (want_extension(part, topic, nblocks))
			ask = true;
		LWLockRelease(&part->lock);

		table_close(rel, NoLock);
		if (rolled)
			MqlogCatalogChanged();
		if (rolled && mqlog_roll_ahead)
			MqRequestMaintenance();
		else if (ask)
			MqRequestMaintenance();
		break;
	}
	if (spare_rel != NULL)
		table_close(spare_rel, NoLock);
	return base;
}

/* ------------------------------------------------------------------------
 * At commit and abort: what the transaction queued (its segment
 * switches are partition_roll.c's), the in-flight entries it holds, and
 * the transaction-end hook
 * ------------------------------------------------------------------------ */

static List *pending_forgets = NIL;	/* topic ids dropped by this transaction */
static Oid	pending_forget_catalog = InvalidOid;

void
MqPartitionForgetAtCommit(Oid catalog_relid, int32 topic_id)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	pending_forgets = lappend_int(pending_forgets, topic_id);
	pending_forget_catalog = catalog_relid;
	MemoryContextSwitchTo(old);
}

static void
apply_forgets(bool commit)
{
	if (commit && pending_forgets != NIL)
	{
		HASH_SEQ_STATUS seq;
		MqPartition *part;

		LWLockAcquire(mqlog_partition_shmem->hash_lock, LW_EXCLUSIVE);
		hash_seq_init(&seq, mqlog_partition_hash);
		while ((part = hash_seq_search(&seq)) != NULL)
			if (part->key.dboid == MyDatabaseId &&
				part->key.catalog_relid == pending_forget_catalog &&
				list_member_int(pending_forgets, part->key.topic_id) &&
				dlist_is_empty(&part->inflight))
				hash_search(mqlog_partition_hash, &part->key, HASH_REMOVE, NULL);
		LWLockRelease(mqlog_partition_shmem->hash_lock);
	}
	list_free(pending_forgets);
	pending_forgets = NIL;
}

/*
 * A prepared transaction outlives its backend and restarts, and its
 * in-flight entries could not: PREPARE is refused to one that produced.
 */
static void
refuse_prepare(void)
{
	if (nlocal > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that has produced to mqlog"),
				 errdetail("Records of a prepared transaction would hold back the last stable offset across restarts."),
				 errhint("Commit the transaction instead of preparing it.")));
}

/* This transaction's in-flight entries go, and waiting polls look again. */
static void
release_at_xact_end(bool commit)
{
	if (nlocal > 0)
	{
		release_inflight(InvalidSubTransactionId, true, commit);
		ConditionVariableBroadcast(&mqlog_partition_shmem->data_cv);
	}
}

/*
 * The end of a top transaction, one duty a call: the in-flight entries,
 * the store's cache of the batches this backend read, the segment switches
 * and dropped topics this transaction queued, the catalog generation, a
 * maintenance pass, and last the transaction-end hook (the acks=all wait).
 */
static void
mq_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			refuse_prepare();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			release_at_xact_end(true);
			MqReaderAtXactEnd();
			MqPartitionSwitchesAtXactEnd(true);
			apply_forgets(true);
			MqCatalogAtXactEnd(true);
			MqMaintenanceAtXactEnd(true);
			/* last: the commit is visible here; acks=all waits for the replicas */
			if (xact_end_hook)
				xact_end_hook(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/*
			 * The aborted batches become holes: readers may pass them, and
			 * the LSO may move past records that others committed meanwhile,
			 * so waiting polls are woken as by a commit.
			 */
			release_at_xact_end(false);
			MqReaderAtXactEnd();
			if (xact_end_hook)
				xact_end_hook(false);
			MqPartitionSwitchesAtXactEnd(false);
			apply_forgets(false);
			MqCatalogAtXactEnd(false);
			MqMaintenanceAtXactEnd(false);
			break;
		default:
			break;
	}
}

/* the in-flight entries of an aborted subtransaction */
static void
release_at_subxact_abort(SubTransactionId subid)
{
	int			before = nlocal;

	release_inflight(subid, true, false);
	/* as at abort: the LSO may have moved */
	if (nlocal != before)
		ConditionVariableBroadcast(&mqlog_partition_shmem->data_cv);
}

static void
mq_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			release_at_subxact_abort(mySubid);
			MqCatalogAtSubxactAbort();
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			for (int i = 0; i < nlocal; i++)
				if (local[i].subid == mySubid)
					local[i].subid = parentSubid;
			break;
		default:
			break;
	}
}

/*
 * Runs before ShutdownPostgres aborts a transaction left open, so the
 * entries of a backend that exits mid-transaction are released before its
 * abort is in the clog; readers then find the xid neither running nor
 * committed and skip the batch, which is the same outcome.  LWLocks are
 * released first: a FATAL error may have come while one was held.
 */
static void
mq_backend_exit(int code, Datum arg)
{
	LWLockReleaseAll();
	if (mqlog_partition_shmem != NULL)
		release_inflight(InvalidSubTransactionId, true, false);
}

void
MqPartitionInitCallbacks(void)
{
	RegisterXactCallback(mq_xact_callback, NULL);
	RegisterSubXactCallback(mq_subxact_callback, NULL);
}

/*
 * The hook at the end of every top transaction (see partition.h), set once
 * when mqlog is loaded (log/replica.c: the acks=all wait).
 */
void
MqPartitionSetXactEndHook(MqXactEndHook hook)
{
	Assert(xact_end_hook == NULL || xact_end_hook == hook);
	xact_end_hook = hook;
}
