/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *		The C halves of the maintenance worker's segment work that are not
 *		rolls (those are log/partition_roll.c's): the maintenance lock,
 *		cutting a segment short (MqLogCutSegment, a follower's truncation)
 *		and compaction (MqLogCompactSegment).  The SQL functions the
 *		install script calls for them are sql/segments.c.
 *
 * Compaction (cleanup.policy=compact) rewrites a sealed segment into a new
 * relation keeping, for every key, only the record with the partition's
 * newest offset for that key; offsets are kept (gaps are fine, as in
 * Kafka), tombstones survive until delete.retention.ms has passed since
 * their timestamp, and batches of aborted transactions go away.  Keys are
 * matched by a 128-bit hash, as Kafka's cleaner matches them by digest.
 *
 * Kafka transactions follow Kafka's cleaner: the batches of an aborted
 * Kafka transaction (mqlog.kafka_aborted_transaction) go away and count
 * for no key; a committed transaction's batch kept whole stays
 * transactional (one that lost records is a plain batch after); a marker
 * (control batch) stays while the log may still hold a batch it decides
 * (an ABORT marker is where a read_committed consumer stops skipping its
 * producer's batches).  It goes in a compaction that finds none of its
 * transaction's batches in the log (the compaction that removed the last
 * of them kept it), once delete.retention.ms has passed since it was
 * written; an ABORT marker's range goes from
 * mqlog.kafka_aborted_transaction with it (doc/kafka.md, "Transactions",
 * compares this with Kafka's delete horizon).  A segment that reaches
 * past the last stable offset (an open Kafka transaction began in it
 * before it rolled) is not compacted until the transaction ends: its
 * batches above the LSO have no fate yet.
 * The rewritten batches are logged with XLMQ_COMPACTION so that logical
 * decoding does not hand them out a second time.  The catalog swap and the
 * new relation commit together, so readers see the old segment or the new.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/kafka_aborted.h"
#include "log/lifecycle.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/topic.h"

/*
 * One maintenance pass at a time per database.  The lock is an advisory
 * lock tag with a field of its own (4; pg_advisory_lock() and friends use
 * 1 and 2, the group handover lock 3), so no SQL function can take it: an
 * ordinary role cannot stall retention by holding it.  Held to the end of
 * the transaction; a second pass waits for the first.
 */
#define MQ_MAINTENANCE_LOCK_KEY	0x6d716c67	/* "mqlg" */

void
MqMaintenanceLock(void)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, MQ_MAINTENANCE_LOCK_KEY, 0, 4);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * Cut the segment relid so that it holds nothing at or past offset
 * (AccessExclusiveLock, within the caller's lock_timeout); false when a
 * batch spans offset.
 */
bool
MqLogCutSegment(Oid relid, int64 offset)
{
	Relation	rel = table_open(relid, AccessExclusiveLock);
	bool		cut = MqSegmentCutAt(rel, offset);

	table_close(rel, NoLock);
	return cut;
}

typedef struct KeyHash
{
	uint64		h1;
	uint64		h2;
} KeyHash;

typedef struct LatestEntry
{
	KeyHash		key;
	int64		offset;
} LatestEntry;

static KeyHash
key_hash(const char *key, int len)
{
	KeyHash		k;

	k.h1 = hash_bytes_extended((const unsigned char *) key, len, 0x6d716c6f67ULL);
	k.h2 = hash_bytes_extended((const unsigned char *) key, len, 0x636f6d70616374ULL);
	return k;
}

/*
 * Calls fn for the committed records of each batch of a partition's
 * segment relation below the LSO (none for a control batch, whose bytes
 * are in stored), kafka_aborted telling an aborted Kafka transaction's
 * batch; returns how many records the invisible batches (a rolled-back
 * PostgreSQL transaction's) held.
 */
typedef void (*record_fn) (MqRecord *rec, int nrec, MqBatchHeader *hdr, const char *stored,
						   bool kafka_aborted, void *arg);

static int64
walk_segment(MqTopic *topic, int32 partition, Oid relid, int64 lso, record_fn fn, void *arg)
{
	Relation	rel = try_table_open(relid, AccessShareLock);
	MqLogIter	it;
	MqRecord   *recs;
	int			n;
	int64		invisible;
	MqKafkaAborted *kafka_aborted;

	if (rel == NULL)
		return 0;
	kafka_aborted = palloc0(sizeof(MqKafkaAborted));
	MqLogIterBeginSegment(&it, rel, MQ_ITER_RECORDS);
	it.lso = lso;
	while (MqLogNextBatchRecords(&it, &recs, &n))
		fn(recs, n, &it.hdr, it.stored,
		   MqKafkaBatchAborted(kafka_aborted, topic->topic_id, partition, &it.hdr, NULL), arg);
	invisible = it.invisible_records;
	MqLogIterEnd(&it);
	table_close(rel, AccessShareLock);
	pfree(kafka_aborted);
	return invisible;
}

/*
 * What the first walk of a compaction learns from the whole partition:
 * the newest offset of each key, and which of the compacted segment's
 * markers decide no batch of the log any more.  A producer has one
 * transaction open at a time, so its transactional batches since its
 * previous marker are the next marker's transaction (Kafka's cleaner
 * tracks its ongoing transactions the same way); open holds the producers
 * with such a batch so far.
 */
typedef struct NoteState
{
	HTAB	   *latest;			/* KeyHash -> LatestEntry */
	HTAB	   *open;			/* producer ids with a batch since their marker */
	HTAB	   *empty_markers;	/* offsets of the segment's markers whose
								 * transaction has no batch left */
	bool		in_segment;		/* walking the segment compacted */
} NoteState;

static void
note_batch(MqRecord *recs, int n, MqBatchHeader *hdr, const char *stored, bool kafka_aborted,
		   void *arg)
{
	NoteState  *ns = arg;

	if (hdr->producer_id >= 0 && (hdr->attributes & MQ_ATTR_CONTROL))
	{
		bool		had_batch;

		(void) hash_search(ns->open, &hdr->producer_id, HASH_REMOVE, &had_batch);
		if (ns->in_segment && !had_batch)
			(void) hash_search(ns->empty_markers, &hdr->base_offset, HASH_ENTER, NULL);
		return;
	}
	/* aborted or committed, the transaction's batch is still in the log */
	if (hdr->producer_id >= 0 && (hdr->attributes & MQ_ATTR_TRANSACTIONAL))
		(void) hash_search(ns->open, &hdr->producer_id, HASH_ENTER, NULL);
	if (kafka_aborted)
		return;					/* counts for no key */

	for (int i = 0; i < n; i++)
		if (recs[i].key)
		{
			KeyHash		k = key_hash(recs[i].key, recs[i].keylen);
			LatestEntry *e = hash_search(ns->latest, &k, HASH_ENTER, NULL);

			e->offset = recs[i].offset;
		}
}

typedef struct RewriteState
{
	HTAB	   *latest;
	HTAB	   *empty_markers;
	TimestampTz tombstone_horizon;
	Relation	target;			/* NULL: only count */
	MqTopic    *topic;
	int32		partition;
	uint64		lpos;
	int64		removed;
	int64	   *dropped_aborts; /* offsets of the ABORT markers removed */
	int			ndropped;
	int			maxdropped;
	StringInfoData buf;
} RewriteState;

/*
 * A Kafka transaction's marker, rebuilt as it was (its record, producer id
 * and epoch, offset) in the compacting transaction, as every batch of the
 * new segment is; or removed, as Kafka's cleaner removes it: once no batch
 * of its transaction was left in the log when this compaction began (so
 * the compaction that removed the last of them keeps it, and a later one
 * removes it), and its own timestamp (when it was written) is older than
 * delete.retention.ms, the tombstones' horizon.
 */
static void
rewrite_control(RewriteState *st, MqBatchHeader *hdr, const char *stored)
{
	MqRecord   *rec;

	if (MqBatchDecodeAll(stored, hdr, hdr->base_offset, 1, &rec) != 1)
		elog(ERROR, "mqlog: the control batch at offset " INT64_FORMAT " holds no record",
			 hdr->base_offset);
	if (hash_search(st->empty_markers, &hdr->base_offset, HASH_FIND, NULL) != NULL &&
		hdr->max_timestamp < st->tombstone_horizon)
	{
		st->removed++;
		/* key: version (int16), type (int16, 0 ABORT) */
		if (rec->keylen >= 4 && rec->key[2] == 0 && rec->key[3] == 0)
		{
			if (st->ndropped == st->maxdropped)
			{
				st->maxdropped = Max(16, st->maxdropped * 2);
				st->dropped_aborts = st->dropped_aborts
					? repalloc(st->dropped_aborts, sizeof(int64) * st->maxdropped)
					: palloc(sizeof(int64) * st->maxdropped);
			}
			st->dropped_aborts[st->ndropped++] = hdr->base_offset;
		}
		return;
	}
	if (st->target == NULL)
		return;
	resetStringInfo(&st->buf);
	MqBatchBuild(&st->buf, rec, 1, GetCurrentTransactionId(),
				 MQ_ATTR_TRANSACTIONAL | MQ_ATTR_CONTROL, true);
	MqBatchSetProducer(st->buf.data, hdr->producer_id, hdr->producer_epoch, -1);
	MqBatchSetEpoch(st->buf.data, hdr->leader_epoch);
	MqSegmentAppend(st->target, st->topic->topic_id, st->partition, st->lpos,
					st->buf.data, st->buf.len, -1, XLMQ_COMPACTION);
	st->lpos += st->buf.len;
}

static void
rewrite_batch(MqRecord *recs, int n, MqBatchHeader *hdr, const char *stored, bool kafka_aborted,
			  void *arg)
{
	RewriteState *st = arg;
	MqRecord   *keep;
	int			nkeep = 0;

	if (hdr->attributes & MQ_ATTR_CONTROL)
	{
		rewrite_control(st, hdr, stored);
		return;
	}
	if (kafka_aborted)
	{
		st->removed += hdr->record_count;
		return;
	}

	keep = palloc(sizeof(MqRecord) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		MqRecord   *r = &recs[i];

		if (r->key)
		{
			KeyHash		k = key_hash(r->key, r->keylen);
			LatestEntry *e = hash_search(st->latest, &k, HASH_FIND, NULL);

			if (e && e->offset != r->offset)
				continue;		/* a newer record has this key */
			if (r->value == NULL && r->ts < st->tombstone_horizon)
				continue;		/* tombstone past delete.retention.ms */
		}
		keep[nkeep++] = *r;
	}
	st->removed += n - nkeep;
	if (st->target && nkeep > 0)
	{
		resetStringInfo(&st->buf);
		MqBatchBuild(&st->buf, keep, nkeep, GetCurrentTransactionId(),
					 hdr->attributes & (MQ_ATTR_CODEC_MASK | MQ_ATTR_LOG_APPEND_TIME |
										(nkeep == n ? MQ_ATTR_TRANSACTIONAL : 0)), true);

		/*
		 * A batch kept whole keeps its idempotent producer's id, epoch and
		 * sequence, as Kafka's cleaner keeps them: the producers' state is
		 * loaded from the log (log/producers_load.c); and a committed Kafka
		 * transaction's batch stays transactional.  One that lost records
		 * no longer spans its sequences, and goes without them (and
		 * without the transactional bit, which needs a producer): its
		 * producer is then unknown to a load, which takes its next batch
		 * at any sequence.
		 */
		if (nkeep == n && hdr->producer_id >= 0)
			MqBatchSetProducer(st->buf.data, hdr->producer_id, hdr->producer_epoch,
							   hdr->base_sequence);
		/*
		 * The leader epoch the batch was written in, as Kafka's cleaner
		 * keeps it: truncation after a failover reads epochs from the log
		 * (log/epochs.c), and they must never go down along it.  (Outside
		 * the CRC, like all of Kafka's first 17 bytes but the magic.)
		 */
		MqBatchSetEpoch(st->buf.data, hdr->leader_epoch);
		MqSegmentAppend(st->target, st->topic->topic_id, st->partition, st->lpos,
						st->buf.data, st->buf.len, -1, XLMQ_COMPACTION);
		st->lpos += st->buf.len;
	}
}

/*
 * The time ms milliseconds before now, saturated: delete.retention.ms goes
 * up to Kafka's 2^63 - 1, whose microseconds no int64 holds, and a horizon
 * computed with a wrapped multiplication landed a millisecond after now,
 * so the largest setting (meant as "keep tombstones for ever") dropped
 * every tombstone.  Past timestamptz's range the horizon is '-infinity'.
 */
static TimestampTz
ms_before(TimestampTz now, int64 ms)
{
	int64		us;
	TimestampTz result;

	if (pg_mul_s64_overflow(ms, 1000, &us) ||
		pg_sub_s64_overflow(now, us, &result))
		return ms > 0 ? DT_NOBEGIN : DT_NOEND;
	if (result < MIN_TIMESTAMP)
		return DT_NOBEGIN;
	if (result >= END_TIMESTAMP)
		return DT_NOEND;
	return result;
}

/*
 * Where the sealed segment relid of a partition ends: the base offset of
 * the next segment written to.  PG_INT64_MAX if there is none (then it is
 * not sealed after all).
 */
static int64
segment_end(MqTopic *topic, int32 partition, Oid relid)
{
	bool		found = false;

	for (int s = 0; s < topic->nsegments[partition]; s++)
	{
		MqSegmentRef *seg = &topic->segments[partition][s];

		if (found && seg->base_offset >= 0)
			return seg->base_offset;
		if (seg->relid == relid)
			found = true;
	}
	return PG_INT64_MAX;
}

/*
 * Compaction of the sealed segment oldrel of a partition (both checked
 * by the caller): how many records it removes; with a new relation newrel
 * (created by the caller in this transaction) the survivors are written
 * there.  Only a compacted topic's segments: compaction of any other would
 * drop records its retention keeps.  -1: not now, the segment reaches past
 * the last stable offset (an open Kafka transaction began in it).
 */
int64
MqLogCompactSegment(MqTopic *topic, int32 partition, Oid oldrel, Oid newrel)
{
	HASHCTL		ctl;
	NoteState	ns;
	RewriteState st;
	int64		lso,
				hw;

	if (!topic->compact)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" is not compacted", topic->name),
				 errhint("Set cleanup.policy to compact with mq_alter_topic().")));
	MqPartitionOffsets(topic, partition, &lso, &hw);
	if (segment_end(topic, partition, oldrel) > lso)
		return -1;

	memset(&ns, 0, sizeof(ns));
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(KeyHash);
	ctl.entrysize = sizeof(LatestEntry);
	ctl.hcxt = CurrentMemoryContext;
	ns.latest = hash_create("mqlog compaction keys", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(int64);
	ns.open = hash_create("mqlog compaction producers", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ns.empty_markers = hash_create("mqlog compaction markers", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int s = 0; s < topic->nsegments[partition]; s++)
	{
		ns.in_segment = topic->segments[partition][s].relid == oldrel;
		(void) walk_segment(topic, partition, topic->segments[partition][s].relid, lso, note_batch,
							&ns);
	}

	memset(&st, 0, sizeof(st));
	st.latest = ns.latest;
	st.empty_markers = ns.empty_markers;
	st.tombstone_horizon = ms_before(GetCurrentTimestamp(), topic->delete_retention_ms);
	st.topic = topic;
	st.partition = partition;
	initStringInfo(&st.buf);
	if (OidIsValid(newrel))
		st.target = table_open(newrel, AccessExclusiveLock);
	st.removed += walk_segment(topic, partition, oldrel, lso, rewrite_batch, &st);
	if (st.target)
	{
		table_close(st.target, NoLock);
		/* Kafka's cleaner leaves the removed ABORT's range out of its index */
		if (st.ndropped > 0)
			MqKafkaAbortedForget(topic->topic_id, partition, st.dropped_aborts, st.ndropped);
	}
	return st.removed;
}
