/*-------------------------------------------------------------------------
 *
 * api_create_partitions.c
 *		CreatePartitions (key 37, v0-v3, flexible from v2): a topic grown
 *		to a new total of partitions with mq_add_partitions, called as the
 *		request's role, one topic per subtransaction, so that each topic of
 *		a request succeeds or fails on its own and a failed one changes
 *		nothing.
 *
 * Who may grow a topic is who may call mq_add_partitions (EXECUTE, PUBLIC
 * unless a DBA revoked it) on a topic it may alter (the function's own
 * check), checked first: a role that may not learns nothing else.  Then
 * Kafka's rules: a count not above the current one is INVALID_PARTITIONS
 * (the SQL function's 22023, with its message), and manual assignments
 * for the new partitions (one broker list per new partition, each as long
 * as the topic's replication factor) are honoured when they put every
 * new partition of a topic of replication factor 1 on this broker, which
 * is where mq_add_partitions puts them, and refused with
 * INVALID_REPLICA_ASSIGNMENT and the reason otherwise (brokers.c).
 * validate_only is the same growth in a subtransaction rolled back, every
 * check included.
 *
 * A request may name as many topics as its frame holds: each topic's work
 * runs in a memory context reset after it (MqKafkaTryInScratch), a name
 * no topic has is found in one read of the topic names
 * (MqKafkaKnownTopics), and the topics still waiting when the request has
 * run for MQK_REQUEST_TIME_MS are answered REQUEST_TIMED_OUT untried.
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

/* what a unit was doing when it failed (grow_error) */
typedef enum GrowPhase
{
	PHASE_COUNT,
	PHASE_ASSIGN,
	PHASE_ADD
} GrowPhase;

typedef struct GrowTopic
{
	char	   *name;
	int32		count;
	int32		nassignments;	/* -1: none given */
	MqKafkaAssignment *assignments;
	/* the answer */
	int16		error;
	char	   *message;
	/* the unit's state */
	GrowPhase	phase;
	Oid			fn;
} GrowTopic;

/* one topic's growth, in a subtransaction (MqKafkaTryInScratch) */
static void
grow_topic(void *arg)
{
	GrowTopic  *t = arg;
	MqTopic    *topic;

	/* Kafka checks authorization first: no other error tells more */
	t->phase = PHASE_COUNT;
	MqKafkaCheckExecute(t->fn);
	topic = MqTopicLookup(t->name, false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_ALTER);

	/* Kafka's own words for a count that does not grow the topic */
	if (t->count == topic->partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" already has %d partitions", t->name, topic->partitions)));
	if (t->count < topic->partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" has %d partitions, which is more than the %d requested: partitions can only be added",
						t->name, topic->partitions, t->count)));

	t->phase = PHASE_ASSIGN;
	if (t->nassignments >= 0)
	{
		char	   *refusal;

		if (t->nassignments != t->count - topic->partitions)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("topic \"%s\" grows by %d partitions, but %d assignments were given",
							t->name, t->count - topic->partitions, t->nassignments)));
		if (t->nassignments > 0 && t->assignments[0].nbrokers != topic->replication_factor)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("topic \"%s\" has replication factor %d, but its new partitions are assigned %d brokers",
							t->name, topic->replication_factor, t->assignments[0].nbrokers)));
		refusal = MqKafkaAssignmentRefusal(t->name, t->assignments, t->nassignments,
										   topic->replicas != NULL);
		if (refusal != NULL)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", refusal)));
	}

	t->phase = PHASE_ADD;
	(void) OidFunctionCall2(t->fn, CStringGetTextDatum(t->name), Int32GetDatum(t->count));
}

/* the Kafka error of a failed growth, by what it was doing */
static int16
grow_error(int sqlerrcode, void *arg)
{
	GrowTopic  *t = arg;

	if (sqlerrcode == ERRCODE_INVALID_PARAMETER_VALUE)
		return t->phase == PHASE_ASSIGN ? MQK_INVALID_REPLICA_ASSIGNMENT : MQK_INVALID_PARTITIONS;
	/* a replicated topic grows by at most so many partitions at once */
	if (sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		return MQK_INVALID_PARTITIONS;
	return MqKafkaErrorOf(sqlerrcode, MQK_INVALID_PARTITIONS);
}

MqKafkaOutcome
MqKafkaCreatePartitions(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 4 : 10);
	GrowTopic  *topics;
	char	  **names;
	bool	   *dup;
	bool		told = false;	/* of a name given twice (MqKafkaNamedAgain) */
	bool		validate_only;
	MqKafkaAdminWalk walk;
	static const Oid add_args[] = {TEXTOID, INT4OID};

	if (n < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(GrowTopic) * (n + 1));
	names = palloc0(sizeof(char *) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		GrowTopic  *t = &topics[i];

		t->name = names[i] = MqKafkaReadString(r, flex, NULL);
		t->count = MqKafkaReadInt32(r);
		t->nassignments = MqKafkaReadArrayLen(r, flex, flex ? 1 : 4);
		t->assignments = palloc0(sizeof(MqKafkaAssignment) * (Max(t->nassignments, 0) + 1));
		for (int a = 0; a < t->nassignments && !r->failed; a++)
		{
			MqKafkaAssignment *as = &t->assignments[a];

			as->partition = -1;
			as->nbrokers = MqKafkaReadArrayLen(r, flex, 4);
			as->brokers = palloc(sizeof(int32) * (Max(as->nbrokers, 0) + 1));
			for (int b = 0; b < as->nbrokers && !r->failed; b++)
				as->brokers[b] = MqKafkaReadInt32(r);
			MqKafkaSkipTags(r, flex);
		}
		MqKafkaSkipTags(r, flex);
		if (r->failed || t->name == NULL)
			return MQK_CLOSE;
	}
	(void) MqKafkaReadInt32(r); /* timeout_ms: the partitions are whole at commit */
	validate_only = MqKafkaReadInt8(r) != 0;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaAdminBegin(&walk, req, "mq_add_partitions", lengthof(add_args), add_args,
					  "Kafka CreatePartitions topic");
	dup = MqKafkaDuplicates(names, n);
	for (int i = 0; i < n; i++)
	{
		GrowTopic  *t = &topics[i];

		if (dup[i])
		{
			t->error = MQK_INVALID_REQUEST;
			t->message = MqKafkaNamedAgain("topic", t->name, &told);
		}
		else
		{
			t->fn = walk.fn;
			t->error = MqKafkaAdminTry(&walk, t->name, "add its partitions", grow_topic, t,
									   grow_error, !validate_only, &t->message);
		}
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteString(out, flex, topics[i].name);
		MqKafkaWriteInt16(out, topics[i].error);
		MqKafkaWriteString(out, flex, topics[i].message);
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
