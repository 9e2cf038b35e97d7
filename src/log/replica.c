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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "replication/message.h"

#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/replica.h"
#include "log/topic.h"

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

	MqPartitionOffsets(topic, partition, &lso, &leo);
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
	(void) MqPartitionAppend(topicp, partition, &stored, hdr.base_offset, -1);
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

	MqPartitionOffsets(topic, partition, &mark.lso, &hw);
	mark.topic_id = topic->topic_id;
	mark.partition = partition;
	(void) LogLogicalMessage(MQLOG_LSO_PREFIX, (const char *) &mark, sizeof(mark), false);
	return mark.lso;
}
