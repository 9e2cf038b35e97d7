/*-------------------------------------------------------------------------
 *
 * api_txn_offset_commit.c
 *		TxnOffsetCommit (key 28, v0-v3, flexible from v3): a transactional
 *		producer commits a consumer group's offsets inside its transaction
 *		(KIP-98's consume-transform-produce loop, send_offsets_to_
 *		transaction).  They wait in mqlog.kafka_transaction_offset and
 *		become the group's committed offsets (mqlog.committed_offset, as
 *		OffsetCommit writes them) in the PostgreSQL transaction that writes
 *		the COMMIT markers; an ABORT drops them (txn_coordinator.c).
 *
 * Checks, as Kafka's: the group must be one the role may use
 * (GROUP_AUTHORIZATION_FAILED, every partition), the producer the
 * transactional id's current one (PRODUCER_FENCED from v3, else
 * INVALID_PRODUCER_EPOCH; INVALID_PRODUCER_ID_MAPPING) with the group
 * added by AddOffsetsToTxn (INVALID_TXN_STATE); each partition needs the
 * consume privilege on its topic (TOPIC_AUTHORIZATION_FAILED) and a
 * metadata string of at most 4096 bytes (OFFSET_METADATA_TOO_LARGE).  The
 * v3 generation and member id (KIP-447) are checked against the group as
 * the group code checks a commit (MqKafkaGroupCommitCheck, transactional):
 * UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; generation -1 with no member id is
 * no check, as Kafka's.  A producer that passed the check has its offsets
 * applied at the COMMIT marker whatever the group did meanwhile, as
 * Kafka's.
 *
 * Bounds: partitions run for at most MQK_REQUEST_TIME_MS, the rest are
 * REQUEST_TIMED_OUT; a transaction holds at most 1,000 offsets.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "acl/acl.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

#define MAX_METADATA_BYTES 4096

typedef struct TxnOffsetCommit
{
	const char *txn_id;
	const char *group;
	int32		generation;
	const char *member_id;
	int64		producer_id;
	int16		epoch;
	bool		fenced_code;
	const char *topic;
	MqKafkaOffsetPartition *part;
} TxnOffsetCommit;

static int16
check_request(void *arg)
{
	TxnOffsetCommit *c = arg;
	int16		error = MqKafkaGroupAccess(c->group);
	bool		standalone;

	if (error == MQK_NONE)
		error = MqKafkaTxnCheckGroup(c->txn_id, c->producer_id, c->epoch, c->fenced_code,
									 c->group);
	if (error == MQK_NONE)
		error = MqKafkaGroupCommitCheck(c->group, c->generation, c->member_id, true,
										&standalone);
	return error;
}

static int16
store_partition(void *arg)
{
	TxnOffsetCommit *c = arg;
	int16		error = MQK_NONE;
	MqTopic    *topic = MqKafkaTopic(c->topic, MQ_PRIV_CONSUME, &error);

	if (topic == NULL)
		return error;
	if (c->part->index < 0 || c->part->index >= topic->partitions)
		return MQK_UNKNOWN_TOPIC_OR_PARTITION;
	if (c->part->metadata && strlen(c->part->metadata) > MAX_METADATA_BYTES)
		return MQK_OFFSET_METADATA_TOO_LARGE;
	MqKafkaTxnStoreOffset(c->txn_id, c->group, topic, c->part->index, c->part->offset,
						  c->part->metadata);
	return MQK_NONE;
}

/* what follows a partition's index (MqKafkaReadOffsetTopics) */
static void
read_partition(MqKafkaReader *r, bool flex, int16 v, MqKafkaOffsetPartition *tp)
{
	tp->offset = MqKafkaReadInt64(r);
	if (v >= 2)
		(void) MqKafkaReadInt32(r); /* committed_leader_epoch */
	tp->metadata = MqKafkaReadString(r, flex, NULL);
	MqKafkaSkipTags(r, flex);
}

MqKafkaOutcome
MqKafkaTxnOffsetCommit(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = v >= 3;
	TxnOffsetCommit c;
	int32		ntopics;
	MqKafkaOffsetTopic *topics;
	int16		error;
	int			attempted = 0;

	memset(&c, 0, sizeof(c));
	c.txn_id = MqKafkaReadString(r, flex, NULL);
	c.group = MqKafkaReadString(r, flex, NULL);
	c.producer_id = MqKafkaReadInt64(r);
	c.epoch = MqKafkaReadInt16(r);
	c.fenced_code = v >= 3;
	c.generation = -1;			/* v0-v2: no group metadata, no check */
	if (v >= 3)
	{
		c.generation = MqKafkaReadInt32(r);
		c.member_id = MqKafkaReadString(r, flex, NULL);
		(void) MqKafkaReadString(r, flex, NULL);	/* group_instance_id: no
													 * static members here */
	}
	ntopics = MqKafkaReadArrayLen(r, flex, 2);
	if (ntopics < 0 || r->failed)
		return MQK_CLOSE;
	topics = MqKafkaReadOffsetTopics(r, flex, v, ntopics, 14, read_partition);
	if (topics == NULL)
		return MQK_CLOSE;
	MqKafkaSkipTags(r, flex);
	if (r->failed || c.txn_id == NULL || c.group == NULL)
		return MQK_CLOSE;

	error = MqKafkaTxnRun(check_request, &c);
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaOffsetPartition *tp = &topics[t].partitions[p];

			if (error != MQK_NONE)
				tp->error = error;
			else if (MqKafkaOutOfTime(req, &attempted))
				tp->error = MQK_REQUEST_TIMED_OUT;
			else
			{
				c.topic = topics[t].name;
				c.part = tp;
				tp->error = MqKafkaTxnRun(store_partition, &c);
			}
		}

	return MqKafkaTxnAnswerPartitions(out, flex, topics, ntopics);
}
