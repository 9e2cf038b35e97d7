/*-------------------------------------------------------------------------
 *
 * api_add_partitions_to_txn.c
 *		AddPartitionsToTxn (key 24, v0-v3, flexible from v3): partitions
 *		join a transactional producer's open transaction (which becomes
 *		Ongoing), so that its batches may go there and its EndTxn writes a
 *		marker there (txn_coordinator.c).
 *
 * As Kafka's coordinator: the producer is checked first (its error
 * answers every partition); then every partition is checked, as the
 * connection's role, for the produce privilege on its topic
 * (TOPIC_AUTHORIZATION_FAILED) and for existing
 * (UNKNOWN_TOPIC_OR_PARTITION); if one fails, none is added and the
 * others are answered OPERATION_NOT_ATTEMPTED.  Only then are they all
 * added, in one subtransaction each.
 *
 * Bounds: the arrays are read within the frame; the checks and the adds
 * each run for at most MQK_REQUEST_TIME_MS (MqKafkaOutOfTime), the
 * partitions past it answered REQUEST_TIMED_OUT (a check late: nothing is
 * added; an add late: those are not, and the client retries them); a
 * transaction takes at most mqlog.max_inflight_partitions partitions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "acl/acl.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

typedef struct AddRequest
{
	MqKafkaTxnProducer p;
	MqKafkaOffsetTopic *topic;
	MqKafkaOffsetPartition *part;
	bool		add;			/* false: check only */
} AddRequest;

static int16
check_producer(void *arg)
{
	AddRequest *a = arg;

	return MqKafkaTxnCheck(a->p.txn_id, a->p.producer_id, a->p.epoch, a->p.fenced_code);
}

/* one partition: checked as the role, then (add) into the transaction */
static int16
add_partition(void *arg)
{
	AddRequest *a = arg;
	int16		error = MQK_NONE;
	MqTopic    *topic = MqKafkaTopic(a->topic->name, MQ_PRIV_PRODUCE, &error);

	if (topic == NULL)
		return error;
	if (a->part->index < 0 || a->part->index >= topic->partitions)
		return MQK_UNKNOWN_TOPIC_OR_PARTITION;
	if (!a->add)
		return MQK_NONE;
	return MqKafkaTxnAddPartition(a->p.txn_id, topic, a->part->index);
}

/* every partition not answered yet gets error */
static void
answer_rest(MqKafkaOffsetTopic *topics, int ntopics, int16 error)
{
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
			if (topics[t].partitions[p].error == MQK_NONE)
				topics[t].partitions[p].error = error;
}

/* check (add false) or add every partition; false: one failed */
static bool
run_partitions(MqKafkaRequest *req, AddRequest *a, MqKafkaOffsetTopic *topics, int ntopics, bool add)
{
	int			attempted = 0;
	bool		ok = true;

	a->add = add;
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaOffsetPartition *ap = &topics[t].partitions[p];

			if (MqKafkaOutOfTime(req, &attempted))
			{
				ap->error = MQK_REQUEST_TIMED_OUT;
				ok = false;
				continue;
			}
			a->topic = &topics[t];
			a->part = ap;
			ap->error = MqKafkaTxnRun(add_partition, a);
			if (ap->error != MQK_NONE)
				ok = false;
		}
	return ok;
}

MqKafkaOutcome
MqKafkaAddPartitionsToTxn(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = v >= 3;
	AddRequest	a;
	int32		ntopics;
	MqKafkaOffsetTopic *topics;
	int16		error;

	memset(&a, 0, sizeof(a));
	MqKafkaTxnReadProducer(r, flex, v, 2, &a.p);
	ntopics = MqKafkaReadArrayLen(r, flex, 2);
	if (ntopics < 0 || r->failed)
		return MQK_CLOSE;
	/* a partition is its index alone */
	topics = MqKafkaReadOffsetTopics(r, flex, v, ntopics, 4, NULL);
	if (topics == NULL)
		return MQK_CLOSE;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	error = MqKafkaTxnRun(check_producer, &a);
	if (error != MQK_NONE)
		answer_rest(topics, ntopics, error);
	else if (!run_partitions(req, &a, topics, ntopics, false))
		answer_rest(topics, ntopics, MQK_OPERATION_NOT_ATTEMPTED);
	else
		(void) run_partitions(req, &a, topics, ntopics, true);

	return MqKafkaTxnAnswerPartitions(out, flex, topics, ntopics);
}
