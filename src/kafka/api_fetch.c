/*-------------------------------------------------------------------------
 *
 * api_fetch.c
 *		Fetch (key 1, v4-v12, flexible from v12): the stored batches of
 *		each partition sent as they are stored, minus mqlog's prefix
 *		(MqLogReadKafkaBatches, the read behind mq_fetch_kafka_batches).
 *
 * read_committed (isolation 1) reads below the last stable offset (which
 * an open Kafka transaction holds at its first offset, as an open SQL
 * transaction does) and leaves the batches of aborted SQL transactions
 * out: they carry no producer id or control batch a client could filter
 * by.  The batches of aborted Kafka transactions are sent, and the
 * aborted transactions list names each of their transactions once
 * (producer id, first offset: log/kafka_aborted.c), so the client filters
 * them as Kafka's do; bounded by the batches sent.
 * read_uncommitted (0) reads up to the high watermark, batches of
 * transactions still in flight included, as Kafka's does.
 *
 * A Fetch that finds fewer than min_bytes parks (MQK_PARK): the listener
 * serves it again when one of its partitions may have moved (each is
 * stamped before its offsets are read, watch.c), when the catalog changed
 * or when max_wait_ms is up, and other connections are served meanwhile
 * (listener.c).
 * Incremental fetch sessions (KIP-227) are not kept: session id 0 in
 * every answer tells the client to send full requests.  A replicated
 * partition is served where it is led, and from v11 by its followers too
 * (up to their high watermark), where a leader sends a consumer whose
 * rack_id names a follower's rack (preferred_read_replica, KIP-392:
 * read_replicas.c); elsewhere NOT_LEADER_OR_FOLLOWER.  A partition's
 * current_leader_epoch (v9+) is checked first (FENCED_LEADER_EPOCH,
 * UNKNOWN_LEADER_EPOCH: MqKafkaCheckLeaderEpoch).  On the leader, a
 * partition's last_fetched_epoch (v12+, -1: none) is checked as Kafka's
 * leader checks it (KIP-320, Partition's readRecords): when the epoch ends
 * here (MqKafkaEpochEnd) below the fetch offset, or an older epoch is the
 * largest at most it, the log the client read has diverged from this one,
 * and the answer is diverging_epoch (that epoch and its end) without
 * records, for the client to truncate to; an epoch this log cannot place is
 * OFFSET_OUT_OF_RANGE.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "store/batch.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/kafka_internal.h"

typedef struct FetchPartition
{
	int32		index;
	int32		current_leader_epoch;	/* -1: no check */
	int64		offset;
	int32		last_fetched_epoch; /* -1: none */
	int32		max_bytes;
	/* the answer */
	int16		error;
	int32		diverging_epoch;	/* -1: none, else diverging_end too */
	int64		diverging_end;
	int64		high_watermark;
	int64		last_stable;
	int64		log_start;
	int32		preferred;		/* preferred_read_replica; -1: none */
	int			records_at;		/* its batches: where in the request's */
	int			records_len;	/* records buffer, and how many bytes */
	/* read_committed: the aborted Kafka transactions among its batches */
	int			naborted;
	int			maxaborted;
	int64	   *aborted;		/* producer id, first offset; pairs */
} FetchPartition;

typedef struct FetchTopic
{
	char	   *name;
	int			npartitions;
	FetchPartition *partitions;
} FetchTopic;

typedef struct FetchUnit
{
	MqKafkaRequest *req;		/* its watch, should the request park */
	const char *topic;
	FetchPartition *part;
	bool		committed;
	const char *rack;			/* the request's rack_id */
	int64		budget;
	StringInfo	records;		/* every partition's batches, one after another */
} FetchUnit;

static void
append_batch(void *arg, const MqBatchHeader *hdr, const char *kafka, Size len)
{
	FetchUnit  *u = arg;

	appendBinaryStringInfo(u->records, kafka, (int) len);
}

/*
 * An aborted Kafka transaction among the partition's batches, for the
 * answer's aborted_transactions: once each (at most one per batch sent)
 */
static void
note_aborted(void *arg, int64 producer_id, int64 first_offset)
{
	FetchPartition *fp = ((FetchUnit *) arg)->part;

	for (int i = 0; i < fp->naborted; i++)
		if (fp->aborted[2 * i] == producer_id && fp->aborted[2 * i + 1] == first_offset)
			return;
	if (fp->naborted == fp->maxaborted)
	{
		fp->maxaborted = Max(8, fp->maxaborted * 2);
		fp->aborted = fp->aborted ? repalloc(fp->aborted, sizeof(int64) * 2 * fp->maxaborted)
			: palloc(sizeof(int64) * 2 * fp->maxaborted);
	}
	fp->aborted[2 * fp->naborted] = producer_id;
	fp->aborted[2 * fp->naborted + 1] = first_offset;
	fp->naborted++;
}

/*
 * Has the log the client read diverged from this one (see above)?  true:
 * answered, with diverging_epoch or an error
 */
static bool
diverged(MqTopic *topic, FetchPartition *fp)
{
	int32		end_epoch;
	int64		end = MqKafkaEpochEnd(topic, fp->index, fp->last_fetched_epoch, &end_epoch);

	if (end < 0 || end_epoch < 0 || fp->offset < MqLogStartOffset(topic, fp->index))
		fp->error = MQK_OFFSET_OUT_OF_RANGE;
	else if (end_epoch < fp->last_fetched_epoch || end < fp->offset)
	{
		fp->diverging_epoch = end_epoch;
		fp->diverging_end = end;
		MqPartitionOffsets(topic, fp->index, &fp->last_stable, &fp->high_watermark);
		fp->log_start = MqLogStartOffset(topic, fp->index);
	}
	else
		return false;
	return true;
}

/* one partition, in a subtransaction (MqKafkaTry) */
static void
fetch_partition(void *arg)
{
	FetchUnit  *u = arg;
	FetchPartition *fp = u->part;
	MqTopic    *topic = MqKafkaTopic(u->topic, MQ_PRIV_CONSUME, &fp->error);
	MqTopic    *looked_up;
	bool		follower;
	int			had = u->records->len;

	if (topic == NULL)
		return;
	if (fp->index < 0 || fp->index >= topic->partitions)
	{
		fp->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	/* the epoch first, as Kafka's leader checks it; again on a copy read again */
	if ((fp->error = MqKafkaCheckLeaderEpoch(topic, fp->index,
											 fp->current_leader_epoch)) != MQK_NONE)
		return;
	looked_up = topic;
	if ((fp->error = MqKafkaCheckFetchReplica(&topic, fp->index, u->req->api_version >= 11,
											  &follower)) != MQK_NONE)
		return;
	if (topic != looked_up &&
		(fp->error = MqKafkaCheckLeaderEpoch(topic, fp->index,
											 fp->current_leader_epoch)) != MQK_NONE)
		return;
	/* the leader's history decides a divergence (a follower's may be behind) */
	if (!follower && fp->last_fetched_epoch >= 0 && diverged(topic, fp))
		return;
	/*
	 * A partition whose first segment is still to be made reads as empty
	 * and has no shared state to stamp (nor needs one before its segment,
	 * a catalog change, is made): stamped NULL, it takes no entry.
	 */
	MqKafkaWatchPartition(u->req, MqTopicPartitionPending(topic, fp->index) ? NULL :
						  MqTopicPartition(topic, fp->index));
	/* a follower's log behind the client's position: to the leader (read_replicas.c) */
	if (follower && MqKafkaFollowerBehind(topic, fp->index, fp->offset))
	{
		if ((fp->preferred = MqKafkaLeaderBroker(topic, fp->index)) < 0)
			fp->error = MQK_NOT_LEADER_OR_FOLLOWER;
		else
		{
			MqPartitionOffsets(topic, fp->index, &fp->last_stable, &fp->high_watermark);
			fp->log_start = MqLogStartOffset(topic, fp->index);
		}
		return;
	}
	/* the one offset check: 22023 is OFFSET_OUT_OF_RANGE here */
	MqCheckOffsetRange(topic, fp->index, fp->offset, false);
	MqPartitionOffsets(topic, fp->index, &fp->last_stable, &fp->high_watermark);
	fp->log_start = MqLogStartOffset(topic, fp->index);
	/* a follower in the client's rack: no records, the client goes there */
	if (!follower &&
		(fp->preferred = MqKafkaPreferredReplica(topic, fp->index, fp->offset, u->rack)) >= 0)
		return;
	if (u->budget > 0)
		(void) MqLogReadKafkaBatches(topic, fp->index, fp->offset, u->budget, u->committed,
									 append_batch, u->committed ? note_aborted : NULL, u);
	if (follower)
		MqKafkaNoteFollowerFetch(u->req, u->topic, fp->index, fp->offset, fp->high_watermark,
								 u->records->len - had);
}

/*
 * Every partition the request names, into records (a probe, watch.c:
 * only those that moved since the parked run, counting for the others
 * the bytes they had then); the bytes found in all, *any_error if a
 * partition has an error or a preferred read replica to tell (either is
 * answered at once, as Kafka does)
 */
static int64
read_partitions(MqKafkaRequest *req, FetchTopic *topics, int ntopics, int32 max_bytes,
				bool committed, const char *rack, StringInfo records, bool *any_error)
{
	int64		total = 0;
	int			attempted = 0;

	*any_error = false;
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			FetchPartition *fp = &topics[t].partitions[p];
			FetchUnit	u;
			int16		code;
			int64		had;

			if (MqKafkaWatchUnmoved(req, &had))
			{
				total += had;
				continue;
			}
			fp->error = MQK_NONE;
			fp->diverging_epoch = -1;
			fp->naborted = 0;
			fp->records_at = records->len;
			fp->high_watermark = fp->last_stable = fp->log_start = -1;
			fp->preferred = -1;
			u.req = req;
			u.topic = topics[t].name;
			u.part = fp;
			u.committed = committed;
			u.rack = rack;
			u.records = records;
			/*
			 * What max_bytes leaves, and no more than the partition's own
			 * max_bytes; the log reads the first batch however large
			 * (MqLogReadKafkaBatches).  The first partition is bounded by
			 * max_bytes too: a partition_max_bytes of 2 GB must not make
			 * the listener read 2 GB.
			 */
			u.budget = Min((int64) Max(fp->max_bytes, 0), (int64) max_bytes - total);
			/*
			 * Past the request's time (MQK_REQUEST_TIME_MS) a partition is
			 * answered with its offsets and no records, as when max_bytes
			 * is spent: the client asks again.  A frame naming one
			 * partition thousands of times with a small partition_max_bytes
			 * would otherwise read its first batch, however large, as
			 * often, while every other connection waits.
			 */
			if (MqKafkaOutOfTime(req, &attempted))
				u.budget = 0;
			code = MqKafkaTry(fetch_partition, &u, MQK_OFFSET_OUT_OF_RANGE, records);
			if (code != MQK_NONE)
				fp->error = code;
			if (fp->error != MQK_NONE || fp->diverging_epoch >= 0 || fp->preferred >= 0)
				*any_error = true;	/* to tell at once */
			if (records->len == fp->records_at)
				fp->naborted = 0;	/* nothing sent: nothing to filter */
			/*
			 * Only the first partition that has records may overshoot with
			 * its first batch, as in Kafka (which stops ignoring the limits
			 * once it has read from a non-empty partition): after it, a
			 * batch larger than what is left is not sent, or the response
			 * passes fetch.max.bytes and a client that sized
			 * receive.message.max.bytes by it drops the connection
			 * (librdkafka's test 0082).  Kafka would send a cut batch the
			 * client ignores; sending none is the same to the client, which
			 * asks for the partition again.
			 */
			if (total > 0 && records->len - fp->records_at > u.budget)
			{
				records->len = fp->records_at;
				fp->naborted = 0;
			}
			fp->records_len = records->len - fp->records_at;
			MqKafkaWatchBytes(req, fp->records_len);
			total += fp->records_len;
		}
	return total;
}

/*
 * A partition's tagged fields (v12+): diverging_epoch (tag 0, an
 * EpochEndOffset: epoch, end_offset, its own tags) when it has one
 */
static void
write_partition_tags(StringInfo out, bool flex, const FetchPartition *fp)
{
	if (!flex || fp->diverging_epoch < 0)
	{
		MqKafkaWriteTags(out, flex);
		return;
	}
	MqKafkaWriteUVarint(out, 1);	/* one tagged field */
	MqKafkaWriteUVarint(out, 0);	/* tag 0 */
	MqKafkaWriteUVarint(out, 4 + 8 + 1);	/* its size */
	MqKafkaWriteInt32(out, fp->diverging_epoch);
	MqKafkaWriteInt64(out, fp->diverging_end);
	MqKafkaWriteTags(out, flex);
}

/*
 * The broker's own bounds on what a client asks: a response of at most
 * Kafka's default fetch.max.bytes (55 MiB; still at least one batch, as
 * Kafka answers), and no more than the listener's buffers have room for
 * (MqKafkaAnswerRoom: while other connections' answers and frames fill
 * mqlog.kafka_max_buffered_size, a Fetch is answered with no records, and
 * its client asks again), and a parked Fetch answered after at most 30 s (clients
 * ask for 500 ms by default; one parked for days by a hostile client would
 * hold its memory and its watch for days).
 */
#define MQK_FETCH_MAX_BYTES		(55 * 1024 * 1024)
#define MQK_FETCH_MAX_WAIT_MS	30000

MqKafkaOutcome
MqKafkaFetch(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		max_wait;
	int32		min_bytes;
	int32		max_bytes;
	int8		isolation;
	int32		session_id = 0;
	int32		epoch = -1;
	int32		ntopics;
	FetchTopic *topics;
	int64		total = 0;
	StringInfoData records;
	bool		any_error = false;
	int16		top_error = MQK_NONE;
	bool		may_park;
	int			nparts = 0;
	char	   *rack = NULL;

	(void) MqKafkaReadInt32(r); /* replica_id: consumers only */
	max_wait = MqKafkaReadInt32(r);
	max_wait = Min(max_wait, MQK_FETCH_MAX_WAIT_MS);
	min_bytes = MqKafkaReadInt32(r);
	max_bytes = MqKafkaReadInt32(r);
	max_bytes = Min(max_bytes, MQK_FETCH_MAX_BYTES);
	/* while the listener's answers fill its buffers, smaller ones */
	max_bytes = (int32) Min((int64) max_bytes, MqKafkaAnswerRoom());
	isolation = MqKafkaReadInt8(r);
	if (v >= 7)
	{
		session_id = MqKafkaReadInt32(r);
		epoch = MqKafkaReadInt32(r);
	}
	ntopics = MqKafkaReadArrayLen(r, flex, flex ? 2 : 6);
	if (ntopics < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(FetchTopic) * (ntopics + 1));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		FetchTopic *ft = &topics[t];

		ft->name = MqKafkaReadString(r, flex, NULL);
		ft->npartitions = MqKafkaReadArrayLen(r, flex, 16);
		if (ft->name == NULL || ft->npartitions < 0)
			return MQK_CLOSE;
		ft->partitions = palloc0(sizeof(FetchPartition) * (ft->npartitions + 1));
		for (int p = 0; p < ft->npartitions && !r->failed; p++)
		{
			FetchPartition *fp = &ft->partitions[p];

			fp->index = MqKafkaReadInt32(r);
			fp->current_leader_epoch = v >= 9 ? MqKafkaReadInt32(r) : -1;
			fp->offset = MqKafkaReadInt64(r);
			fp->last_fetched_epoch = v >= 12 ? MqKafkaReadInt32(r) : -1;
			fp->diverging_epoch = -1;
			if (v >= 5)
				(void) MqKafkaReadInt64(r); /* log_start_offset: followers' */
			fp->max_bytes = MqKafkaReadInt32(r);
			MqKafkaSkipTags(r, flex);
		}
		MqKafkaSkipTags(r, flex);
	}
	if (v >= 7)
	{
		int32		nforgotten = MqKafkaReadArrayLen(r, flex, flex ? 2 : 6);

		for (int i = 0; i < nforgotten && !r->failed; i++)
		{
			int32		nidx;

			(void) MqKafkaReadString(r, flex, NULL);
			nidx = MqKafkaReadArrayLen(r, flex, 4);
			for (int j = 0; j < nidx && !r->failed; j++)
				(void) MqKafkaReadInt32(r);
			MqKafkaSkipTags(r, flex);
		}
	}
	if (v >= 11)
		rack = MqKafkaReadString(r, flex, NULL);	/* rack_id */
	MqKafkaSkipTags(r, flex);	/* cluster_id (v12+, KRaft followers') */
	if (r->failed)
		return MQK_CLOSE;

	/* no sessions are kept: an incremental fetch names one we never made */
	if (session_id != 0 || epoch > 0)
		top_error = MQK_FETCH_SESSION_ID_NOT_FOUND;

	/*
	 * One buffer for the batches of every partition, not one each: a frame
	 * of N partitions (16 bytes each on the wire) must not cost N buffers.
	 */
	initStringInfo(&records);
	may_park = max_wait > 0 && min_bytes > 0 && !req->final;
	for (int t = 0; t < ntopics; t++)
		nparts += topics[t].npartitions;
	if (top_error == MQK_NONE &&
		MqKafkaWatchBegin(req, may_park, true, nparts))
	{
		/* a parked Fetch's probe: stays parked unless what moved answers it */
		total = read_partitions(req, topics, ntopics, max_bytes, isolation == 1, rack,
								&records, &any_error);
		if (!any_error && total < min_bytes && GetCurrentTimestamp() < req->wake_at)
			return MQK_PARK;
		resetStringInfo(&records);
		(void) MqKafkaWatchBegin(req, may_park, false, nparts);
	}
	if (top_error == MQK_NONE)
		total = read_partitions(req, topics, ntopics, max_bytes, isolation == 1, rack,
								&records, &any_error);

	/* wait for min_bytes, unless there is an error to tell or time is up */
	if (top_error == MQK_NONE && !any_error && total < min_bytes && !req->final &&
		max_wait > 0)
	{
		req->wake_at = TimestampTzPlusMilliseconds(req->received, max_wait);
		if (GetCurrentTimestamp() < req->wake_at)
			return MQK_PARK;
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	if (v >= 7)
	{
		MqKafkaWriteInt16(out, top_error);
		MqKafkaWriteInt32(out, 0);	/* session_id: none */
	}
	if (top_error != MQK_NONE)
	{
		MqKafkaWriteArrayLen(out, flex, 0);
		MqKafkaWriteTags(out, flex);
		return MQK_RESPOND;
	}
	MqKafkaWriteArrayLen(out, flex, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, flex, topics[t].name);
		MqKafkaWriteArrayLen(out, flex, topics[t].npartitions);
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			FetchPartition *fp = &topics[t].partitions[p];

			MqKafkaWriteInt32(out, fp->index);
			MqKafkaWriteInt16(out, fp->error);
			MqKafkaWriteInt64(out, fp->high_watermark);
			MqKafkaWriteInt64(out, fp->last_stable);
			if (v >= 5)
				MqKafkaWriteInt64(out, fp->log_start);
			/* read_committed: the aborted Kafka transactions sent (see above) */
			MqKafkaWriteArrayLen(out, flex, isolation == 1 ? fp->naborted : -1);
			for (int a = 0; isolation == 1 && a < fp->naborted; a++)
			{
				MqKafkaWriteInt64(out, fp->aborted[2 * a]);
				MqKafkaWriteInt64(out, fp->aborted[2 * a + 1]);
				MqKafkaWriteTags(out, flex);
			}
			if (v >= 11)
				MqKafkaWriteInt32(out, fp->preferred);
			MqKafkaWriteBytes(out, flex, records.data + fp->records_at, fp->records_len);
			write_partition_tags(out, flex, fp);
		}
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
