/*-------------------------------------------------------------------------
 *
 * api_describe_configs.c
 *		DescribeConfigs (key 32, v0-v2): a topic's configuration as
 *		mqlog.topics shows it (mqlog.effective_config: Kafka's defaults
 *		under the topic's overrides), and this broker's few settings that
 *		a Kafka client may ask about.
 *
 * A topic is described to a role that may describe it, as Metadata lists
 * it (MqKafkaTopic with MQ_PRIV_DESCRIBE): a role that cannot see a topic
 * there cannot read its configuration here either.  A replicated topic
 * this node holds no replica of (mqlog.cluster_partition) is described,
 * to a role that sees such topics (MqKafkaSeesClusterTopics: mqlog_admin),
 * from its config in etcd, read now: the config every node that holds it
 * copies into its catalog, so the answer is the one such a node gives.
 * Each etcd read is a unit of MqKafkaOutOfTime.  Each key the topic
 * overrides is TOPIC_CONFIG, every other DEFAULT_CONFIG; none is read-only
 * (mq_alter_topic changes them all) and none is sensitive.  Synonyms, when
 * asked for, are the override and the default beneath it, most specific
 * first, as Kafka lists them.
 *
 * The broker (resource type 4, named "0" or ""): broker.id,
 * num.partitions and default.replication.factor (mqlog.kafka_num_partitions
 * and mqlog.kafka_default_replication_factor: what auto-creation and
 * CreateTopics's -1 use), auto.create.topics.enable
 * (mqlog.kafka_auto_create_topics) and socket.request.max.bytes
 * (mqlog.kafka_max_frame_size), all read-only.  Broker loggers and other
 * resource types are answered with INVALID_REQUEST.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "base/spi.h"
#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

/* Kafka's ConfigResource.Type */
#define RESOURCE_TOPIC	2
#define RESOURCE_BROKER 4

/* Kafka's DescribeConfigsResponse.ConfigSource */
#define SOURCE_TOPIC_CONFIG		1
#define SOURCE_STATIC_BROKER	4
#define SOURCE_DEFAULT_CONFIG	5

typedef struct ConfigEntry
{
	char	   *name;
	char	   *value;
	char	   *default_value;	/* the synonym beneath an override */
	int8		source;
	bool		read_only;
} ConfigEntry;

typedef struct ConfigResource
{
	int8		type;
	char	   *name;
	int32		nkeys;			/* -1: all of them */
	char	  **keys;
	int32		topic_id;		/* a topic the role may describe; 0: held
								 * elsewhere, its config from etcd */
	MemoryContext answer_cxt;	/* where the entries go */
	/* the answer */
	int16		error;
	char	   *message;
	int			nentries;
	ConfigEntry *entries;
} ConfigResource;

static bool
wanted(ConfigResource *res, const char *name)
{
	if (res->nkeys < 0)
		return true;
	for (int i = 0; i < res->nkeys; i++)
		if (strcmp(res->keys[i], name) == 0)
			return true;
	return false;
}

static void
add_entry(ConfigResource *res, const char *name, const char *value, const char *default_value,
		  int8 source, bool read_only)
{
	ConfigEntry *e;

	if (!wanted(res, name))
		return;
	e = &res->entries[res->nentries++];
	e->name = pstrdup(name);
	e->value = value ? pstrdup(value) : NULL;
	e->default_value = default_value ? pstrdup(default_value) : NULL;
	e->source = source;
	e->read_only = read_only;
}

/*
 * A topic's every config key with its effective value, in a
 * subtransaction (MqKafkaTryAdmin): read as the extension owner once the
 * role was found to be allowed to describe the topic; topic_id 0 is a
 * replicated topic this node holds no replica of, read from etcd.  The entries go to
 * res->answer_cxt, not to SPI's memory (which SPI_finish frees).
 */
/*
 * Every config key of a topic whose config (t.config, a JSON object of the
 * overrides) is the row of FROM: its effective value, its default, and
 * whether the topic overrides it
 */
#define CONFIG_QUERY(from) \
	"SELECT d.key," \
	" COALESCE(t.config OPERATOR(pg_catalog.->) d.key, d.value)" \
	" OPERATOR(pg_catalog.#>>) '{}'," \
	" d.value OPERATOR(pg_catalog.#>>) '{}'," \
	" t.config OPERATOR(pg_catalog.?) d.key" \
	" FROM " from ", pg_catalog.jsonb_each(mqlog.config_defaults()) d ORDER BY d.key"

static void
describe_topic(void *arg)
{
	ConfigResource *res = arg;
	Oid			type = INT4OID;
	Datum		value = Int32GetDatum(res->topic_id);
	MqSpi		spi;

	MqSpiBegin(&spi, true);
	if (res->topic_id == 0)
	{
		/* a replicated topic held elsewhere: its config in etcd */
		type = TEXTOID;
		value = CStringGetTextDatum(MqClusterTopicConfig(res->name));
		if (SPI_execute_with_args(CONFIG_QUERY("(SELECT $1::pg_catalog.jsonb AS config) t"),
								  1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog: the config of topic \"%s\" could not be read", res->name);
	}
	else if (SPI_execute_with_args(CONFIG_QUERY("(SELECT t.config FROM mqlog.topic t"
												" WHERE t.topic_id OPERATOR(pg_catalog.=) $1) t"),
								   1, &type, &value, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: the config of topic \"%s\" could not be read", res->name);
	res->entries = MemoryContextAllocZero(res->answer_cxt, sizeof(ConfigEntry) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		overridden = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		char	   *name = SPI_getvalue(tup, desc, 1);
		char	   *effective = SPI_getvalue(tup, desc, 2);
		char	   *dflt = overridden ? SPI_getvalue(tup, desc, 3) : NULL;
		MemoryContext old = MemoryContextSwitchTo(res->answer_cxt);

		add_entry(res, name, effective, dflt,
				  overridden ? SOURCE_TOPIC_CONFIG : SOURCE_DEFAULT_CONFIG, false);
		MemoryContextSwitchTo(old);
	}
	MqSpiEnd(&spi);
}

static void
describe_broker(ConfigResource *res)
{
	/* 0 on a single node; on a cluster this node's id from etcd (brokers.c) */
	char	   *self = psprintf("%d", MqKafkaSelfBrokerId());

	if (res->name[0] != '\0' && strcmp(res->name, self) != 0)
	{
		res->error = MQK_INVALID_REQUEST;
		res->message = psprintf("this listener is broker %s, not \"%s\"", self, res->name);
		return;
	}
	res->entries = palloc0(sizeof(ConfigEntry) * 5);
	add_entry(res, "broker.id", self, NULL, SOURCE_STATIC_BROKER, true);
	add_entry(res, "num.partitions", psprintf("%d", mqlog_kafka_num_partitions), NULL,
			  SOURCE_DEFAULT_CONFIG, true);
	add_entry(res, "default.replication.factor",
			  psprintf("%d", mqlog_kafka_default_replication_factor), NULL,
			  SOURCE_DEFAULT_CONFIG, true);
	add_entry(res, "auto.create.topics.enable", mqlog_kafka_auto_create_topics ? "true" : "false",
			  NULL, SOURCE_DEFAULT_CONFIG, true);
	add_entry(res, "socket.request.max.bytes", psprintf("%d", mqlog_kafka_max_frame_size), NULL,
			  SOURCE_STATIC_BROKER, true);
}

static void
write_entry(StringInfo out, int16 v, bool synonyms, ConfigEntry *e)
{
	MqKafkaWriteString(out, false, e->name);
	MqKafkaWriteString(out, false, e->value);
	MqKafkaWriteInt8(out, e->read_only);
	if (v == 0)
		MqKafkaWriteInt8(out, e->source == SOURCE_DEFAULT_CONFIG);	/* is_default */
	else
		MqKafkaWriteInt8(out, e->source);
	MqKafkaWriteInt8(out, 0);	/* is_sensitive */
	if (v == 0)
		return;
	if (!synonyms)
	{
		MqKafkaWriteArrayLen(out, false, 0);
		return;
	}
	MqKafkaWriteArrayLen(out, false, e->default_value ? 2 : 1);
	MqKafkaWriteString(out, false, e->name);
	MqKafkaWriteString(out, false, e->value);
	MqKafkaWriteInt8(out, e->source);
	if (e->default_value)
	{
		MqKafkaWriteString(out, false, e->name);
		MqKafkaWriteString(out, false, e->default_value);
		MqKafkaWriteInt8(out, SOURCE_DEFAULT_CONFIG);
	}
}

MqKafkaOutcome
MqKafkaDescribeConfigs(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int32		n = MqKafkaReadArrayLen(r, false, 7);
	bool		synonyms = false;
	ConfigResource *resources;
	char	  **keys;
	bool	   *dup;
	bool		told = false;	/* of a name given twice (MqKafkaNamedAgain) */
	MemoryContext scratch;
	MqKafkaTopicSet known;
	int			attempted = 0;

	if (n < 0)
		return MQK_CLOSE;
	resources = palloc0(sizeof(ConfigResource) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		ConfigResource *res = &resources[i];

		res->type = MqKafkaReadInt8(r);
		res->name = MqKafkaReadString(r, false, NULL);
		res->nkeys = MqKafkaReadArrayLen(r, false, 2);
		if (r->failed || res->name == NULL)
			return MQK_CLOSE;
		res->keys = palloc(sizeof(char *) * (Max(res->nkeys, 0) + 1));
		for (int k = 0; k < res->nkeys && !r->failed; k++)
			if ((res->keys[k] = MqKafkaReadString(r, false, NULL)) == NULL)
				return MQK_CLOSE;
	}
	if (v >= 1)
		synonyms = MqKafkaReadInt8(r) != 0;
	if (r->failed)
		return MQK_CLOSE;

	/* a resource named twice: each answered once, refused (as Kafka) */
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka DescribeConfigs resource",
									ALLOCSET_DEFAULT_SIZES);
	keys = MemoryContextAlloc(scratch, sizeof(char *) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		keys[i] = MemoryContextAlloc(scratch, strlen(resources[i].name) + 8);
		sprintf(keys[i], "%d/%s", resources[i].type, resources[i].name);
	}
	dup = MqKafkaDuplicates(keys, n);
	MemoryContextReset(scratch);
	MqKafkaKnownTopics(&known);
	for (int i = 0; i < n; i++)
	{
		ConfigResource *res = &resources[i];
		char	   *message;
		int16		code;

		if (dup[i])
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = MqKafkaNamedAgain("resource", res->name, &told);
		}
		else if (res->type == RESOURCE_TOPIC)
		{
			/*
			 * Looked up (as Metadata does) and read in scratch, reset after
			 * each: what a lookup leaves behind is not kept for a request
			 * naming many topics; a topic there is no answer for costs no
			 * subtransaction
			 */
			MemoryContext outer = MemoryContextSwitchTo(scratch);
			MqTopic    *topic = NULL;
			bool		elsewhere = false;

			res->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
			message = NULL;
			if (MqKafkaKnownTopic(&known, res->name))
				topic = MqKafkaTopic(res->name, MQ_PRIV_DESCRIBE, &res->error);
			else if ((code = MqKafkaClusterTopicError(res->name)) != MQK_NONE)
			{
				/*
				 * a replicated topic held elsewhere, to a role that may see
				 * it (brokers.c): its config is the cluster's, in etcd, one
				 * read each, for as long as the request may take
				 */
				res->error = code;
				if (code == MQK_NOT_LEADER_OR_FOLLOWER)
				{
					elsewhere = !MqKafkaOutOfTime(req, &attempted);
					res->error = elsewhere ? MQK_NONE : MQK_REQUEST_TIMED_OUT;
				}
			}
			if (topic != NULL || elsewhere)
			{
				res->topic_id = topic ? topic->topic_id : 0;
				res->answer_cxt = outer;
				code = MqKafkaTryAdmin(describe_topic, res, NULL, true, &message);
				if (code != MQK_NONE)
				{
					res->error = code;
					res->nentries = 0;
				}
			}
			MemoryContextSwitchTo(outer);
			res->message = message ? pstrdup(message) : NULL;
			MemoryContextReset(scratch);
		}
		else if (res->type == RESOURCE_BROKER)
			describe_broker(res);
		else
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = psprintf("resource type %d is not supported: mqlog describes topics (2) and its broker (4)",
									res->type);
		}
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, false, n);
	for (int i = 0; i < n; i++)
	{
		ConfigResource *res = &resources[i];

		MqKafkaWriteInt16(out, res->error);
		MqKafkaWriteString(out, false, res->message);
		MqKafkaWriteInt8(out, res->type);
		MqKafkaWriteString(out, false, res->name);
		MqKafkaWriteArrayLen(out, false, res->nentries);
		for (int e = 0; e < res->nentries; e++)
			write_entry(out, v, synonyms, &res->entries[e]);
	}
	return MQK_RESPOND;
}
