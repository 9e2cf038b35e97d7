/*-------------------------------------------------------------------------
 *
 * api_alter_configs.c
 *		AlterConfigs (key 33, v0-v2, flexible from v2) and
 *		IncrementalAlterConfigs (key 44, v0-v1, flexible from v1): a
 *		topic's config changed with mq_alter_topic, called as the request's
 *		role, one resource per subtransaction, so that each resource of a
 *		request succeeds or fails on its own and a failed one changes
 *		nothing.
 *
 * The two differ as in Kafka.  AlterConfigs sets a topic's whole config:
 * the keys it names take its values, every other key goes back to its
 * default (a null value is the default too).  IncrementalAlterConfigs
 * changes the keys it names by an operation each: SET a value, DELETE
 * (back to the default), and for a list config (mqlog has one,
 * cleanup.policy) APPEND or SUBTRACT values of the list; APPEND and
 * SUBTRACT of any other key is INVALID_CONFIG, as Kafka answers it.
 *
 * Who may change a topic's config is who may call mq_alter_topic
 * (EXECUTE) on a topic it may alter (the function's check), checked
 * first: a role that may not gets TOPIC_AUTHORIZATION_FAILED whatever
 * else is wrong.  A replicated topic this node holds no replica of is
 * altered through etcd by mq_alter_topic too, by mqlog_admin only (the
 * role that sees such topics, brokers.c), on the config etcd has.  An unknown key or a bad value is the function's own
 * check (mqlog._validate_config), INVALID_CONFIG with its message.
 * validate_only is the same change in a subtransaction rolled back.
 *
 * Broker resources (4) and broker loggers (8) are refused with
 * INVALID_REQUEST and a message: the broker's settings are PostgreSQL's
 * (postgresql.conf, ALTER SYSTEM), which a Kafka client does not change.
 * A resource named twice, a key named twice in one resource, an unknown
 * operation or a null value for SET, APPEND or SUBTRACT is INVALID_REQUEST,
 * as Kafka answers them.  Each resource's work runs in a memory context
 * reset after it, and those still waiting when the request has run for
 * MQK_REQUEST_TIME_MS are answered REQUEST_TIMED_OUT untried.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "acl/acl.h"
#include "base/spi.h"
#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

/* Kafka's ConfigResource.Type */
#define RESOURCE_TOPIC			2
#define RESOURCE_BROKER			4
#define RESOURCE_BROKER_LOGGER	8

/* Kafka's AlterConfigOp.OpType */
#define OP_SET			0
#define OP_DELETE		1
#define OP_APPEND		2
#define OP_SUBTRACT		3

/* the one topic config of Kafka's LIST type that mqlog has */
#define LIST_CONFIG "cleanup.policy"
#define LIST_MAX_ITEMS 8

typedef struct AlterEntry
{
	char	   *name;
	int8		op;				/* AlterConfigs: OP_SET */
	char	   *value;			/* NULL: null */
} AlterEntry;

typedef struct AlterResource
{
	int8		type;
	char	   *name;
	int32		nconfigs;
	AlterEntry *configs;
	bool		incremental;
	bool		elsewhere;		/* a replicated topic held elsewhere */
	Oid			fn;
	/* the answer */
	int16		error;
	char	   *message;
} AlterResource;

/*
 * "SELECT <query>" with one text argument as the extension owner: its one
 * value as text (NULL for a null), in the caller's memory context
 */
static char *
owner_value(const char *query, const char *arg)
{
	MemoryContext outer = CurrentMemoryContext;
	Oid			type = TEXTOID;
	Datum		value = CStringGetTextDatum(arg);
	char	   *result = NULL;
	MqSpi		spi;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args(query, 1, &type, &value, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: \"%s\" failed", query);
	if (SPI_processed == 1)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (v != NULL)
			result = MemoryContextStrdup(outer, v);
	}
	MqSpiEnd(&spi);
	return result;
}

/* a comma-separated list's items, trimmed and in lower case */
static List *
list_items(const char *value)
{
	char	   *copy = pstrdup(value);
	List	   *items = NIL;
	char	   *save;

	for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save))
	{
		char	   *item = pstrdup(tok);
		int			len;

		while (*item == ' ')
			item++;
		len = strlen(item);
		while (len > 0 && item[len - 1] == ' ')
			item[--len] = '\0';
		for (int i = 0; i < len; i++)
			item[i] = pg_ascii_tolower((unsigned char) item[i]);
		if (len > 0)
			items = lappend(items, item);
	}
	return items;
}

static bool
list_has(List *items, const char *item)
{
	ListCell   *lc;

	foreach(lc, items)
		if (strcmp(lfirst(lc), item) == 0)
			return true;
	return false;
}

/*
 * The value an APPEND or SUBTRACT leaves a list config of the topic with:
 * its effective value now (the default if it has no override; etcd's
 * config for a topic held elsewhere) with the
 * given items added where absent, or taken away.  A key that is not a list
 * is refused as Kafka refuses it; an unknown key is passed on as a SET, for
 * mqlog._validate_config to refuse with its list of keys.
 */
static char *
list_op(AlterResource *res, AlterEntry *e)
{
	StringInfoData buf;
	List	   *current;
	List	   *given = list_items(e->value);
	List	   *result = NIL;
	ListCell   *lc;
	char	   *effective;

	if (strcmp(e->name, LIST_CONFIG) != 0)
	{
		if (owner_value("SELECT mqlog.config_defaults() OPERATOR(pg_catalog.?) $1", e->name)[0] == 'f')
			return e->value;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("config \"%s\" is not a list: %s applies to list configs only",
						e->name, e->op == OP_APPEND ? "APPEND" : "SUBTRACT"),
				 errhint("The list config of a topic is " LIST_CONFIG "; SET or DELETE the others.")));
	}
	/* its values are few (delete, compact): a long list costs n^2 here */
	if (list_length(given) > LIST_MAX_ITEMS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%d values for config \"%s\" are too many", list_length(given), e->name),
				 errhint("Valid values are: delete, compact.")));
	if (res->elsewhere)
		effective = owner_value("SELECT mqlog.effective_config($1::pg_catalog.jsonb)"
								" OPERATOR(pg_catalog.->>) '" LIST_CONFIG "'",
								MqClusterTopicConfig(res->name));
	else
		effective = owner_value("SELECT mqlog.effective_config(t.config) OPERATOR(pg_catalog.->>) '" LIST_CONFIG "'"
								" FROM mqlog.topic t WHERE t.name OPERATOR(pg_catalog.=) $1", res->name);
	current = list_items(effective ? effective : "");
	foreach(lc, current)
		if (e->op == OP_APPEND || !list_has(given, lfirst(lc)))
			result = lappend(result, lfirst(lc));
	if (e->op == OP_APPEND)
		foreach(lc, given)
			if (!list_has(result, lfirst(lc)))
				result = lappend(result, lfirst(lc));
	initStringInfo(&buf);
	foreach(lc, result)
		appendStringInfo(&buf, "%s%s", foreach_current_index(lc) > 0 ? "," : "",
						 (char *) lfirst(lc));
	return buf.data;
}

/*
 * One resource's change, in a subtransaction (MqKafkaTryInScratch):
 * the role's rights first, then the change as mq_alter_topic takes it
 * (for AlterConfigs every key of mqlog.config_defaults() not given reset
 * to its default)
 */
static void
alter_topic(void *arg)
{
	AlterResource *res = arg;
	MqTopic    *topic;
	char	  **names = palloc(sizeof(char *) * (res->nconfigs + 1));
	char	  **values = palloc(sizeof(char *) * (res->nconfigs + 1));
	Datum		change;

	MqKafkaCheckExecute(res->fn);
	if (!res->elsewhere)
	{
		/* held elsewhere: mq_alter_topic's own check (mqlog_admin) */
		topic = MqTopicLookup(res->name, false);
		MqTopicCheckPrivilege(topic, MQ_PRIV_ALTER);
	}

	for (int i = 0; i < res->nconfigs; i++)
	{
		AlterEntry *e = &res->configs[i];

		names[i] = e->name;
		if (e->op == OP_DELETE)
			values[i] = NULL;
		else if (e->op == OP_APPEND || e->op == OP_SUBTRACT)
			values[i] = list_op(res, e);
		else
			values[i] = e->value;
	}
	change = MqKafkaConfigJson(res->nconfigs, names, values);
	if (!res->incremental)
	{
		char	   *whole = owner_value("SELECT COALESCE((SELECT pg_catalog.jsonb_object_agg(k, NULL::pg_catalog.jsonb)"
										" FROM pg_catalog.jsonb_object_keys(mqlog.config_defaults()) k), '{}')"
										" OPERATOR(pg_catalog.||) $1::pg_catalog.jsonb",
										JsonbToCString(NULL, &DatumGetJsonbP(change)->root, 0));

		change = DirectFunctionCall1(jsonb_in, CStringGetDatum(whole));
	}
	(void) OidFunctionCall2(res->fn, CStringGetTextDatum(res->name), change);
}

/* the Kafka error of a failed change: a bad key or value is INVALID_CONFIG */
static int16
alter_error(int sqlerrcode, void *arg)
{
	if (ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_DATA_EXCEPTION)
		return MQK_INVALID_CONFIG;
	return MqKafkaErrorOf(sqlerrcode, MQK_INVALID_CONFIG);
}

/* what Kafka refuses before trying: a malformed change, a broker's config */
static void
precheck_resource(AlterResource *res)
{
	char	  **names;
	bool	   *dup;

	if (res->type == RESOURCE_BROKER || res->type == RESOURCE_BROKER_LOGGER)
	{
		res->error = MQK_INVALID_REQUEST;
		res->message = psprintf("broker %s are not changed through Kafka: the broker's settings are PostgreSQL's (mqlog.kafka_* in postgresql.conf, ALTER SYSTEM and a reload)",
								res->type == RESOURCE_BROKER ? "configs" : "loggers");
		return;
	}
	if (res->type != RESOURCE_TOPIC)
	{
		res->error = MQK_INVALID_REQUEST;
		res->message = psprintf("resource type %d is not supported: mqlog alters the configs of topics (2)",
								res->type);
		return;
	}
	names = palloc(sizeof(char *) * (res->nconfigs + 1));
	for (int i = 0; i < res->nconfigs; i++)
		names[i] = res->configs[i].name;
	dup = MqKafkaDuplicates(names, res->nconfigs);
	for (int i = 0; i < res->nconfigs; i++)
	{
		AlterEntry *e = &res->configs[i];

		if (dup[i])
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = psprintf("config \"%s\" is named more than once for topic \"%s\"",
									e->name, res->name);
			return;
		}
		if (e->op < OP_SET || e->op > OP_SUBTRACT)
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = psprintf("unknown operation %d for config \"%s\": the operations are SET (0), DELETE (1), APPEND (2) and SUBTRACT (3)",
									e->op, e->name);
			return;
		}
		if (res->incremental && e->op != OP_DELETE && e->value == NULL)
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = psprintf("null value for config \"%s\": only DELETE takes none", e->name);
			return;
		}
	}
}

/* both APIs: they differ only in an operation per config */
static MqKafkaOutcome
alter_configs(MqKafkaRequest *req, StringInfo out, bool incremental)
{
	MqKafkaReader *r = &req->body;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 4 : 7);
	AlterResource *resources;
	char	  **keys;
	bool	   *dup;
	bool		told = false;	/* of a name given twice (MqKafkaNamedAgain) */
	bool		validate_only;
	MqKafkaAdminWalk walk;
	static const Oid alter_args[] = {TEXTOID, JSONBOID};

	if (n < 0)
		return MQK_CLOSE;
	resources = palloc0(sizeof(AlterResource) * (n + 1));
	keys = palloc0(sizeof(char *) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		AlterResource *res = &resources[i];

		res->incremental = incremental;
		res->type = MqKafkaReadInt8(r);
		res->name = MqKafkaReadString(r, flex, NULL);
		res->nconfigs = MqKafkaReadArrayLen(r, flex, flex ? 3 : 4);
		if (r->failed || res->name == NULL || res->nconfigs < 0)
			return MQK_CLOSE;
		res->configs = palloc0(sizeof(AlterEntry) * (res->nconfigs + 1));
		for (int c = 0; c < res->nconfigs && !r->failed; c++)
		{
			AlterEntry *e = &res->configs[c];

			e->name = MqKafkaReadString(r, flex, NULL);
			e->op = incremental ? MqKafkaReadInt8(r) : OP_SET;
			e->value = MqKafkaReadString(r, flex, NULL);
			MqKafkaSkipTags(r, flex);
			if (e->name == NULL)
				return MQK_CLOSE;
		}
		MqKafkaSkipTags(r, flex);
		keys[i] = psprintf("%d/%s", res->type, res->name);
	}
	validate_only = MqKafkaReadInt8(r) != 0;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaAdminBegin(&walk, req, "mq_alter_topic", lengthof(alter_args), alter_args,
					  "Kafka AlterConfigs resource");
	walk.elsewhere_ok = true;
	dup = MqKafkaDuplicates(keys, n);
	for (int i = 0; i < n; i++)
	{
		AlterResource *res = &resources[i];

		if (dup[i])
		{
			res->error = MQK_INVALID_REQUEST;
			res->message = MqKafkaNamedAgain("resource", res->name, &told);
			continue;
		}
		precheck_resource(res);
		if (res->error != MQK_NONE)
			continue;
		/* a replicated topic held elsewhere, to a role that sees it: in etcd */
		res->elsewhere = MqKafkaAdminHeldElsewhere(&walk, res->name);
		res->fn = walk.fn;
		res->error = MqKafkaAdminTry(&walk, res->name, "alter it", alter_topic, res, alter_error,
									 !validate_only, &res->message);
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteInt16(out, resources[i].error);
		MqKafkaWriteString(out, flex, resources[i].message);
		MqKafkaWriteInt8(out, resources[i].type);
		MqKafkaWriteString(out, flex, resources[i].name);
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}

MqKafkaOutcome
MqKafkaAlterConfigs(MqKafkaRequest *req, StringInfo out)
{
	return alter_configs(req, out, false);
}

MqKafkaOutcome
MqKafkaIncrementalAlterConfigs(MqKafkaRequest *req, StringInfo out)
{
	return alter_configs(req, out, true);
}
