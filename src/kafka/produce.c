/*-------------------------------------------------------------------------
 *
 * produce.c
 *		Produce (key 0, v3-v8): each partition's record batch v2, as the
 *		client encoded it, through the log's service API (MqLogAppendKafka,
 *		which checks it as mq_produce_kafka_batch does), every partition in
 *		a subtransaction of the request's transaction so that one refused
 *		batch does not refuse the others; the transaction commits before
 *		the answer is sent.
 *
 * acks: 0 sends no answer, 1 answers once this node committed, -1 (all)
 * runs the transaction with mqlog.acks = all, so its commit waits for the
 * in-sync replicas of a replicated partition (mqlog.acks_timeout), as a
 * SQL producer's does.  Per-partition errors are Kafka's:
 * UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
 * NOT_LEADER_OR_FOLLOWER (a replicated partition led elsewhere, or a
 * standby), NOT_ENOUGH_REPLICAS, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
 * INVALID_RECORD (a record the topic's rules refuse, such as a keyless
 * record on a compacted topic).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "log/append.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/internal.h"

typedef struct ProducePartition
{
	int32		index;
	const char *records;		/* into the frame */
	int			len;
	/* the answer */
	int16		error;
	int64		base_offset;
	int64		log_append_time;
	int64		log_start_offset;
} ProducePartition;

typedef struct ProduceTopic
{
	char	   *name;
	int			npartitions;
	ProducePartition *partitions;
} ProduceTopic;

typedef struct ProduceUnit
{
	ProduceTopic *topic;
	ProducePartition *part;
} ProduceUnit;

/* one partition's batch, in a subtransaction (MqKafkaTry) */
static void
produce_partition(void *arg)
{
	ProduceUnit *u = arg;
	ProducePartition *pp = u->part;
	MqTopic    *topic = MqKafkaTopic(u->topic->name, MQ_PRIV_PRODUCE, &pp->error);

	if (topic == NULL)
		return;
	if (pp->index < 0 || pp->index >= topic->partitions)
	{
		pp->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	if (RecoveryInProgress())
	{
		pp->error = MQK_NOT_LEADER_OR_FOLLOWER;
		return;
	}
	if (pp->records == NULL || pp->len <= 0)
	{
		pp->error = MQK_CORRUPT_MESSAGE;
		return;
	}
	pp->base_offset = MqLogAppendKafka(&topic, pp->index, pp->records, pp->len, -1, -1);
	pp->log_append_time = topic->log_append_time ? MqKafkaTime(GetCurrentTimestamp()) : -1;
	pp->log_start_offset = MqLogStartOffset(topic, pp->index);
}

MqKafkaOutcome
MqKafkaProduce(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		transactional;
	int16		acks;
	int32		ntopics;
	ProduceTopic *topics;
	int16		refusal = MQK_NONE;

	(void) MqKafkaReadString(r, false, &transactional);
	transactional = !transactional;
	acks = MqKafkaReadInt16(r);
	(void) MqKafkaReadInt32(r); /* timeout_ms: the commit's own bounds apply */
	ntopics = MqKafkaReadArrayLen(r, false, 6);
	if (ntopics < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(ProduceTopic) * (ntopics + 1));
	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		ProduceTopic *pt = &topics[t];

		pt->name = MqKafkaReadString(r, false, NULL);
		pt->npartitions = MqKafkaReadArrayLen(r, false, 8);
		if (pt->name == NULL || pt->npartitions < 0)
			return MQK_CLOSE;
		pt->partitions = palloc0(sizeof(ProducePartition) * (pt->npartitions + 1));
		for (int p = 0; p < pt->npartitions && !r->failed; p++)
		{
			pt->partitions[p].index = MqKafkaReadInt32(r);
			pt->partitions[p].records = MqKafkaReadBytes(r, false, &pt->partitions[p].len);
		}
	}
	if (r->failed)
		return MQK_CLOSE;

	if (acks != 0 && acks != 1 && acks != -1)
		refusal = MQK_INVALID_REQUIRED_ACKS;
	else if (transactional)
		refusal = MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;	/* no transactions */
	else
		(void) set_config_option("mqlog.acks", acks == -1 ? "all" : "1",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);

	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			ProducePartition *pp = &topics[t].partitions[p];
			ProduceUnit u = {&topics[t], pp};
			int16		code;

			pp->base_offset = -1;
			pp->log_append_time = -1;
			pp->log_start_offset = -1;
			pp->error = refusal;
			if (refusal != MQK_NONE)
				continue;
			code = MqKafkaTry(produce_partition, &u, MQK_INVALID_RECORD, NULL);
			if (code != MQK_NONE)
			{
				pp->error = code;
				pp->base_offset = -1;
			}
		}
	if (acks == 0)
		return MQK_NO_RESPONSE;

	MqKafkaWriteArrayLen(out, false, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, false, topics[t].name);
		MqKafkaWriteArrayLen(out, false, topics[t].npartitions);
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			ProducePartition *pp = &topics[t].partitions[p];

			MqKafkaWriteInt32(out, pp->index);
			MqKafkaWriteInt16(out, pp->error);
			MqKafkaWriteInt64(out, pp->base_offset);
			MqKafkaWriteInt64(out, pp->log_append_time);
			if (v >= 5)
				MqKafkaWriteInt64(out, pp->log_start_offset);
			if (v >= 8)
			{
				MqKafkaWriteArrayLen(out, false, 0);	/* record_errors */
				MqKafkaWriteString(out, false, NULL);	/* error_message */
			}
		}
	}
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	return MQK_RESPOND;
}
