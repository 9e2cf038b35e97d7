/*-------------------------------------------------------------------------
 *
 * api_delete_records.c
 *		DeleteRecords (key 21, v0-v2, flexible from v2): a partition's log
 *		start offset moved up with mq_delete_records, called as the
 *		request's role, one partition per subtransaction, so that each
 *		partition of a request succeeds or fails on its own and a failed
 *		one changes nothing.
 *
 * Who may delete records is who may call mq_delete_records (EXECUTE) on a
 * topic it may alter (the function's check), checked first.  The answer
 * is Kafka's: the partition's low watermark (its log start offset) after
 * the deletion; an offset of -1 deletes up to the last stable offset
 * (Kafka's: the high watermark, the same offset unless a transaction is
 * open); an offset above the high watermark, or below -1, is
 * OFFSET_OUT_OF_RANGE, and so is one above the last stable offset, which
 * Kafka would take (the log start never passes an open transaction here:
 * see mq_delete_records); a partition the topic does not have is
 * UNKNOWN_TOPIC_OR_PARTITION.  An
 * offset at or below the log start changes nothing and answers the log
 * start, as Kafka does.  A replicated topic's records cannot be deleted
 * yet (mq_delete_records refuses: the followers would keep them):
 * INVALID_REQUEST.  DeleteRecords has no error message; the server log
 * has mqlog's (DEBUG1).
 *
 * Each partition's work runs in a memory context reset after it, a topic
 * no topic has is found in one read of the topic names
 * (MqKafkaKnownTopics), and the partitions still waiting when the request
 * has run for MQK_REQUEST_TIME_MS are answered REQUEST_TIMED_OUT untried.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "acl/acl.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

typedef struct DeletePartition
{
	int32		partition;
	int64		offset;
	/* the answer */
	int64		low_watermark;
	int16		error;
} DeletePartition;

typedef struct DeleteTopicRecords
{
	char	   *name;
	int32		npartitions;
	DeletePartition *partitions;
} DeleteTopicRecords;

/* a unit: one partition of one topic */
typedef struct DeleteUnit
{
	const char *topic;
	DeletePartition *part;
	Oid			fn;
} DeleteUnit;

/* one partition's deletion, in a subtransaction (MqKafkaTryInScratch) */
static void
delete_records(void *arg)
{
	DeleteUnit *u = arg;
	MqTopic    *topic;

	MqKafkaCheckExecute(u->fn);
	topic = MqTopicLookup(u->topic, false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_ALTER);
	/* the function's own check of it is 22023, which is the offset's here */
	if (u->part->partition < 0 || u->part->partition >= topic->partitions)
	{
		u->part->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		return;
	}
	u->part->low_watermark = DatumGetInt64(OidFunctionCall3(u->fn, CStringGetTextDatum(u->topic),
															Int32GetDatum(u->part->partition),
															Int64GetDatum(u->part->offset)));
}

/* the Kafka error of a failed deletion */
static int16
delete_error(int sqlerrcode, void *arg)
{
	/* mq_delete_records of a replicated topic: not yet */
	if (sqlerrcode == ERRCODE_FEATURE_NOT_SUPPORTED)
		return MQK_INVALID_REQUEST;
	return MqKafkaErrorOf(sqlerrcode, MQK_OFFSET_OUT_OF_RANGE);
}

MqKafkaOutcome
MqKafkaDeleteRecords(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 3 : 6);
	DeleteTopicRecords *topics;
	MqKafkaAdminWalk walk;
	static const Oid delete_args[] = {TEXTOID, INT4OID, INT8OID};

	if (n < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(DeleteTopicRecords) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		DeleteTopicRecords *t = &topics[i];

		t->name = MqKafkaReadString(r, flex, NULL);
		t->npartitions = MqKafkaReadArrayLen(r, flex, 12);
		if (r->failed || t->name == NULL || t->npartitions < 0)
			return MQK_CLOSE;
		t->partitions = palloc0(sizeof(DeletePartition) * (t->npartitions + 1));
		for (int p = 0; p < t->npartitions && !r->failed; p++)
		{
			t->partitions[p].partition = MqKafkaReadInt32(r);
			t->partitions[p].offset = MqKafkaReadInt64(r);
			MqKafkaSkipTags(r, flex);
		}
		MqKafkaSkipTags(r, flex);
	}
	(void) MqKafkaReadInt32(r); /* timeout_ms: the deletion is whole at commit */
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaAdminBegin(&walk, req, "mq_delete_records", lengthof(delete_args), delete_args,
					  "Kafka DeleteRecords partition");
	for (int i = 0; i < n; i++)
	{
		DeleteTopicRecords *t = &topics[i];
		int16		topic_error = MqKafkaAdminMissing(&walk, t->name, NULL, NULL);

		for (int p = 0; p < t->npartitions; p++)
		{
			DeletePartition *part = &t->partitions[p];
			DeleteUnit	u = {t->name, part, walk.fn};
			char	   *message = NULL;
			int16		code = topic_error;

			part->low_watermark = -1;
			/* a partition the topic lacks: the unit sets its error itself */
			if (code == MQK_NONE)
				code = MqKafkaAdminTry(&walk, t->name, NULL, delete_records, &u, delete_error,
									   true, &message);
			if (code != MQK_NONE)
			{
				part->error = code;
				part->low_watermark = -1;
			}
		}
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteString(out, flex, topics[i].name);
		MqKafkaWriteArrayLen(out, flex, topics[i].npartitions);
		for (int p = 0; p < topics[i].npartitions; p++)
		{
			DeletePartition *part = &topics[i].partitions[p];

			MqKafkaWriteInt32(out, part->partition);
			MqKafkaWriteInt64(out, part->error == MQK_NONE ? part->low_watermark : -1);
			MqKafkaWriteInt16(out, part->error);
			MqKafkaWriteTags(out, flex);
		}
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
