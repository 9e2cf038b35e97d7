/*-------------------------------------------------------------------------
 *
 * append.c
 *		Writing a partition's log: records encoded here, or Kafka batches
 *		encoded elsewhere, all through one append protocol
 *		(MqPartitionAppend).
 *
 * A batch is encoded and checksummed before the partition lock is taken;
 * under it only the base offset (and a follower's leader epoch) is
 * stamped, which the CRC does not cover, the in-flight entry registered
 * and the pages written.  A Kafka batch from a client is stored as the
 * client sent it when the topic keeps the producer's compression, and
 * encoded again (the broker's "recompression") when the topic wants
 * another codec or log-append time.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "log/append.h"
#include "log/partition.h"
#include "log/producers.h"
#include "log/producers_load.h"
#include "log/replica.h"
#include "log/topic.h"

/*
 * One record's size (a batch of its own, as Kafka counts it) against
 * max.message.bytes, and a key on a compacted topic.
 */
void
MqCheckRecord(MqTopic *topic, MqRecord *rec)
{
	Size		sz = MqRecordEncodedSize(rec);

	if (topic->compact && rec->key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("records produced to compacted topic \"%s\" must have a key", topic->name),
				 errhint("Compaction keeps the newest record per key; pass key => ...")));
	if (sz > (Size) topic->max_message_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("record of %zu bytes exceeds max.message.bytes of topic \"%s\"",
						sz, topic->name),
				 errdetail("The topic allows records of at most " INT64_FORMAT " bytes.",
						   topic->max_message_bytes),
				 errhint("Raise it with mq_alter_topic('%s', '{\"max.message.bytes\": ...}').",
						 topic->name)));
}

/*
 * The attributes of a batch produced from SQL: the topic's codec (a SQL
 * producer has none of its own, so "producer" means uncompressed) and its
 * timestamp type.
 */
static int16
batch_attributes(MqTopic *topic)
{
	int16		attr = 0;

	if (topic->compression > MQ_CODEC_NONE)
		attr |= topic->compression;
	if (topic->log_append_time)
		attr |= MQ_ATTR_LOG_APPEND_TIME;
	return attr;
}

/* the partitionLeaderEpoch a leader stamps: its epoch, for a replicated topic */
static int32
leader_epoch_of(MqTopic *topic, int32 partition)
{
	return topic->replicas ? topic->replicas[partition].leader_epoch : -1;
}

int64
MqLogAppend(MqTopic **topicp, int32 partition, MqRecord *records, int nrecords)
{
	StringInfoData batch;
	TransactionId xid;
	int64		base;

	*topicp = MqTopicCheckLeader(*topicp, partition);
	MqReplicaCheckAcks(*topicp, partition);
	/* WAL-logged data needs an xid, and decoding needs it assigned first */
	xid = GetCurrentTransactionId();
	initStringInfo(&batch);
	MqBatchBuild(&batch, records, nrecords, xid, batch_attributes(*topicp), false);
	base = MqPartitionAppend(topicp, partition, &batch, -1, leader_epoch_of(*topicp, partition), NULL);
	pfree(batch.data);
	MqReplicaAwaitAt(*topicp, partition, base + nrecords);
	return base;
}

static void
bad_kafka_batch(MqTopic *topic, int32 partition, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid Kafka record batch for partition %d of topic \"%s\"",
					partition, topic->name),
			 errdetail("The batch is refused because %s.", why),
			 errhint("Send one record batch v2 (magic 2) as a Kafka producer encodes it.")));
}

/*
 * Charge bytes to a request's budget (MqLogAppendKafka), before they are
 * allocated; NULL: no budget
 */
static void
charge(Size *budget, Size bytes, MqTopic *topic, int32 partition, const char *what)
{
	if (budget == NULL)
		return;
	if (bytes > *budget)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Kafka record batch for partition %d of topic \"%s\" expands past its request's memory budget",
						partition, topic->name),
				 errdetail("Its %s need %zu bytes in memory; %zu are left of the request's budget.",
						   what, bytes, *budget),
				 errhint("Send smaller requests, or raise mqlog.kafka_max_request_memory.")));
	*budget -= bytes;
}

/*
 * A leader's append of a batch with a producer id (an idempotent
 * producer's): checked against its producer's state under the partition
 * lock, after the partition's producers are loaded from its log if this
 * is the first such batch since start-up or since the leader epoch
 * changed (producers_load.c).  A retry of one of the producer's last five
 * batches returns the original's base offset, and *n becomes the
 * original's record count, so that acks=all waits for the original.
 * nowait: a producer another transaction is writing to the partition is
 * an error at once (55P03) instead of a wait for that transaction (the
 * Kafka listener, which serves every client in one process, must not wait
 * for a SQL session's transaction).
 */
static int64
append_idempotent(MqTopic **topicp, int32 partition, StringInfo stored,
				  const MqBatchHeader *hdr, int32 leader_epoch, bool nowait, int *n)
{
	MqProducerAppend pa;

	memset(&pa, 0, sizeof(pa));
	pa.nowait = nowait;
	MqProducerKeyOf(&pa.key, *topicp, partition, hdr->producer_id);
	pa.epoch = hdr->producer_epoch;
	pa.first_seq = hdr->base_sequence;
	pa.count = hdr->last_offset_delta + 1;
	pa.leader_epoch = leader_epoch;
	/* a load, then the append; a load lost at once to eviction, once more */
	for (int tries = 0;; tries++)
	{
		int64		base = MqPartitionAppend(topicp, partition, stored, -1, leader_epoch, &pa);

		if (pa.verdict == MQ_PRODUCER_DUPLICATE)
		{
			ereport(DEBUG1,
					(errmsg("batch of producer " INT64_FORMAT " (epoch %d, sequence %d) on partition %d of topic \"%s\" is a retry of offset " INT64_FORMAT ": not appended again",
							pa.key.producer_id, pa.epoch, pa.first_seq, partition, (*topicp)->name, pa.dup_first)));
			*n = (int) (pa.dup_last - pa.dup_first + 1);
			return pa.dup_first;
		}
		if (pa.verdict != MQ_PRODUCER_NOT_LOADED)
			return base;
		if (tries == 3)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("the idempotent producers of partition %d of topic \"%s\" do not stay loaded",
							partition, (*topicp)->name),
					 errhint("Raise mqlog.max_producer_states and restart the server.")));
		MqProducersLoad(topicp, partition, leader_epoch);
	}
}

/*
 * A Kafka transaction's end in one partition: a control batch (Kafka's
 * EndTransactionMarker) of the transaction's producer id and epoch, with
 * the transactional and control bits, no sequence (-1), and one record
 * whose key is version 0 and the type (0 ABORT, 1 COMMIT) and whose value
 * is version 0 and the coordinator epoch, as Kafka's broker writes it.  It
 * is not checked against the idempotent producer's sequences (a marker
 * takes none), and the partition releases the transaction's hold on its
 * last stable offset when the marker's PostgreSQL transaction ends
 * (MqPartitionAppend).  Returns the marker's offset.
 */
int64
MqLogAppendControl(MqTopic **topicp, int32 partition, int64 producer_id,
				   int16 producer_epoch, bool commit, int32 coordinator_epoch)
{
	StringInfoData batch;
	char		key[4];
	char		value[6];
	MqRecord	rec;
	int64		base;

	*topicp = MqTopicCheckLeader(*topicp, partition);
	key[0] = 0;
	key[1] = 0;					/* version 0 */
	key[2] = 0;
	key[3] = commit ? 1 : 0;
	value[0] = 0;
	value[1] = 0;				/* version 0 */
	value[2] = (char) ((uint32) coordinator_epoch >> 24);
	value[3] = (char) ((uint32) coordinator_epoch >> 16);
	value[4] = (char) ((uint32) coordinator_epoch >> 8);
	value[5] = (char) coordinator_epoch;
	memset(&rec, 0, sizeof(rec));
	rec.ts = GetCurrentTimestamp();
	rec.key = key;
	rec.keylen = sizeof(key);
	rec.value = value;
	rec.valuelen = sizeof(value);
	initStringInfo(&batch);
	MqBatchBuild(&batch, &rec, 1, GetCurrentTransactionId(),
				 MQ_ATTR_TRANSACTIONAL | MQ_ATTR_CONTROL, false);
	MqBatchSetProducer(batch.data, producer_id, producer_epoch, -1);
	base = MqPartitionAppend(topicp, partition, &batch, -1, leader_epoch_of(*topicp, partition), NULL);
	pfree(batch.data);
	return base;
}

int64
MqLogAppendKafka(MqTopic **topicp, int32 partition, const char *kafka, Size len,
				 int64 at_offset, int32 leader_epoch, Size *budget, bool producer_nowait,
				 bool transactional_ok)
{
	MqTopic    *topic = *topicp;
	const char *why = MqBatchCheckKafka(kafka, len);
	StringInfoData stored;
	StringInfoData scratch;
	MqBatchHeader hdr;
	MqRecord   *recs;
	int			n;
	const char *data;
	Size		dlen;
	bool		reencode;
	int64		base;
	TimestampTz max_ts = 0;
	bool		measure;
	MemoryContext cxt,
				old;

	*topicp = topic = MqTopicCheckLeader(topic, partition);
	MqReplicaCheckAcks(topic, partition);
	if (why)
		bad_kafka_batch(topic, partition, why);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog Kafka batch", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);

	/*
	 * The batch's stored form, the one copy of the client's bytes: checked
	 * and decoded there, then appended from there as it is (its xid set
	 * once it is known to be appended), unless it is encoded again.
	 */
	initStringInfo(&stored);
	MqBatchWrapKafka(&stored, kafka, (uint32) len, InvalidTransactionId);
	if (!MqBatchParseHeader(stored.data, stored.len, &hdr))
		bad_kafka_batch(topic, partition, "its header is malformed");
	if (hdr.attributes & MQ_ATTR_CONTROL)
		bad_kafka_batch(topic, partition, "it is a control batch, which only a broker writes");
	/* a Kafka transaction's batch: its coordinator said it may (api_produce.c) */
	if ((hdr.attributes & MQ_ATTR_TRANSACTIONAL) && (!transactional_ok || hdr.producer_id < 0))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("transactional Kafka batches are taken only from a Kafka producer in a transaction"),
				 errhint("Produce in a PostgreSQL transaction instead; it gives the same atomicity.")));
	if (MqBatchCodec(&hdr) > MQ_CODEC_ZSTD)
		bad_kafka_batch(topic, partition, psprintf("its compression codec %d is unknown", MqBatchCodec(&hdr)));
	if (hdr.producer_id >= 0 && (hdr.producer_epoch < 0 || hdr.base_sequence < 0))
		bad_kafka_batch(topic, partition, "it has a producer id but no producer epoch or base sequence");
	if (hdr.producer_id < -1)
		bad_kafka_batch(topic, partition, "its producer id is negative");
	/*
	 * What decoding allocates, charged before it is: the record array (a
	 * record takes 7 bytes at the least, its MqRecord 56), then what the
	 * records decompress to, decompressed no further than the budget
	 * allows.  The header arrays (at most MQ_MAX_BATCH_HEADERS) are not
	 * charged: they are bounded per batch.
	 */
	if (hdr.record_count < 0)
		bad_kafka_batch(topic, partition, "its record count is negative");
	charge(budget, sizeof(MqRecord) * (hdr.record_count + 1), topic, partition, "decoded records");
	{
		bool		compressed = MqBatchCodec(&hdr) != MQ_CODEC_NONE;
		Size		limit = budget ? Min(*budget, MaxAllocSize - 1) : MaxAllocSize - 1;

		/*
		 * Spent in full until it is known what it took: a batch that
		 * decompresses past the budget has used it up, so the request's
		 * later batches cannot make the listener decompress as much again.
		 */
		if (budget && compressed)
			*budget -= limit;
		if (compressed)
			initStringInfo(&scratch);
		data = MqBatchRecords(stored.data, &hdr, &scratch, limit, &dlen);
		if (budget && compressed)
			*budget += limit - dlen;
	}
	if ((Size) hdr.record_count > dlen)
		bad_kafka_batch(topic, partition, "its record count is larger than its records");
	/*
	 * A record's size in a batch of its own, which max.message.bytes
	 * bounds (MqCheckRecord), is never more than the header and the
	 * (decompressed) records of a batch that holds it: its fields take at
	 * least as many bytes here, and a batch header is the same.  So the
	 * records of a batch that fits need not be measured one by one.
	 */
	measure = MQ_KAFKA_HEADER_SIZE + dlen > (Size) topic->max_message_bytes;
	recs = palloc(sizeof(MqRecord) * (hdr.record_count + 1));
	n = MqBatchDecodeRecords(&hdr, data, dlen, PG_INT64_MIN, recs, hdr.record_count + 1);
	if (n != hdr.record_count)
		bad_kafka_batch(topic, partition,
						psprintf("it holds %d records, but its header says %d", n, hdr.record_count));
	if (at_offset < 0 && (hdr.attributes & MQ_ATTR_LOG_APPEND_TIME))
		bad_kafka_batch(topic, partition, "it claims log-append time, which only a broker sets");
	for (int i = 0; i < n; i++)
	{
		if (recs[i].offset != hdr.base_offset + i)
			bad_kafka_batch(topic, partition, "its offset deltas do not run 0, 1, 2, ...");
		if (measure || (topic->compact && recs[i].key == NULL))
			MqCheckRecord(topic, &recs[i]);
		max_ts = (i == 0 || recs[i].ts > max_ts) ? recs[i].ts : max_ts;
		/* header keys come back as text: they must be text of this database */
		for (int j = 0; j < recs[i].nheaders; j++)
			if (!pg_verify_mbstr(GetDatabaseEncoding(), recs[i].headers[j].key,
								 recs[i].headers[j].keylen, true))
				ereport(ERROR,
						(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
						 errmsg("invalid Kafka record batch for partition %d of topic \"%s\"",
								partition, topic->name),
						 errdetail("Header %d of record %d has a key that is not valid %s (or holds a zero byte).",
								   j + 1, i + 1, GetDatabaseEncodingName())));
	}
	if (hdr.last_offset_delta != n - 1)
		bad_kafka_batch(topic, partition, "its lastOffsetDelta does not match its records");

	/*
	 * As the broker does: the topic's codec and timestamp type win, and a
	 * client's maxTimestamp is not taken on trust (readers skip batches by
	 * it).
	 */
	reencode = topic->log_append_time ||
		(topic->compression != MQ_CODEC_PRODUCER && topic->compression != MqBatchCodec(&hdr)) ||
		(at_offset < 0 && hdr.max_timestamp != max_ts);
	if (reencode)
	{
		TimestampTz now = GetCurrentTimestamp();
		int16		attrs = batch_attributes(topic) | (hdr.attributes & MQ_ATTR_TRANSACTIONAL);

		if (topic->log_append_time)
			for (int i = 0; i < n; i++)
				recs[i].ts = now;
		/* "producer": the producer's codec stays */
		if (topic->compression == MQ_CODEC_PRODUCER)
			attrs |= MqBatchCodec(&hdr);
		/* the new batch: about the records' size, before any compression */
		charge(budget, dlen + MQ_BATCH_HEADER_SIZE, topic, partition, "re-encoded records");
		/* a new buffer: the records point into the old one */
		initStringInfo(&stored);
		MqBatchBuild(&stored, recs, n, GetCurrentTransactionId(), attrs, false);
		if (hdr.producer_id >= 0)
			MqBatchSetProducer(stored.data, hdr.producer_id, hdr.producer_epoch, hdr.base_sequence);
	}
	else
		MqBatchSetXid(stored.data, GetCurrentTransactionId());

	MemoryContextSwitchTo(old);
	{
		MqPartition *part = MqTopicPartition(topic, partition);

		MqPartitionCheckInflightRoom(&part, 1);
	}
	if (leader_epoch < 0)
		leader_epoch = leader_epoch_of(topic, partition);
	if (hdr.producer_id < 0 || at_offset >= 0)
		base = MqPartitionAppend(topicp, partition, &stored, at_offset, leader_epoch, NULL);
	else
		base = append_idempotent(topicp, partition, &stored, &hdr, leader_epoch, producer_nowait, &n);
	MemoryContextDelete(cxt);
	MqReplicaAwaitAt(*topicp, partition, base + n);
	return base;
}
