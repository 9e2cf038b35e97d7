/*-------------------------------------------------------------------------
 *
 * api_offset_for_leader_epoch.c
 *		OffsetForLeaderEpoch (key 23, v0-v4, flexible from v4): where a
 *		leader epoch ends in a partition's log (KIP-320), which a consumer
 *		asks after a leader change to learn whether the records it has
 *		read are still the log's (an unclean election may have truncated
 *		them): if the end offset of the epoch of its last record is below
 *		its position, it has read what the log no longer holds.
 *
 * The answer is Kafka's (LeaderEpochFileCache.endOffsetFor), from the
 * epoch history the log keeps in its batches' headers (log/epochs.c, the
 * history a follower truncates by, sql/replica_leader.c): for the
 * current leader epoch, that epoch and the log end offset; for an older
 * one, the largest epoch at most it that the log holds batches of, and the
 * first offset of the next larger epoch (the log end if none); for an
 * epoch older than every batch, that epoch and the log start; for -1 or an
 * epoch newer than the current one, -1 and -1 (UNDEFINED_EPOCH_OFFSET).
 * A single-node topic has had epoch 0 alone (MqKafkaLeaderEpoch): its
 * batches keep whatever epoch their producer wrote and are not read.
 *
 * Each partition is checked as Fetch checks it: DESCRIBE on the topic (as
 * Kafka asks of consumers), its current_leader_epoch (v2+:
 * FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), and that this node leads it
 * (NOT_LEADER_OR_FOLLOWER).  replica_id (v3+) is read and ignored: mqlog's
 * followers ask through SQL (mqlog._replica_epoch_end), never here.
 *
 * Bounds: a lookup reads O(log n) batch headers, in a memory context reset
 * after each partition; a topic no node has is answered from one read of
 * the topic names (MqKafkaKnownTopics); the partitions still waiting when
 * the request has run for MQK_REQUEST_TIME_MS are REQUEST_TIMED_OUT.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "log/epochs.h"
#include "log/partition.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/kafka_internal.h"

typedef struct EpochPartition
{
	int32		partition;
	int32		current_leader_epoch;	/* -1: no check */
	int32		leader_epoch;	/* asked for */
	/* the answer */
	int16		error;
	int32		end_epoch;
	int64		end_offset;
} EpochPartition;

typedef struct EpochTopic
{
	char	   *name;
	int32		npartitions;
	EpochPartition *partitions;
} EpochTopic;

typedef struct EpochUnit
{
	const char *topic;
	EpochPartition *part;
} EpochUnit;

/*
 * Where epoch ends in a partition this node leads, Kafka's way (see above):
 * the end offset, -1 if none, and in *end_epoch the largest epoch at most
 * epoch, -1 if none.  Fetch's diverging_epoch asks the same (api_fetch.c).
 */
int64
MqKafkaEpochEnd(MqTopic *topic, int32 partition, int32 epoch, int32 *end_epoch)
{
	int32		current = MqKafkaLeaderEpoch(topic, partition);
	int64		lso,
				leo,
				end;

	*end_epoch = -1;
	if (epoch < 0 || epoch > current)
		return -1;				/* no such epoch yet */
	if (epoch == current)
	{
		MqPartitionLogEnd(topic, partition, &lso, &leo);
		*end_epoch = current;
		return leo;
	}
	end = MqLogEpochEnd(topic, partition, epoch, end_epoch);
	if (*end_epoch < 0)
		*end_epoch = epoch;		/* older than every batch */
	return end;
}

/* one partition, in a subtransaction (MqKafkaTryInScratch) */
static void
epoch_end(void *arg)
{
	EpochUnit  *u = arg;
	EpochPartition *ep = u->part;
	MqTopic    *topic = MqKafkaLedPartition(u->topic, MQ_PRIV_DESCRIBE, ep->partition,
											ep->current_leader_epoch, &ep->error);

	if (topic == NULL)
		return;
	ep->end_offset = MqKafkaEpochEnd(topic, ep->partition, ep->leader_epoch, &ep->end_epoch);
}

MqKafkaOutcome
MqKafkaOffsetForLeaderEpoch(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		n;
	EpochTopic *topics;
	MqKafkaTopicSet known;
	MemoryContext scratch;
	int			attempted = 0;

	if (v >= 3)
		(void) MqKafkaReadInt32(r); /* replica_id: see above */
	n = MqKafkaReadArrayLen(r, flex, flex ? 2 : 3);
	if (n < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(EpochTopic) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		EpochTopic *t = &topics[i];

		t->name = MqKafkaReadString(r, flex, NULL);
		t->npartitions = MqKafkaReadArrayLen(r, flex, v >= 2 ? 12 : 8);
		if (r->failed || t->name == NULL || t->npartitions < 0)
			return MQK_CLOSE;
		t->partitions = palloc0(sizeof(EpochPartition) * (t->npartitions + 1));
		for (int p = 0; p < t->npartitions && !r->failed; p++)
		{
			EpochPartition *ep = &t->partitions[p];

			ep->partition = MqKafkaReadInt32(r);
			ep->current_leader_epoch = v >= 2 ? MqKafkaReadInt32(r) : -1;
			ep->leader_epoch = MqKafkaReadInt32(r);
			MqKafkaSkipTags(r, flex);
		}
		MqKafkaSkipTags(r, flex);
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaKnownTopics(&known);
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka OffsetForLeaderEpoch partition",
									ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i < n; i++)
	{
		EpochTopic *t = &topics[i];
		int16		topic_error = MQK_NONE;

		if (!MqKafkaKnownTopic(&known, t->name))
			topic_error = MqKafkaMissingTopicError(t->name, NULL, NULL);
		for (int p = 0; p < t->npartitions; p++)
		{
			EpochPartition *ep = &t->partitions[p];
			EpochUnit	u = {t->name, ep};
			char	   *message;
			int16		code;

			ep->end_epoch = -1;
			ep->end_offset = -1;
			if (topic_error != MQK_NONE)
				ep->error = topic_error;
			else if (MqKafkaOutOfTime(req, &attempted))
				ep->error = MQK_REQUEST_TIMED_OUT;
			else if ((code = MqKafkaTryInScratch(epoch_end, &u, NULL, true, scratch,
												 &message)) != MQK_NONE)
				ep->error = code;
			if (ep->error != MQK_NONE)
			{
				ep->end_epoch = -1;
				ep->end_offset = -1;
			}
		}
	}

	if (v >= 2)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteString(out, flex, topics[i].name);
		MqKafkaWriteArrayLen(out, flex, topics[i].npartitions);
		for (int p = 0; p < topics[i].npartitions; p++)
		{
			EpochPartition *ep = &topics[i].partitions[p];

			MqKafkaWriteInt16(out, ep->error);
			MqKafkaWriteInt32(out, ep->partition);
			if (v >= 1)
				MqKafkaWriteInt32(out, ep->end_epoch);
			MqKafkaWriteInt64(out, ep->end_offset);
			MqKafkaWriteTags(out, flex);
		}
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
