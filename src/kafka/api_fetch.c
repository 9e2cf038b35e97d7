/*-------------------------------------------------------------------------
 *
 * api_fetch.c
 *		Fetch (key 1, v4-v11): the stored batches of each partition sent
 *		as they are stored, minus mqlog's prefix (MqLogReadKafkaBatches,
 *		the read behind mq_fetch_kafka_batches).
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
 * partition is served where it is led only (NOT_LEADER_OR_FOLLOWER
 * elsewhere, MqKafkaCheckLeader).
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
	int64		offset;
	int32		max_bytes;
	/* the answer */
	int16		error;
	int64		high_watermark;
	int64		last_stable;
	int64		log_start;
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

/* one partition, in a subtransaction (MqKafkaTry) */
static void
fetch_partition(void *arg)
{
	FetchUnit  *u = arg;
	FetchPartition *fp = u->part;
	MqTopic    *topic = MqKafkaTopic(u->topic, MQ_PRIV_CONSUME, &fp->error);

	if (topic == NULL)
		return;
	if (fp->index < 0 || fp->index >= topic->partitions)
	{
		fp->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	if ((fp->error = MqKafkaCheckLeader(topic, fp->index)) != MQK_NONE)
		return;
	/*
	 * A partition whose first segment is still to be made reads as empty
	 * and has no shared state to stamp (nor needs one before its segment,
	 * a catalog change, is made): stamped NULL, it takes no entry.
	 */
	MqKafkaWatchPartition(u->req, MqTopicPartitionPending(topic, fp->index) ? NULL :
						  MqTopicPartition(topic, fp->index));
	/* the one offset check: 22023 is OFFSET_OUT_OF_RANGE here */
	MqCheckOffsetRange(topic, fp->index, fp->offset, false);
	MqPartitionOffsets(topic, fp->index, &fp->last_stable, &fp->high_watermark);
	fp->log_start = MqLogStartOffset(topic, fp->index);
	if (u->budget > 0)
		(void) MqLogReadKafkaBatches(topic, fp->index, fp->offset, u->budget, u->committed,
									 append_batch, u->committed ? note_aborted : NULL, u);
}

/*
 * Every partition the request names, into records (a probe, watch.c:
 * only those that moved since the parked run, counting for the others
 * the bytes they had then); the bytes found in all, *any_error if a
 * partition has an error to tell
 */
static int64
read_partitions(MqKafkaRequest *req, FetchTopic *topics, int ntopics, int32 max_bytes,
				bool committed, StringInfo records, bool *any_error)
{
	int64		total = 0;

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
			fp->naborted = 0;
			fp->records_at = records->len;
			fp->high_watermark = fp->last_stable = fp->log_start = -1;
			u.req = req;
			u.topic = topics[t].name;
			u.part = fp;
			u.committed = committed;
			u.records = records;
			/*
			 * What max_bytes leaves, and no more than the partition's own
			 * max_bytes; the log reads the first batch however large
			 * (MqLogReadKafkaBatches).  The first partition is bounded by
			 * max_bytes too: a partition_max_bytes of 2 GB must not make
			 * the listener read 2 GB.
			 */
			u.budget = Min((int64) Max(fp->max_bytes, 0), (int64) max_bytes - total);
			code = MqKafkaTry(fetch_partition, &u, MQK_OFFSET_OUT_OF_RANGE, records);
			if (code != MQK_NONE)
				fp->error = code;
			if (fp->error != MQK_NONE)
				*any_error = true;
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
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (ntopics < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(FetchTopic) * (ntopics + 1));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		FetchTopic *ft = &topics[t];

		ft->name = MqKafkaReadString(r, false, NULL);
		ft->npartitions = MqKafkaReadArrayLen(r, false, 16);
		if (ft->name == NULL || ft->npartitions < 0)
			return MQK_CLOSE;
		ft->partitions = palloc0(sizeof(FetchPartition) * (ft->npartitions + 1));
		for (int p = 0; p < ft->npartitions && !r->failed; p++)
		{
			FetchPartition *fp = &ft->partitions[p];

			fp->index = MqKafkaReadInt32(r);
			if (v >= 9)
				(void) MqKafkaReadInt32(r); /* current_leader_epoch */
			fp->offset = MqKafkaReadInt64(r);
			if (v >= 5)
				(void) MqKafkaReadInt64(r); /* log_start_offset: followers' */
			fp->max_bytes = MqKafkaReadInt32(r);
		}
	}
	if (v >= 7)
	{
		int32		nforgotten = MqKafkaReadArrayLen(r, false, 6);

		for (int i = 0; i < nforgotten && !r->failed; i++)
		{
			int32		nidx;

			(void) MqKafkaReadString(r, false, NULL);
			nidx = MqKafkaReadArrayLen(r, false, 4);
			for (int j = 0; j < nidx && !r->failed; j++)
				(void) MqKafkaReadInt32(r);
		}
	}
	if (v >= 11)
		(void) MqKafkaReadString(r, false, NULL);	/* rack_id */
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
		total = read_partitions(req, topics, ntopics, max_bytes, isolation == 1, &records,
								&any_error);
		if (!any_error && total < min_bytes && GetCurrentTimestamp() < req->wake_at)
			return MQK_PARK;
		resetStringInfo(&records);
		(void) MqKafkaWatchBegin(req, may_park, false, nparts);
	}
	if (top_error == MQK_NONE)
		total = read_partitions(req, topics, ntopics, max_bytes, isolation == 1, &records,
								&any_error);

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
		MqKafkaWriteArrayLen(out, false, 0);
		return MQK_RESPOND;
	}
	MqKafkaWriteArrayLen(out, false, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, false, topics[t].name);
		MqKafkaWriteArrayLen(out, false, topics[t].npartitions);
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
			MqKafkaWriteArrayLen(out, false, isolation == 1 ? fp->naborted : -1);
			for (int a = 0; isolation == 1 && a < fp->naborted; a++)
			{
				MqKafkaWriteInt64(out, fp->aborted[2 * a]);
				MqKafkaWriteInt64(out, fp->aborted[2 * a + 1]);
			}
			if (v >= 11)
				MqKafkaWriteInt32(out, -1); /* preferred_read_replica */
			MqKafkaWriteBytes(out, false, records.data + fp->records_at, fp->records_len);
		}
	}
	return MQK_RESPOND;
}
