/*-------------------------------------------------------------------------
 *
 * api_list_offsets.c
 *		ListOffsets (key 2, v0-v5): a partition's earliest offset (-2, its
 *		log start), its latest (-1: the last stable offset for
 *		read_committed, the high watermark otherwise), or the first offset
 *		whose timestamp is at or after a time (MqOffsetForTime, the search
 *		behind mq_offsets_for_times).  A replicated partition is answered
 *		where it is led only (NOT_LEADER_OR_FOLLOWER elsewhere).
 *
 * Leader epochs (v4+, KIP-320): the request's current_leader_epoch is
 * checked (MqKafkaCheckLeaderEpoch), and the answer carries the epoch of
 * the offset found, as Kafka's: the current leader epoch for the latest
 * offset (Kafka's leader-epoch cache holds the leader's epoch from its
 * election on), the epoch of the batch that holds the offset otherwise
 * (the current one for an empty log).  A single-node topic's is 0.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/batch.h"
#include "log/epochs.h"
#include "log/partition.h"
#include "log/records.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/kafka_internal.h"

#define EARLIEST	(-2)
#define LATEST		(-1)

typedef struct OffsetsPartition
{
	int32		index;
	int32		current_leader_epoch;	/* -1: no check */
	int64		timestamp;
	/* the answer */
	int16		error;
	int64		found_timestamp;
	int64		offset;
	int32		leader_epoch;	/* of the offset */
} OffsetsPartition;

typedef struct OffsetsUnit
{
	const char *topic;
	OffsetsPartition *part;
	bool		committed;
} OffsetsUnit;

static void
list_partition(void *arg)
{
	OffsetsUnit *u = arg;
	OffsetsPartition *op = u->part;
	MqTopic    *topic = MqKafkaLedPartition(u->topic, MQ_PRIV_DESCRIBE, op->index,
											op->current_leader_epoch, &op->error);
	int64		lso,
				hw;

	if (topic == NULL)
		return;
	if (op->timestamp == EARLIEST)
		op->offset = MqLogStartOffset(topic, op->index);
	else if (op->timestamp == LATEST)
	{
		MqPartitionOffsets(topic, op->index, &lso, &hw);
		op->offset = u->committed ? lso : hw;
	}
	else if (op->timestamp >= 0)
	{
		TimestampTz found = 0;

		op->offset = MqOffsetForTime(topic, op->index, MqPgTime(op->timestamp), &found);
		if (op->offset >= 0)
			op->found_timestamp = MqKafkaTime(found);
	}
	else
		op->error = MQK_INVALID_REQUEST;	/* no such special timestamp */

	if (op->offset < 0)
		return;					/* no offset at or after that time */
	op->leader_epoch = MqKafkaLeaderEpoch(topic, op->index);
	if (topic->replicas != NULL && op->timestamp != LATEST)
	{
		int32		at = MqLogEpochAt(topic, op->index, op->offset);

		if (at >= 0)
			op->leader_epoch = at;
	}
}

MqKafkaOutcome
MqKafkaListOffsets(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int8		isolation = 0;
	int32		ntopics;
	char	  **names;
	int32	   *nparts;
	OffsetsPartition **parts;
	int			attempted = 0;

	(void) MqKafkaReadInt32(r); /* replica_id */
	if (v >= 2)
		isolation = MqKafkaReadInt8(r);
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (ntopics < 0)
		return MQK_CLOSE;
	names = palloc0(sizeof(char *) * (ntopics + 1));
	nparts = palloc0(sizeof(int32) * (ntopics + 1));
	parts = palloc0(sizeof(OffsetsPartition *) * (ntopics + 1));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		names[t] = MqKafkaReadString(r, false, NULL);
		nparts[t] = MqKafkaReadArrayLen(r, false, 12);
		if (names[t] == NULL || nparts[t] < 0)
			return MQK_CLOSE;
		parts[t] = palloc0(sizeof(OffsetsPartition) * (nparts[t] + 1));
		for (int p = 0; p < nparts[t] && !r->failed; p++)
		{
			parts[t][p].index = MqKafkaReadInt32(r);
			parts[t][p].current_leader_epoch = v >= 4 ? MqKafkaReadInt32(r) : -1;
			parts[t][p].timestamp = MqKafkaReadInt64(r);
			if (v == 0)
				(void) MqKafkaReadInt32(r); /* max_num_offsets: one is given */
		}
	}
	if (r->failed)
		return MQK_CLOSE;

	if (v >= 2)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, false, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, false, names[t]);
		MqKafkaWriteArrayLen(out, false, nparts[t]);
		for (int p = 0; p < nparts[t]; p++)
		{
			OffsetsPartition *op = &parts[t][p];
			OffsetsUnit u = {names[t], op, isolation == 1};
			int16		code;

			op->offset = -1;
			op->found_timestamp = -1;
			op->leader_epoch = -1;
			/* past MQK_REQUEST_TIME_MS the rest are not looked at (retriable) */
			code = MqKafkaOutOfTime(req, &attempted) ? MQK_REQUEST_TIMED_OUT :
				MqKafkaTry(list_partition, &u, MQK_INVALID_REQUEST, NULL);
			if (code != MQK_NONE)
				op->error = code;
			if (op->error != MQK_NONE)
			{
				op->offset = -1;
				op->leader_epoch = -1;
			}
			MqKafkaWriteInt32(out, op->index);
			MqKafkaWriteInt16(out, op->error);
			if (v == 0)
			{
				MqKafkaWriteArrayLen(out, false, op->offset >= 0 ? 1 : 0);
				if (op->offset >= 0)
					MqKafkaWriteInt64(out, op->offset);
			}
			else
			{
				MqKafkaWriteInt64(out, op->found_timestamp);
				MqKafkaWriteInt64(out, op->offset);
				if (v >= 4)
					MqKafkaWriteInt32(out, op->leader_epoch);
			}
		}
	}
	return MQK_RESPOND;
}
