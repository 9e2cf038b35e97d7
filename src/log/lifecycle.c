/*-------------------------------------------------------------------------
 *
 * lifecycle.c
 *		The C halves of the maintenance worker's segment work: its own roll
 *		(mqlog._roll_segment), the spare segments appenders roll into
 *		(mqlog._spare_base, _publish_spare, _roll_to_spare, _wanted_spares;
 *		and _extend_ahead, the pages extended ahead of appenders;
 *		see "Rolling at segment.bytes and segment.ms" in partition.c), and
 *		compaction.
 *
 * The worker's own roll seals a partition's active segment and starts the
 * next one at the partition's next offset; it serves partitions that no
 * appender rolls (segment.ms passed while idle, or mqlog.roll_ahead off),
 * so producers never wait on DDL of their own.  To seal a
 * segment no append may be in flight in it: _roll_begin takes an
 * ExclusiveLock on the segment only if it is free at once (a producer
 * transaction holds RowExclusiveLock until it ends, so a busy segment is
 * simply tried again on the next pass), and that lock keeps new producers
 * out until the rolling transaction commits.  At commit the partition's
 * shared state switches to the new segment; producers then notice that
 * their cached chain is stale and reload it.
 *
 * Compaction (cleanup.policy=compact) rewrites a sealed segment into a new
 * relation keeping, for every key, only the record with the partition's
 * newest offset for that key; offsets are kept (gaps are fine, as in
 * Kafka), tombstones survive until delete.retention.ms has passed since
 * their timestamp, and batches of aborted transactions go away.  Keys are
 * matched by a 128-bit hash, as Kafka's cleaner matches them by digest.
 * The rewritten batches are logged with XLMQ_COMPACTION so that logical
 * decoding does not hand them out a second time.  The catalog swap and the
 * new relation commit together, so readers see the old segment or the new.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/lsyscache.h"

#include "catalog/namespace.h"

#include "funcapi.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "access/table.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/rel.h"

#include "mqlog.h"
#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/am.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/topic.h"

PG_FUNCTION_INFO_V1(mqlog_roll_begin);
PG_FUNCTION_INFO_V1(mqlog_roll_finish);
PG_FUNCTION_INFO_V1(mqlog_truncate_finish);
PG_FUNCTION_INFO_V1(mqlog_cut_segment);
PG_FUNCTION_INFO_V1(mqlog_forget_topic);
PG_FUNCTION_INFO_V1(mqlog_compact_segment);
PG_FUNCTION_INFO_V1(mqlog_segment_first_timestamp);
PG_FUNCTION_INFO_V1(mqlog_spare_base);
PG_FUNCTION_INFO_V1(mqlog_publish_spare);
PG_FUNCTION_INFO_V1(mqlog_roll_to_spare);
PG_FUNCTION_INFO_V1(mqlog_wanted_spares);
PG_FUNCTION_INFO_V1(mqlog_extend_ahead);
PG_FUNCTION_INFO_V1(mqlog_request_pass);
PG_FUNCTION_INFO_V1(mqlog_request_pass_at_commit);
PG_FUNCTION_INFO_V1(mqlog_maintenance_lock);

/*
 * One maintenance pass at a time per database.  The lock is an advisory
 * lock tag with a field of its own (4; pg_advisory_lock() and friends use
 * 1 and 2, the group handover lock 3), so no SQL function can take it: an
 * ordinary role cannot stall retention by holding it.  Held to the end of
 * the transaction; a second pass waits for the first.
 */
#define MQ_MAINTENANCE_LOCK_KEY	0x6d716c67	/* "mqlg" */

Datum
mqlog_maintenance_lock(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, MQ_MAINTENANCE_LOCK_KEY, 0, 4);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	PG_RETURN_VOID();
}

/*
 * Arguments (topic_id, partition, segment relid) of the internal segment
 * functions, checked: the partition's shared state, and the relid.
 */
static MqPartition *
segment_args(FunctionCallInfo fcinfo, Oid *relid)
{
	MqTopic    *topic;
	int32		partition = PG_GETARG_INT32(1);

	*relid = PG_GETARG_OID(2);
	MqCheckSegment(*relid);
	topic = MqTopicLookupById(PG_GETARG_INT32(0));
	MqCheckPartition(topic, partition);
	return MqTopicPartition(topic, partition);
}

/* Timestamp of a segment's first batch, or NULL if it is empty. */
Datum
mqlog_segment_first_timestamp(PG_FUNCTION_ARGS)
{
	Relation	rel = MqSegmentOpen(PG_GETARG_OID(0), AccessShareLock);
	bool		found;
	TimestampTz ts = 0;

	if (rel == NULL)
		PG_RETURN_NULL();
	found = MqSegmentFirstTimestamp(rel, &ts);
	table_close(rel, AccessShareLock);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_TIMESTAMPTZ(ts);
}

Datum
mqlog_roll_begin(PG_FUNCTION_ARGS)
{
	int32		topic_id = PG_GETARG_INT32(0);
	int32		partition = PG_GETARG_INT32(1);
	Oid			relid = PG_GETARG_OID(2);
	MqTopic    *topic;
	MqPartition *part;
	const MqSegmentRef *seg;
	Relation	rel;
	int64		next;

	MqCheckSegment(relid);
	if (!ConditionalLockRelationOid(relid, ExclusiveLock))
		PG_RETURN_NULL();

	topic = MqTopicLookupById(topic_id);
	MqCheckPartition(topic, partition);
	seg = MqTopicActiveSegment(topic, partition);
	if (seg->relid != relid)
		PG_RETURN_NULL();
	part = MqTopicPartition(topic, partition);
	rel = table_open(relid, NoLock);
	next = MqPartitionRollPoint(part, rel, relid, seg->base_offset);
	table_close(rel, NoLock);
	if (next < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(next);
}

Datum
mqlog_roll_finish(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionSwitchAtCommit(part, relid, PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/*
 * mqlog._truncate_finish(topic_id, partition, relid, base_offset): as
 * _roll_finish, for a log whose end moved to base_offset (mqlog._move_log_end):
 * when the transaction commits, the log ends there.
 */
Datum
mqlog_truncate_finish(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionTruncateAtCommit(part, relid, PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/*
 * mqlog._cut_segment(topic_id, partition, relid, offset): cut the segment
 * so that it holds nothing at or past offset (AccessExclusiveLock, within
 * the caller's lock_timeout); false when a batch spans offset.
 */
Datum
mqlog_cut_segment(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	bool		cut;

	(void) segment_args(fcinfo, &relid);
	rel = table_open(relid, AccessExclusiveLock);
	cut = MqSegmentCutAt(rel, PG_GETARG_INT64(3));
	table_close(rel, NoLock);
	PG_RETURN_BOOL(cut);
}

/*
 * mqlog._spare_base(topic_id, partition, relid): where the partition rolled
 * into its spare segment relid, or null while the spare is unused.
 */
Datum
mqlog_spare_base(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);
	int64		base = MqPartitionSpareBase(part, relid);

	if (base < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(base);
}

/* mqlog._publish_spare(topic_id, partition, relid): appenders may roll into it once this commits. */
Datum
mqlog_publish_spare(PG_FUNCTION_ARGS)
{
	Oid			relid;
	MqPartition *part = segment_args(fcinfo, &relid);

	MqPartitionPublishSpareAtCommit(part, relid);
	PG_RETURN_VOID();
}

/*
 * mqlog._roll_to_spare(topic_id, partition): roll an idle partition into
 * its spare (segment.ms passed with no appender to do it); the new base
 * offset, or null if there was nothing to roll or no spare.
 */
Datum
mqlog_roll_to_spare(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicRefresh(MqTopicLookupById(PG_GETARG_INT32(0))->name);
	int32		partition = PG_GETARG_INT32(1);
	const MqSegmentRef *seg;
	Relation	active,
				spare;
	int64		base;

	MqCheckPartition(topic, partition);
	if (!OidIsValid(topic->spares[partition]))
		PG_RETURN_NULL();
	seg = MqTopicActiveSegment(topic, partition);
	active = try_table_open(seg->relid, RowExclusiveLock);
	if (active == NULL)
		PG_RETURN_NULL();
	spare = try_table_open(topic->spares[partition], RowExclusiveLock);
	if (spare == NULL)
	{
		table_close(active, NoLock);
		PG_RETURN_NULL();
	}
	base = MqPartitionRollToSpare(MqTopicPartition(topic, partition), active, seg->base_offset, spare);
	table_close(spare, NoLock);
	table_close(active, NoLock);
	if (base < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(base);
}

/*
 * mqlog._wanted_spares(): (topic_id, partition) of every partition of this
 * database whose appenders asked for a spare segment or rolled into one
 * that the catalog does not show yet.
 */
Datum
mqlog_wanted_spares(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			catalog = MqTopicCatalogRelid();
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, MqPartitionsWantingSpares(catalog))
	{
		List	   *pair = lfirst(lc);
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Int32GetDatum(linitial_int(pair));
		values[1] = Int32GetDatum(lsecond_int(pair));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * mqlog._extend_ahead(): extend the active segments whose appenders asked
 * for pages ahead (MqPartitionsExtendAhead); the count of pages added.
 */
Datum
mqlog_extend_ahead(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(MqPartitionsExtendAhead(MqTopicCatalogRelid()));
}

/* mqlog._request_pass(): a roll-ahead pass in this database soon. */
Datum
mqlog_request_pass(PG_FUNCTION_ARGS)
{
	MqRequestMaintenance();
	PG_RETURN_VOID();
}

/*
 * mqlog._request_pass_at_commit(): the same once this transaction commits
 * (mq_create_topic of more partitions than it creates segments for).
 */
Datum
mqlog_request_pass_at_commit(PG_FUNCTION_ARGS)
{
	MqRequestMaintenanceAtCommit();
	PG_RETURN_VOID();
}

/* Called by mq_drop_topic: free the topic's shared partition state at commit. */
Datum
mqlog_forget_topic(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));

	MqPartitionForgetAtCommit(topic->catalog_relid, topic->topic_id);
	PG_RETURN_VOID();
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
 * Calls fn for the committed records of each batch of a relation below the
 * LSO; returns the records of invisible (aborted) batches through *aborted.
 */
typedef void (*record_fn) (MqRecord *rec, int nrec, MqBatchHeader *hdr, void *arg);

static void
walk_segment(Oid relid, int64 lso, record_fn fn, void *arg, int64 *aborted)
{
	Relation	rel = try_table_open(relid, AccessShareLock);
	MqLogIter	it;
	MqRecord   *recs;
	int			n;

	if (rel == NULL)
		return;
	MqLogIterBeginSegment(&it, rel, MQ_ITER_RECORDS);
	it.lso = lso;
	while ((recs = MqLogNextBatchRecords(&it, &n)) != NULL)
		fn(recs, n, &it.hdr, arg);
	if (aborted)
		*aborted += it.invisible_records;
	MqLogIterEnd(&it);
	table_close(rel, AccessShareLock);
}

static void
note_latest(MqRecord *recs, int n, MqBatchHeader *hdr, void *arg)
{
	HTAB	   *latest = arg;

	for (int i = 0; i < n; i++)
		if (recs[i].key)
		{
			KeyHash		k = key_hash(recs[i].key, recs[i].keylen);
			LatestEntry *e = hash_search(latest, &k, HASH_ENTER, NULL);

			e->offset = recs[i].offset;
		}
}

typedef struct RewriteState
{
	HTAB	   *latest;
	TimestampTz tombstone_horizon;
	Relation	target;			/* NULL: only count */
	MqTopic    *topic;
	int32		partition;
	uint64		lpos;
	int64		removed;
	StringInfoData buf;
} RewriteState;

static void
rewrite_batch(MqRecord *recs, int n, MqBatchHeader *hdr, void *arg)
{
	RewriteState *st = arg;
	MqRecord   *keep = palloc(sizeof(MqRecord) * Max(n, 1));
	int			nkeep = 0;

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
					 hdr->attributes & (MQ_ATTR_CODEC_MASK | MQ_ATTR_LOG_APPEND_TIME), true);
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
 * mqlog._compact_segment_into(topic_id, partition, old relid, new relid):
 * how many records compaction removes from the old segment; with a new
 * relation (created by the caller in this transaction) the survivors are
 * written there.
 */
Datum
mqlog_compact_segment(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookupById(PG_GETARG_INT32(0));
	int32		partition = PG_GETARG_INT32(1);
	Oid			oldrel = PG_GETARG_OID(2);
	Oid			newrel = PG_GETARG_OID(3);
	HASHCTL		ctl;
	RewriteState st;
	int64		lso,
				hw,
				aborted = 0;

	MqCheckPartition(topic, partition);
	MqCheckSegment(oldrel);
	if (OidIsValid(newrel))
		MqCheckSegment(newrel);
	if (!topic->compact)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" is not compacted", topic->name),
				 errhint("Set cleanup.policy to compact with mq_alter_topic().")));
	MqPartitionOffsets(topic, partition, &lso, &hw);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(KeyHash);
	ctl.entrysize = sizeof(LatestEntry);
	ctl.hcxt = CurrentMemoryContext;
	memset(&st, 0, sizeof(st));
	st.latest = hash_create("mqlog compaction keys", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int s = 0; s < topic->nsegments[partition]; s++)
		walk_segment(topic->segments[partition][s].relid, lso, note_latest, st.latest, NULL);

	st.tombstone_horizon = ms_before(GetCurrentTimestamp(), topic->delete_retention_ms);
	st.topic = topic;
	st.partition = partition;
	initStringInfo(&st.buf);
	if (OidIsValid(newrel))
		st.target = table_open(newrel, AccessExclusiveLock);
	walk_segment(oldrel, lso, rewrite_batch, &st, &aborted);
	if (st.target)
		table_close(st.target, NoLock);
	PG_RETURN_INT64(st.removed + aborted);
}
