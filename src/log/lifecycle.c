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
 * producer's batches).  The first compaction that finds none of its
 * transaction's batches in the log (not the one that removed the last of
 * them) keeps it and records its delete horizon, now +
 * delete.retention.ms (Kafka's KIP-534 rule, log/kafka_marker_horizon.c:
 * in mqlog.kafka_marker_horizon, not in the marker's bytes); the first
 * compaction past that horizon removes it, with its horizon's row and,
 * for an ABORT, its range of mqlog.kafka_aborted_transaction
 * (doc/kafka.md, "Transactions").  A segment that reaches
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
#include "log/kafka_marker_horizon.h"
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
	HTAB	   *empty_markers;	/* EmptyMarker of the segment's markers whose
								 * transaction has no batch left */
	bool		in_segment;		/* walking the segment compacted */
} NoteState;

typedef struct EmptyMarker
{
	int64		offset;
	TimestampTz horizon;		/* recorded delete horizon; DT_NOBEGIN: none
								 * yet, this compaction records it */
} EmptyMarker;

/* offsets of markers, grown as needed */
typedef struct OffsetList
{
	int64	   *offsets;
	int			n;
	int			max;
} OffsetList;

static void
offset_list_add(OffsetList *l, int64 offset)
{
	if (l->n == l->max)
	{
		l->max = Max(16, l->max * 2);
		l->offsets = l->offsets ? repalloc(l->offsets, sizeof(int64) * l->max)
			: palloc(sizeof(int64) * l->max);
	}
	l->offsets[l->n++] = offset;
}

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
		{
			EmptyMarker *m = hash_search(ns->empty_markers, &hdr->base_offset, HASH_ENTER,
										 NULL);

			m->horizon = DT_NOBEGIN;
		}
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
	TimestampTz now;
	TimestampTz tombstone_horizon;
	Relation	target;			/* NULL: only count */
	MqTopic    *topic;
	int32		partition;
	uint64		lpos;
	int64		removed;
	OffsetList	first_empty;	/* markers found empty for the first time */
	OffsetList	dropped;		/* markers removed */
	OffsetList	dropped_aborts; /* ... of them the ABORT markers */
	StringInfoData buf;
} RewriteState;

/*
 * A Kafka transaction's marker, rebuilt as it was (its record, producer id
 * and epoch, offset) in the compacting transaction, as every batch of the
 * new segment is; or removed, as Kafka's cleaner removes it (KIP-534):
 * the first compaction that finds no batch of its transaction in the log
 * when it begins (so not the one that removed the last of them) keeps it
 * and records its delete horizon, delete.retention.ms from now; the first
 * one past that horizon removes it.  Its own timestamp plays no part: a
 * transaction that lost its last batch long after its marker was written
 * keeps the marker delete.retention.ms more, as in Kafka.
 */
static void
rewrite_control(RewriteState *st, MqBatchHeader *hdr, const char *stored)
{
	MqRecord   *rec;
	EmptyMarker *m;

	if (MqBatchDecodeAll(stored, hdr, hdr->base_offset, 1, &rec) != 1)
		elog(ERROR, "mqlog: the control batch at offset " INT64_FORMAT " holds no record",
			 hdr->base_offset);
	m = hash_search(st->empty_markers, &hdr->base_offset, HASH_FIND, NULL);
	if (m != NULL && TIMESTAMP_IS_NOBEGIN(m->horizon))
		offset_list_add(&st->first_empty, hdr->base_offset);
	else if (m != NULL && m->horizon <= st->now)
	{
		st->removed++;
		offset_list_add(&st->dropped, hdr->base_offset);
		/* key: version (int16), type (int16, 0 ABORT) */
		if (rec->keylen >= 4 && rec->key[2] == 0 && rec->key[3] == 0)
			offset_list_add(&st->dropped_aborts, hdr->base_offset);
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
 * The time ms milliseconds after now (sign 1) or before it (sign -1),
 * saturated: delete.retention.ms goes up to Kafka's 2^63 - 1, whose
 * microseconds no int64 holds, and a horizon computed with a wrapped
 * multiplication landed a millisecond after now, so the largest setting
 * (meant as "keep tombstones for ever") dropped every tombstone.  Past
 * timestamptz's range the result is '-infinity' or 'infinity'.
 */
static TimestampTz
ms_from(TimestampTz now, int64 ms, int sign)
{
	int64		us;
	TimestampTz result;

	if (pg_mul_s64_overflow(ms, 1000 * sign, &us) ||
		pg_add_s64_overflow(now, us, &result))
		return (ms > 0) == (sign > 0) ? DT_NOEND : DT_NOBEGIN;
	if (result < MIN_TIMESTAMP)
		return DT_NOBEGIN;
	if (result >= END_TIMESTAMP)
		return DT_NOEND;
	return result;
}

/*
 * The delete horizons recorded for the compacted segment's markers whose
 * transactions are empty, into their entries.
 */
static void
load_horizons(MqTopic *topic, int32 partition, HTAB *empty_markers)
{
	long		n = hash_get_num_entries(empty_markers);
	int64	   *offsets;
	TimestampTz *horizons;
	HASH_SEQ_STATUS seq;
	EmptyMarker *m;
	int			i = 0;

	if (n == 0)
		return;
	offsets = palloc(sizeof(int64) * n);
	horizons = palloc(sizeof(TimestampTz) * n);
	hash_seq_init(&seq, empty_markers);
	while ((m = hash_seq_search(&seq)) != NULL)
		offsets[i++] = m->offset;
	MqMarkerHorizonsLoad(topic->topic_id, partition, offsets, n, horizons);
	for (i = 0; i < n; i++)
	{
		m = hash_search(empty_markers, &offsets[i], HASH_FIND, NULL);
		m->horizon = horizons[i];
	}
	pfree(offsets);
	pfree(horizons);
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
	ctl.entrysize = sizeof(EmptyMarker);
	ns.empty_markers = hash_create("mqlog compaction markers", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int s = 0; s < topic->nsegments[partition]; s++)
	{
		ns.in_segment = topic->segments[partition][s].relid == oldrel;
		(void) walk_segment(topic, partition, topic->segments[partition][s].relid, lso, note_batch,
							&ns);
	}
	load_horizons(topic, partition, ns.empty_markers);

	memset(&st, 0, sizeof(st));
	st.latest = ns.latest;
	st.empty_markers = ns.empty_markers;
	st.now = GetCurrentTimestamp();
	st.tombstone_horizon = ms_from(st.now, topic->delete_retention_ms, -1);
	st.topic = topic;
	st.partition = partition;
	initStringInfo(&st.buf);
	if (OidIsValid(newrel))
		st.target = table_open(newrel, AccessExclusiveLock);
	st.removed += walk_segment(topic, partition, oldrel, lso, rewrite_batch, &st);
	/* by the counting call too: it is the only one if nothing goes */
	if (st.first_empty.n > 0)
		MqMarkerHorizonsRecord(topic->topic_id, partition, st.first_empty.offsets, st.first_empty.n,
							   ms_from(st.now, topic->delete_retention_ms, 1));
	if (st.target)
	{
		table_close(st.target, NoLock);
		if (st.dropped.n > 0)
			MqMarkerHorizonsForget(topic->topic_id, partition, st.dropped.offsets, st.dropped.n);
		/* Kafka's cleaner leaves the removed ABORT's range out of its index */
		if (st.dropped_aborts.n > 0)
			MqKafkaAbortedForget(topic->topic_id, partition, st.dropped_aborts.offsets,
								 st.dropped_aborts.n);
	}
	return st.removed;
}
