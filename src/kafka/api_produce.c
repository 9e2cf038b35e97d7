/*-------------------------------------------------------------------------
 *
 * api_produce.c
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
 * SQL producer's does.  The answer is written once the commit has
 * returned: a wait that ended without the in-sync replicas (timed out,
 * or this node's lease lapsed) only warns a SQL session after the commit,
 * but a Kafka client must not take it for an acknowledgement, so its
 * replicated partitions are answered REQUEST_TIMED_OUT and the client
 * retries (it may then store the records twice, as with Kafka; it never
 * believes acknowledged what a failover may drop).  Per-partition errors
 * are Kafka's:
 * UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
 * NOT_LEADER_OR_FOLLOWER (a replicated partition led elsewhere, or a
 * standby), NOT_ENOUGH_REPLICAS, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
 * INVALID_RECORD (a record the topic's rules refuse, such as a keyless
 * record on a compacted topic).
 *
 * A batch with the transactional bit is a Kafka transaction's: the
 * transaction coordinator (txn_coordinator.c) must have its partition in
 * the producer's open transaction, named by the request's
 * transactional_id (else INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING,
 * or INVALID_PRODUCER_EPOCH for a fenced producer); its first batch on a
 * partition is recorded there, and holds the partition's last stable
 * offset until the transaction's marker (log/partition.c).  On an mqlog
 * cluster a request with a transactional_id is
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
 *
 * Memory: the batches stay in the frame; what decoding one needs (its
 * decompressed records, its record array, a re-encoded batch) is charged
 * to the request's budget, mqlog.kafka_max_request_memory, before it is
 * allocated (MqLogAppendKafka), in a context of the entry's own that is
 * reset after the entry whether it succeeded or not.  So one request
 * holds at most one entry's expansion at a time, and all its entries
 * together expand to at most the budget: a small batch that would
 * decompress to a gigabyte (named as often as a frame holds) costs the
 * budget once, and its entry, and every later one, is answered
 * MESSAGE_TOO_LARGE (the later ones without being looked at).
 *
 * Time: the listener serves one request at a time, so a request's entries
 * are appended for at most MQK_REQUEST_TIME_MS (always at least one);
 * the entries after that are answered REQUEST_TIMED_OUT without being
 * looked at (nothing of them is written: the client's retry is safe), so
 * that a frame of a hundred thousand small entries does not hold every
 * other connection for as long as they take.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "store/batch.h"
#include "log/append.h"
#include "log/replica.h"
#include "log/topic.h"
#include "acl/acl.h"
#include "kafka/kafka_internal.h"

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
	bool		replicated;		/* written to a replicated topic */
} ProducePartition;

typedef struct ProduceTopic
{
	char	   *name;
	int			npartitions;
	ProducePartition *partitions;
} ProduceTopic;

/* what the answer, written after the commit, needs */
typedef struct ProduceAnswer
{
	int16		version;
	int32		ntopics;
	ProduceTopic *topics;
	uint64		acks_not_reached;	/* MqReplicaAcksNotReached before */
	uint64		acks_isr_below; /* MqReplicaAcksIsrBelow before */
} ProduceAnswer;

typedef struct ProduceUnit
{
	ProduceTopic *topic;
	ProducePartition *part;
	Size	   *budget;			/* what the request's batches may still take */
	const char *txn_id;			/* the request's transactional id, or NULL */
} ProduceUnit;

/* a big-endian field of a Kafka batch's header */
static uint64
batch_field(const char *records, int at, int size)
{
	uint64		v = 0;

	for (int i = 0; i < size; i++)
		v = (v << 8) | (uint8) records[at + i];
	return v;
}

/*
 * A batch with the transactional bit: the coordinator must have the
 * partition in its producer's open transaction (txn_coordinator.c).
 * Returns its error, MQK_NONE to append; *first: the transaction's first
 * batch on the partition.
 */
static int16
check_transactional(ProduceUnit *u, MqTopic *topic, int64 *producer_id, bool *first)
{
	const char *b = u->part->records;
	int16		attributes;

	*producer_id = -1;
	if (u->part->len < MQ_KAFKA_HEADER_SIZE)
		return MQK_NONE;		/* the append answers CORRUPT_MESSAGE */
	attributes = (int16) batch_field(b, 21, 2);
	if (!(attributes & MQ_ATTR_TRANSACTIONAL) || (attributes & MQ_ATTR_CONTROL))
		return MQK_NONE;
	if (u->txn_id == NULL)
		return MQK_INVALID_TXN_STATE;	/* a transactional batch outside a transaction */
	*producer_id = (int64) batch_field(b, 43, 8);
	return MqKafkaTxnCheckProduce(u->txn_id, *producer_id, (int16) batch_field(b, 51, 2),
								  topic, u->part->index, first);
}

/* one partition's batch, in a subtransaction (MqKafkaTry) */
static void
produce_partition(void *arg)
{
	ProduceUnit *u = arg;
	ProducePartition *pp = u->part;
	MqTopic    *topic = MqKafkaTopic(u->topic->name, MQ_PRIV_PRODUCE, &pp->error);
	int64		txn_producer;
	bool		first = false;

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
	pp->error = check_transactional(u, topic, &txn_producer, &first);
	if (pp->error != MQK_NONE)
		return;
	/* never waiting for a SQL session's transaction of the same producer */
	pp->base_offset = MqLogAppendKafka(&topic, pp->index, pp->records, pp->len, -1, -1,
									   u->budget, true, txn_producer >= 0);
	if (txn_producer >= 0 && first)
		MqKafkaTxnNoteWrite(u->txn_id, topic, pp->index, pp->base_offset);
	pp->replicated = topic->replicas != NULL;
	pp->log_append_time = topic->log_append_time ? MqKafkaTime(GetCurrentTimestamp()) : -1;
	pp->log_start_offset = MqLogStartOffset(topic, pp->index);
}

/* the answer, once the request's transaction has committed */
static void
write_answer(MqKafkaRequest *req, StringInfo out)
{
	ProduceAnswer *a = req->after_commit_arg;
	bool		not_reached = MqReplicaAcksNotReached() != a->acks_not_reached;
	/* Kafka's answer when the ISR shrank below min.insync.replicas meanwhile */
	int16		not_reached_error = MqReplicaAcksIsrBelow() != a->acks_isr_below ?
		MQK_NOT_ENOUGH_REPLICAS_AFTER_APPEND : MQK_REQUEST_TIMED_OUT;

	MqKafkaWriteArrayLen(out, false, a->ntopics);
	for (int t = 0; t < a->ntopics; t++)
	{
		ProduceTopic *pt = &a->topics[t];

		MqKafkaWriteString(out, false, pt->name);
		MqKafkaWriteArrayLen(out, false, pt->npartitions);
		for (int p = 0; p < pt->npartitions; p++)
		{
			ProducePartition *pp = &pt->partitions[p];

			if (not_reached && pp->replicated && pp->error == MQK_NONE)
			{
				pp->error = not_reached_error;
				pp->base_offset = -1;
			}
			MqKafkaWriteInt32(out, pp->index);
			MqKafkaWriteInt16(out, pp->error);
			MqKafkaWriteInt64(out, pp->base_offset);
			MqKafkaWriteInt64(out, pp->log_append_time);
			if (a->version >= 5)
				MqKafkaWriteInt64(out, pp->log_start_offset);
			if (a->version >= 8)
			{
				MqKafkaWriteArrayLen(out, false, 0);	/* record_errors */
				MqKafkaWriteString(out, false, NULL);	/* error_message */
			}
		}
	}
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
}

MqKafkaOutcome
MqKafkaProduce(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		transactional;
	char	   *txn_id;
	int16		acks;
	int32		ntopics;
	ProduceTopic *topics;
	int16		refusal = MQK_NONE;
	ProduceAnswer *answer;
	Size		budget = (Size) mqlog_kafka_max_request_memory;
	MemoryContext entry_cxt;
	MemoryContext old;
	int			attempted = 0;
	int			spent = 0;		/* entries refused for the memory budget */
	int			late = 0;		/* entries refused for the time budget */

	txn_id = MqKafkaReadString(r, false, &transactional);
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
	else if (transactional && MqKafkaTxnRefused())
		refusal = MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;	/* not on a cluster */
	else
		(void) set_config_option("mqlog.acks", acks == -1 ? "all" : "1",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);

	entry_cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog kafka produce entry",
									  ALLOCSET_DEFAULT_SIZES);
	for (int t = 0; t < ntopics; t++)
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			ProducePartition *pp = &topics[t].partitions[p];
			ProduceUnit u = {&topics[t], pp, &budget, transactional ? txn_id : NULL};
			int16		code;

			pp->base_offset = -1;
			pp->log_append_time = -1;
			pp->log_start_offset = -1;
			pp->error = refusal;
			if (refusal != MQK_NONE)
				continue;
			/* the request's memory or time is spent: no more entries */
			if (budget < 2 * sizeof(MqRecord))
			{
				pp->error = MQK_MESSAGE_TOO_LARGE;
				spent++;
				continue;
			}
			if (MqKafkaOutOfTime(req, &attempted))
			{
				pp->error = MQK_REQUEST_TIMED_OUT;
				late++;
				continue;
			}
			old = MemoryContextSwitchTo(entry_cxt);
			code = MqKafkaTry(produce_partition, &u, MQK_INVALID_RECORD, NULL);
			MemoryContextSwitchTo(old);
			MemoryContextReset(entry_cxt);
			if (budget < 2 * sizeof(MqRecord))
				spent++;		/* the entry that spent it */
			if (code != MQK_NONE)
			{
				pp->error = code;
				pp->base_offset = -1;
			}
		}
	MemoryContextDelete(entry_cxt);
	if (spent > 0)
		ereport(LOG,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Kafka Produce request from client \"%s\" expands past mqlog.kafka_max_request_memory (%d bytes): %d partition entries answered MESSAGE_TOO_LARGE",
						req->client_id ? req->client_id : "", mqlog_kafka_max_request_memory, spent)));
	if (late > 0)
		ereport(LOG,
				(errmsg("Kafka Produce request from client \"%s\" took over %d ms: %d partition entries answered REQUEST_TIMED_OUT without being appended",
						req->client_id ? req->client_id : "", MQK_REQUEST_TIME_MS, late)));
	if (acks == 0)
		return MQK_NO_RESPONSE;

	answer = palloc(sizeof(ProduceAnswer));
	answer->version = v;
	answer->ntopics = ntopics;
	answer->topics = topics;
	answer->acks_not_reached = MqReplicaAcksNotReached();
	answer->acks_isr_below = MqReplicaAcksIsrBelow();
	req->after_commit = write_answer;
	req->after_commit_arg = answer;
	return MQK_RESPOND;
}
