/*-------------------------------------------------------------------------
 *
 * logiter.c
 *		The one loop over a partition's log: batches and records from an
 *		offset, across segments, with visibility and a budget.
 *
 * Visibility is decided batch by batch (MqBatchGetFate): a batch of a
 * transaction that committed is returned, one that aborted is a hole that
 * the iterator passes (counting its records), and at the first batch of a
 * transaction still in flight, at or above the last stable offset, the
 * iteration ends, so that nobody ever reads past a record that may still
 * commit.  The caller takes the LSO from shared memory before the first
 * page is read (MqPartitionOffsets), which is what makes "below the LSO,
 * the clog decides" true.
 *
 * A segment of the cached chain that is gone (retention dropped it, or
 * compaction replaced it) ends the iteration: readers stop there rather
 * than skip records they did not see, and the next call reads the current
 * chain.
 *
 * Errors while reading (a CRC mismatch, a batch that does not decompress)
 * carry a context line naming topic, partition, segment and offset.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/rel.h"

#include "store/batch.h"
#include "store/segment.h"
#include "log/kafka_aborted.h"
#include "log/kafka_holds.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/topic.h"

static void
iter_error_context(void *arg)
{
	MqLogIter  *it = arg;

	if (it->rel == NULL)
		return;
	if (it->topic)
		errcontext("reading partition %d of topic \"%s\", segment \"%s\", batch at offset " INT64_FORMAT,
				   it->partition, it->topic->name, RelationGetRelationName(it->rel),
				   it->hdr.base_offset);
	else
		errcontext("reading mqlog segment \"%s\", batch at offset " INT64_FORMAT,
				   RelationGetRelationName(it->rel), it->hdr.base_offset);
}

static void
iter_init(MqLogIter *it, int flags)
{
	memset(it, 0, sizeof(*it));
	it->flags = flags;
	it->max_records = PG_INT32_MAX;
	it->bound = PG_INT64_MAX;
	it->max_bytes = PG_INT64_MAX;
	it->cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog log iterator",
									ALLOCSET_DEFAULT_SIZES);
}

/*
 * The error context is pushed for the duration of each call, not from
 * Begin to End: a sequential scan's iterator lives across executor calls.
 */
#define ITER_ENTER(it) \
	ErrorContextCallback errcb_; \
	errcb_.callback = iter_error_context; \
	errcb_.arg = (it); \
	errcb_.previous = error_context_stack; \
	error_context_stack = &errcb_
#define ITER_LEAVE() (error_context_stack = errcb_.previous)

/*
 * Read a partition from offset from.  lso is the partition's last stable
 * offset, or -1 where there is none (a standby).  The caller may set
 * max_records and max_bytes before the first call.
 */
void
MqLogIterBegin(MqLogIter *it, MqTopic *topic, int32 partition, int64 from,
			   int64 lso, int flags)
{
	int			nseg = topic->nsegments[partition];

	iter_init(it, flags);
	it->topic = topic;
	it->partition = partition;
	it->from = from;
	it->next = from;
	it->lso = lso;

	/*
	 * A hot standby has no high watermark in shared memory (lso -1): it
	 * stops at the one checkpointed in mqlog.replica_state, which replay
	 * brings, so that its readers see nothing a failover could lose.
	 */
	if (lso < 0 && topic->replicas != NULL && (flags & MQ_ITER_ANY_FATE) == 0 &&
		RecoveryInProgress())
		it->bound = topic->replicas[partition].hw_checkpoint;

	/*
	 * Nor has it the in-flight list that holds the LSO at an open Kafka
	 * transaction's first offset: the replayed coordinator's table says
	 * where that is (kafka_holds.c), in a snapshot the reader then keeps.
	 */
	if (lso < 0 && topic->replicas == NULL && (flags & MQ_ITER_ANY_FATE) == 0 &&
		RecoveryInProgress() && IsTransactionState() && !IsInParallelMode())
	{
		it->snapshot = RegisterSnapshot(GetLatestSnapshot());
		it->bound = Min(it->bound, MqKafkaOpenFirstOffset(topic->topic_id, partition, it->snapshot));
	}
	it->seg = -1;
	for (int i = 0; i < nseg; i++)
		if (topic->segments[partition][i].base_offset <= from)
			it->seg = i;
	if (it->seg < 0)
		it->seg = 0;
	it->seg--;					/* the first call opens it */
}

/* open the reader on it->rel; known_end as MqReaderInit takes it */
static void
start_reading(MqLogIter *it, uint64 known_end)
{
	MqReaderInit(&it->reader, it->rel, known_end);
	/* a caller that checks CRCs itself (mq_verify) checks the pages */
	it->reader.from_pages = (it->flags & MQ_ITER_NO_CRC) != 0;
	it->reading = true;
}

/* Read one segment relation, as the sequential scan of a segment does. */
void
MqLogIterBeginSegment(MqLogIter *it, Relation rel, int flags)
{
	iter_init(it, flags);
	it->rel = rel;
	it->from = PG_INT64_MIN;
	it->next = PG_INT64_MIN;
	it->lso = -1;
	start_reading(it, 0);
}

static void
close_segment(MqLogIter *it)
{
	if (it->reading)
		MqReaderEnd(&it->reader);
	it->reading = false;
	if (it->own_rel && it->rel)
		table_close(it->rel, AccessShareLock);
	it->own_rel = false;
	if (it->topic)
		it->rel = NULL;
}

/* open the next segment of the chain; false at its end or at a gone one */
static bool
open_next_segment(MqLogIter *it)
{
	const MqSegmentRef *ref;

	close_segment(it);
	if (it->topic == NULL || ++it->seg >= it->topic->nsegments[it->partition])
		return false;
	ref = &it->topic->segments[it->partition][it->seg];
	it->rel = try_table_open(ref->relid, AccessShareLock);
	if (it->rel == NULL)
		return false;
	it->own_rel = true;
	start_reading(it, MqPartitionKnownEnd(MqTopicPartition(it->topic, it->partition), ref->relid));

	/*
	 * A read from the segment's base offset or before starts at its first
	 * batch: no search (the first poll of each partition after a reset to
	 * earliest, or of a segment after the previous one).
	 */
	if (it->next > ref->base_offset)
		MqReaderSeek(&it->reader, it->next);
	return true;
}

static bool
budget_left(MqLogIter *it, int max_records, int64 cost)
{
	if (it->nreturned >= max_records)
		return false;
	return it->nreturned == 0 || it->bytes + cost <= it->max_bytes;
}

/*
 * The record budget inside a batch already read: reading a batch costs its
 * pages and its CRC whatever share of it is returned, so a reader that
 * allows it (batch_max_records) takes more of that batch rather than pay
 * for it again on the next read.
 */
static int
batch_record_budget(MqLogIter *it)
{
	return Max(it->max_records, it->batch_max_records);
}

/*
 * Advance to the next batch the caller should see; its header is in
 * it->hdr and its fate in it->fate.  False at the end of the log, at a
 * transaction still in flight, at a gone segment, or (for MQ_ITER_BYTES
 * without records) when the byte budget is used up.
 */
static bool
next_batch(MqLogIter *it)
{
	bool		want_bytes = (it->flags & (MQ_ITER_BYTES | MQ_ITER_RECORDS)) != 0;

	it->nrecs = it->cur = 0;
	while (!it->done)
	{
		bool		got;

		CHECK_FOR_INTERRUPTS();
		if (!it->reading && !open_next_segment(it))
		{
			it->done = true;
			break;
		}
		if (want_bytes)
			got = MqReaderNext(&it->reader, (it->flags & MQ_ITER_NO_CRC) == 0);
		else
			got = MqReaderNextHeader(&it->reader, &it->hdr);
		if (!got)
		{
			if (it->topic == NULL)
				it->done = true;
			else
				close_segment(it);
			continue;
		}
		it->hdr = it->reader.hdr;
		it->stored = want_bytes ? it->reader.batch : NULL;
		if (MqBatchNextOffset(&it->hdr) <= it->from)
			continue;
		if (it->hdr.base_offset >= it->bound)
		{
			it->done = true;
			break;
		}
		if (it->flags & MQ_ITER_ANY_FATE)
		{
			it->fate = MQ_FATE_VISIBLE;
			return true;
		}
		it->fate = MqBatchGetFate(&it->hdr, it->lso);
		if (it->fate == MQ_FATE_VISIBLE && it->snapshot != NULL &&
			(it->hdr.flags & MQ_BATCH_COMMITTED) == 0 &&
			XidInMVCCSnapshot(it->hdr.xid, it->snapshot))
			it->fate = MQ_FATE_IN_PROGRESS;
		if (it->fate == MQ_FATE_IN_PROGRESS)
		{
			it->done = true;
			break;
		}
		/* a Kafka transaction's abort hides its batches as an abort does */
		if (it->fate == MQ_FATE_VISIBLE && (it->flags & MQ_ITER_HIDE_KAFKA_ABORTED) &&
			(it->hdr.attributes & MQ_ATTR_TRANSACTIONAL) && it->topic != NULL)
		{
			if (it->kafka_aborted == NULL)
				it->kafka_aborted = MemoryContextAllocZero(MemoryContextGetParent(it->cxt),
														   sizeof(MqKafkaAborted));
			if (MqKafkaBatchAborted(it->kafka_aborted, it->topic->topic_id, it->partition, &it->hdr, NULL))
				it->fate = MQ_FATE_INVISIBLE;
		}
		if (it->fate == MQ_FATE_INVISIBLE)
		{
			it->next = Max(it->next, MqBatchNextOffset(&it->hdr));
			it->invisible_records += it->hdr.record_count;
			if (it->flags & MQ_ITER_INVISIBLE)
				return true;
			continue;
		}
		if ((it->flags & MQ_ITER_RECORDS) == 0 && (it->flags & MQ_ITER_BYTES))
		{
			/* whole batches against the byte budget (raw reads) */
			if (!budget_left(it, it->max_records, it->hdr.length))
			{
				it->done = true;
				break;
			}
			it->nreturned++;
			it->bytes += it->hdr.length;
			it->next = Max(it->next, MqBatchNextOffset(&it->hdr));
		}
		return true;
	}
	it->nrecs = it->cur = 0;
	return false;
}

/*
 * Decode the current batch's records at or after it->from.  Everything for
 * one batch (the record array, decompressed bytes, header arrays) lives in
 * it->cxt, reset per batch, so a long read allocates no more than its
 * largest batch needs.
 */
static void
decode_batch(MqLogIter *it)
{
	MemoryContext old;

	/* no more than the record budget still allows: the rest is not read */
	int			maxrecs = Max(Min(it->hdr.record_count, batch_record_budget(it) - it->nreturned), 1);

	MemoryContextReset(it->cxt);
	old = MemoryContextSwitchTo(it->cxt);
	/* a control batch (a Kafka transaction marker) holds no user records */
	if (it->hdr.attributes & MQ_ATTR_CONTROL)
		it->nrecs = 0;
	else
		it->nrecs = MqBatchDecodeAll(it->stored, &it->hdr, it->from, maxrecs, &it->recs);
	it->cur = 0;
	MemoryContextSwitchTo(old);
}

/*
 * The next visible record at or after it->from, or NULL at the end, at a
 * running transaction or when the budget is spent (at least one record is
 * returned, as in Kafka).  The record points into memory that the next
 * call may reuse.
 */
static MqRecord *
next_record(MqLogIter *it)
{
	Assert(it->flags & MQ_ITER_RECORDS);
	for (;;)
	{
		if (it->cur < it->nrecs)
		{
			MqRecord   *rec = &it->recs[it->cur];

			if (!budget_left(it, batch_record_budget(it), rec->keylen + rec->valuelen))
			{
				it->done = true;
				return NULL;
			}
			it->cur++;
			it->nreturned++;
			it->bytes += rec->keylen + rec->valuelen;
			/*
			 * A batch's last record is at its last offset (lastOffsetDelta
			 * says so; mqlog's compaction keeps it so), so this also passes
			 * a batch that is used up, and a batch cut short by the record
			 * budget is continued from here by the next read.  (Should a
			 * batch end in a hole, the next read finds nothing in it and
			 * passes it.)
			 */
			it->next = rec->offset + 1;
			return rec;
		}
		if (it->done || it->nreturned >= it->max_records)
			return NULL;
		if (!next_batch(it))
			return NULL;
		if (it->fate != MQ_FATE_VISIBLE)
			continue;
		decode_batch(it);
		if (it->nrecs == 0)
			it->next = Max(it->next, MqBatchNextOffset(&it->hdr));
	}
}

/*
 * The records of the next visible batch at once (at or after it->from),
 * for readers that work batch by batch (compaction): false at the end.
 * A control batch comes with none (*n 0, *recs not to be read): its
 * record is in it->stored.  A NULL for "the end" stopped compaction's
 * walk at a segment whose first batch was a marker (a compacted segment's
 * can be), as if the segment were empty.  The budget does not apply.
 */
bool
MqLogNextBatchRecords(MqLogIter *it, MqRecord **recs, int *n)
{
	ITER_ENTER(it);
	Assert(it->flags & MQ_ITER_RECORDS);
	*n = 0;
	*recs = NULL;
	while (next_batch(it))
	{
		if (it->fate != MQ_FATE_VISIBLE)
			continue;
		decode_batch(it);
		it->next = Max(it->next, MqBatchNextOffset(&it->hdr));
		it->cur = it->nrecs;
		*n = it->nrecs;
		*recs = it->nrecs > 0 ? it->recs : NULL;
		ITER_LEAVE();
		return true;
	}
	ITER_LEAVE();
	return false;
}

bool
MqLogNextBatch(MqLogIter *it)
{
	bool		r;

	ITER_ENTER(it);
	r = next_batch(it);
	ITER_LEAVE();
	return r;
}

MqRecord *
MqLogNextRecord(MqLogIter *it)
{
	MqRecord   *r;

	ITER_ENTER(it);
	r = next_record(it);
	ITER_LEAVE();
	return r;
}

void
MqLogIterEnd(MqLogIter *it)
{
	if (it->topic)
		close_segment(it);
	else if (it->reading)
	{
		MqReaderEnd(&it->reader);
		it->reading = false;
	}
	if (it->snapshot != NULL)
		UnregisterSnapshot(it->snapshot);
	it->snapshot = NULL;
	MemoryContextDelete(it->cxt);
}

/* ------------------------------------------------------------------------
 * Kafka's Fetch
 * ------------------------------------------------------------------------ */

/*
 * The batches holding from and after, each handed to sink as Kafka's
 * record batch v2 (the stored batch without mqlog's prefix): the first
 * whole however large, as Kafka's Fetch does (KIP-74), the next while
 * max_bytes of stored bytes allows.  committed: batches of committed
 * transactions below the last stable offset (Kafka's read_committed;
 * the batches of aborted SQL transactions are left out, since they carry
 * no Kafka transaction markers a client could filter them by; those of
 * aborted Kafka transactions are left out too, or, with aborted, sent and
 * their transactions told to aborted, as Kafka's aborted_transactions
 * list names them, consecutive batches of one transaction once).
 * Otherwise up to the high
 * watermark, with the batches of transactions still in flight too (Kafka's
 * read_uncommitted), but never one already known to have aborted.
 * Returns the number of batches handed over.
 */
int
MqLogReadKafkaBatches(MqTopic *topic, int32 partition, int64 from, int64 max_bytes,
					  bool committed, MqKafkaBatchSink sink, MqKafkaAbortedSink aborted,
					  void *arg)
{
	int64		lso,
				hw;
	MqLogIter	it;
	int			n = 0;
	int64		bytes = 0;
	MqKafkaAborted *window = NULL;
	int64		told_producer = -1;
	int64		told_first = -1;

	MqPartitionOffsets(topic, partition, &lso, &hw);
	if (committed)
	{
		MqLogIterBegin(&it, topic, partition, from, lso,
					   MQ_ITER_BYTES | (aborted ? 0 : MQ_ITER_HIDE_KAFKA_ABORTED));
		it.max_bytes = max_bytes;
		if (aborted)
			window = palloc0(sizeof(MqKafkaAborted));
	}
	else
	{
		MqLogIterBegin(&it, topic, partition, from, lso, MQ_ITER_BYTES | MQ_ITER_ANY_FATE);
		it.bound = hw;
	}
	while (MqLogNextBatch(&it))
	{
		if (!committed)
		{
			if (MqBatchGetFate(&it.hdr, -1) == MQ_FATE_INVISIBLE)
				continue;
			if (n > 0 && bytes + it.hdr.length > max_bytes)
				break;
			bytes += it.hdr.length;
		}
		/* a Kafka transaction's aborted batch: the client is told, and skips it */
		if (window && (it.hdr.attributes & MQ_ATTR_TRANSACTIONAL))
		{
			int64		first;

			if (MqKafkaBatchAborted(window, topic->topic_id, partition, &it.hdr, &first) &&
				(it.hdr.producer_id != told_producer || first != told_first))
			{
				aborted(arg, it.hdr.producer_id, first);
				told_producer = it.hdr.producer_id;
				told_first = first;
			}
		}
		sink(arg, &it.hdr, it.stored + MQ_PREFIX_SIZE, it.hdr.length - MQ_PREFIX_SIZE);
		n++;
	}
	MqLogIterEnd(&it);
	return n;
}

/* ------------------------------------------------------------------------
 * The offset-range check
 * ------------------------------------------------------------------------ */

/*
 * The one check of an offset argument, so that fetch, seek, commit and
 * reset agree on the bounds and on the words of the error.  A read starts
 * between the log start offset and the high watermark (the high watermark
 * itself, "the end", included, as Kafka allows).  A group position may
 * also lie below the log start (position = true): Kafka lets a consumer
 * commit or seek there, and mqlog.auto_offset_reset moves it when it is
 * read.
 */
void
MqCheckOffsetRange(MqTopic *topic, int32 partition, int64 offset, bool position)
{
	int64		lso,
				hw;
	int64		start = MqLogStartOffset(topic, partition);
	int64		low = position ? 0 : start;
	const char *end_name;

	/*
	 * A replicated partition's log may run past its high watermark while
	 * the in-sync replicas catch up (after a restart, until they report):
	 * up to its log end an offset is valid, and a read there finds nothing
	 * yet, as Kafka's fetch does.
	 */
	if (topic->replicas != NULL)
		MqPartitionLogEnd(topic, partition, &lso, &hw);
	else
		MqPartitionOffsets(topic, partition, &lso, &hw);
	end_name = topic->replicas != NULL ? "log end offset" : "high watermark";
	if (offset < low || offset > hw)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset " INT64_FORMAT " is out of range for partition %d of topic \"%s\"",
						offset, partition, topic->name),
				 position ?
				 errdetail("A position runs from 0 to the %s " INT64_FORMAT "; one below the log start offset " INT64_FORMAT " is reset by mqlog.auto_offset_reset when it is read.",
						   end_name, hw, start) :
				 errdetail("Valid offsets run from the log start offset " INT64_FORMAT " to the %s " INT64_FORMAT ".",
						   start, end_name, hw),
				 errhint("Use the log start offset (mq_earliest_offset) or the end (mq_latest_offset).")));
}
