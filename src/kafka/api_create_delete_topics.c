/*-------------------------------------------------------------------------
 *
 * api_create_delete_topics.c
 *		CreateTopics (key 19, v0-v4) and DeleteTopics (key 20, v0-v3): a
 *		Kafka client's topic DDL as mq_create_topic and mq_drop_topic,
 *		called as the request's role, one topic per subtransaction so that
 *		each topic of a request succeeds or fails on its own and a failed
 *		one changes nothing.
 *
 * The SQL functions are the one way topics are made and dropped: who may
 * create topics is the EXECUTE privilege on mq_create_topic (mqlog_admin),
 * who may drop one is its alter privilege, and what mq_drop_topic does for
 * waiting consumers and replicated topics happens here too.  What this
 * file adds is Kafka's side: the defaults (-1 partitions is
 * mqlog.kafka_num_partitions, Kafka's num.partitions; -1 replicas is
 * mqlog.kafka_default_replication_factor), manual replica assignments
 * honoured where they say what mqlog does anyway (each partition on this
 * broker alone) and refused with the reason otherwise (brokers.c),
 * configs as a JSON object of Kafka's names and values,
 * validate_only as a dry run (the same create in a subtransaction rolled
 * back), and the error codes.  A topic's name and its config are checked
 * first, each on its own (mqlog._check_topic_name, mqlog._validate_config,
 * as the extension owner), so that an invalid_parameter_value from
 * mq_create_topic itself can only be about the partitions (or, above
 * replication factor 1, the cluster's nodes).
 *
 * A request may name as many topics as its frame holds: each topic's work
 * runs in a memory context reset after it, names given twice are found by
 * sorting (MqKafkaDuplicates), and names no topic has are found in one
 * read of the topic names (MqKafkaKnownTopics), both shared with
 * DescribeConfigs (api_describe_configs.c).
 *
 * Metadata's auto-creation of a topic (api_metadata.c) is one unit of the
 * same kind, of -1 partitions and -1 replicas (MqKafkaAutoCreateTopic).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/spi.h"
#include "cluster/metadata.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

/* what a CreateTopics unit was doing when it failed (create_error) */
typedef enum CreatePhase
{
	PHASE_NAME,
	PHASE_CONFIG,
	PHASE_CREATE
} CreatePhase;

typedef struct CreateTopic
{
	char	   *name;
	int32		partitions;
	int16		replication_factor;
	int32		nassignments;
	MqKafkaAssignment *assignments;
	int32		nconfigs;
	char	  **config_names;
	char	  **config_values;	/* NULL: the default */
	/* the answer */
	int16		error;
	char	   *message;
	/* the unit's state */
	CreatePhase phase;
	Oid			fn;
} CreateTopic;

typedef struct DeleteTopic
{
	char	   *name;
	int16		error;
	Oid			fn;
} DeleteTopic;

/*
 * A function of the extension's schema with these argument types, or
 * InvalidOid when mqlog is not installed in the database
 */
Oid
MqKafkaExtensionFunction(const char *name, int nargs, const Oid *argtypes)
{
	Oid			ext = get_extension_oid("mqlog", true);
	Oid			nsp = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(ext))
		return InvalidOid;
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		return InvalidOid;
	return LookupFuncName(list_make2(makeString(get_namespace_name(nsp)), makeString(pstrdup(name))),
						  nargs, argtypes, true);
}

/* fn, which the role must be allowed to execute (42501 otherwise) */
void
MqKafkaCheckExecute(Oid fn)
{
	AclResult	acl = pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE);

	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FUNCTION, get_func_name(fn));
}

/*
 * Kafka refuses a request that names a topic (or config resource) twice
 * with INVALID_REQUEST for each of them: which are named twice (sorting a
 * copy of the names, so a frame of many topics costs n log n, not n
 * squared)
 */
typedef struct NameAt
{
	const char *name;
	int			at;
} NameAt;

/* by name, then by place in the request */
static int
name_cmp(const void *a, const void *b)
{
	const NameAt *x = a;
	const NameAt *y = b;
	int			c = strcmp(x->name, y->name);

	return c != 0 ? c : (x->at > y->at) - (x->at < y->at);
}

/* the names with their places, sorted by name_cmp */
static NameAt *
sorted_names(char *const *names, int n)
{
	NameAt	   *sorted = palloc(sizeof(NameAt) * (n + 1));

	for (int i = 0; i < n; i++)
	{
		sorted[i].name = names[i];
		sorted[i].at = i;
	}
	qsort(sorted, n, sizeof(NameAt), name_cmp);
	return sorted;
}

/* every place of a name given more than once */
bool *
MqKafkaDuplicates(char *const *names, int n)
{
	NameAt	   *sorted = sorted_names(names, n);
	bool	   *dup = palloc0(sizeof(bool) * (n + 1));

	for (int i = 1; i < n; i++)
		if (strcmp(sorted[i].name, sorted[i - 1].name) == 0)
			dup[sorted[i].at] = dup[sorted[i - 1].at] = true;
	pfree(sorted);
	return dup;
}

/* the places of a name after its first (Metadata keeps the first) */
bool *
MqKafkaRepeats(char *const *names, int n)
{
	NameAt	   *sorted = sorted_names(names, n);
	bool	   *again = palloc0(sizeof(bool) * (n + 1));

	for (int i = 1; i < n; i++)
		if (strcmp(sorted[i].name, sorted[i - 1].name) == 0)
			again[sorted[i].at] = true;
	pfree(sorted);
	return again;
}

/*
 * The message of an element named more than once in a request (answered
 * INVALID_REQUEST, as Kafka answers it): the first such element's; NULL
 * for the later ones (*told), so that a request naming one element as
 * often as its frame holds is not answered with a message for each (a
 * 2 MB DescribeConfigs was answered with 10 MB, and 40 clients that did
 * not read such answers held 400 MB of the listener).
 */
char *
MqKafkaNamedAgain(const char *kind, const char *name, bool *told)
{
	if (*told)
		return NULL;
	*told = true;
	return psprintf("%s \"%s\" is named more than once in the request", kind, name);
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

void
MqKafkaKnownTopics(MqKafkaTopicSet *set)
{
	List	   *names = OidIsValid(get_extension_oid("mqlog", true)) ? MqTopicNames(NULL) : NIL;
	ListCell   *lc;

	set->n = 0;
	set->names = palloc(sizeof(char *) * (list_length(names) + 1));
	foreach(lc, names)
		set->names[set->n++] = lfirst(lc);
	qsort(set->names, set->n, sizeof(char *), str_cmp);
}

bool
MqKafkaKnownTopic(const MqKafkaTopicSet *set, const char *name)
{
	return bsearch(&name, set->names, set->n, sizeof(char *), str_cmp) != NULL;
}

/* "SELECT mqlog._<check>($1)" as the extension owner: an ERROR if it fails */
static void
run_check(const char *query, Oid type, Datum value)
{
	MqSpi		spi;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args(query, 1, &type, &value, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: \"%s\" failed", query);
	MqSpiEnd(&spi);
}

/* configs as the JSON object mq_create_topic and mq_alter_topic take */
Datum
MqKafkaConfigJson(int n, char *const *names, char *const *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, names[i]);
		appendStringInfoString(&buf, ": ");
		if (values[i] == NULL)
			appendStringInfoString(&buf, "null");
		else
			escape_json(&buf, values[i]);
	}
	appendStringInfoChar(&buf, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
}

/*
 * One topic's unit (MqKafkaTryAdmin) in scratch, reset after it: what the
 * unit allocates for its work (the config's JSON, SPI, a failed
 * statement's leftovers) is gone before the next topic, so a request of
 * many topics costs memory for its answers only.  The error message is
 * copied out.
 */
int16
MqKafkaTryInScratch(void (*fn) (void *arg), void *arg, int16 (*map) (int sqlerrcode, void *arg),
					bool keep, MemoryContext scratch, char **message)
{
	MemoryContext outer = MemoryContextSwitchTo(scratch);
	int16		code = MqKafkaTryAdmin(fn, arg, map, keep, message);

	MemoryContextSwitchTo(outer);
	if (*message)
		*message = pstrdup(*message);
	MemoryContextReset(scratch);
	return code;
}

/*
 * The walk the topic admin handlers make over a request's units (a topic,
 * a resource, a partition), which every one of them makes alike: the SQL
 * function and the topics held here are looked up once, and each unit
 * runs in the one scratch context, within the request's time.
 */
void
MqKafkaAdminBegin(MqKafkaAdminWalk *walk, MqKafkaRequest *req, const char *function,
				  int nargs, const Oid *argtypes, const char *unit)
{
	walk->req = req;
	walk->fn = MqKafkaExtensionFunction(function, nargs, argtypes);
	MqKafkaKnownTopics(&walk->known);
	walk->scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka admin unit",
										  ALLOCSET_DEFAULT_SIZES);
	/* a context's name must be a constant: the unit's kind is its identifier */
	MemoryContextSetIdentifier(walk->scratch, unit);
	walk->attempted = 0;
	walk->elsewhere_ok = false;
	/* an admin unit takes exclusive locks: it may wait longer (MQK_LOCK_WAIT_MS) */
	(void) set_config_option("lock_timeout", CppAsString2(MQK_REQUEST_TIME_MS), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

int16
MqKafkaAdminMissing(MqKafkaAdminWalk *walk, const char *topic, const char *what, char **message)
{
	if (OidIsValid(walk->fn) && MqKafkaKnownTopic(&walk->known, topic))
		return MQK_NONE;
	if (walk->elsewhere_ok && MqKafkaAdminHeldElsewhere(walk, topic))
		return MQK_NONE;
	return MqKafkaMissingTopicError(topic, what, message);
}

/*
 * A replicated topic this node holds no replica of, that the request's
 * role may learn of (brokers.c: NOT_LEADER_OR_FOLLOWER): the handlers
 * that set elsewhere_ok (DeleteTopics, AlterConfigs) change it through
 * etcd, as mq_drop_topic and mq_alter_topic do from here
 */
bool
MqKafkaAdminHeldElsewhere(MqKafkaAdminWalk *walk, const char *topic)
{
	return OidIsValid(walk->fn) && !MqKafkaKnownTopic(&walk->known, topic) &&
		MqKafkaClusterTopicError(topic) == MQK_NOT_LEADER_OR_FOLLOWER;
}

int16
MqKafkaAdminTry(MqKafkaAdminWalk *walk, const char *topic, const char *what,
				void (*fn) (void *arg), void *arg, int16 (*map) (int sqlerrcode, void *arg),
				bool keep, char **message)
{
	int16		code = MqKafkaAdminMissing(walk, topic, what, message);

	if (code != MQK_NONE)
		return code;
	if (MqKafkaOutOfTime(walk->req, &walk->attempted))
		return MQK_REQUEST_TIMED_OUT;
	return MqKafkaTryInScratch(fn, arg, map, keep, walk->scratch, message);
}

/* one topic's creation, in a subtransaction (MqKafkaTryInScratch) */
static void
create_topic(void *arg)
{
	CreateTopic *t = arg;
	Datum		name = CStringGetTextDatum(t->name);
	Datum		config = MqKafkaConfigJson(t->nconfigs, t->config_names, t->config_values);

	/* Kafka checks authorization first: no other error tells more */
	t->phase = PHASE_NAME;
	MqKafkaCheckExecute(t->fn);
	t->phase = PHASE_NAME;
	run_check("SELECT mqlog._check_topic_name($1)", TEXTOID, name);
	t->phase = PHASE_CONFIG;
	run_check("SELECT mqlog._validate_config($1)", JSONBOID, config);
	t->phase = PHASE_CREATE;
	/* Kafka's topics are one namespace: not a single-node shadow of the cluster's */
	if (MqClusterEnabled() && MqClusterDirectoryRead(t->name) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("topic \"%s\" already exists in cluster \"%s\"", t->name, mqlog_cluster_name),
				 errdetail("It is a replicated topic this node holds no replica of.")));
	(void) OidFunctionCall4(t->fn, name,
							Int32GetDatum(t->partitions == -1 ? mqlog_kafka_num_partitions : t->partitions),
							Int32GetDatum(t->replication_factor == -1 ?
										  mqlog_kafka_default_replication_factor : t->replication_factor),
							config);
}

/* the Kafka error of a failed creation, by what it was doing */
static int16
create_error(int sqlerrcode, void *arg)
{
	CreateTopic *t = arg;

	switch (sqlerrcode)
	{
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return MQK_TOPIC_AUTHORIZATION_FAILED;
		case ERRCODE_DUPLICATE_OBJECT:
			return MQK_TOPIC_ALREADY_EXISTS;
		case ERRCODE_INVALID_NAME:
			return MQK_INVALID_TOPIC_EXCEPTION;	/* also a name colliding modulo '.'/'_' */
		case ERRCODE_RESERVED_NAME:
			/* a Kafka internal topic's name: as Kafka refuses __cluster_metadata */
			return MQK_INVALID_REQUEST;
		case ERRCODE_LOCK_NOT_AVAILABLE:
			return MQK_REQUEST_TIMED_OUT;	/* lock_timeout */
		default:
			break;
	}
	if (t->phase == PHASE_CONFIG && ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_DATA_EXCEPTION)
		return MQK_INVALID_CONFIG;
	if (t->phase == PHASE_CREATE &&
		(t->replication_factor == -1 ? mqlog_kafka_default_replication_factor :
		 t->replication_factor) > 1 &&
		(sqlerrcode == ERRCODE_INVALID_PARAMETER_VALUE ||
		 sqlerrcode == ERRCODE_FEATURE_NOT_SUPPORTED ||
		 sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED))
		return MQK_INVALID_REPLICATION_FACTOR;	/* no cluster, too few nodes */
	return MqKafkaErrorOf(sqlerrcode, MQK_INVALID_PARTITIONS);
}

/*
 * A manual assignment, checked as Kafka checks it (partitions 0 to n - 1,
 * each once; counts of -1), and honoured when it is what mqlog would do
 * (MqKafkaAssignmentRefusal): then the topic is made with that many
 * partitions and one replica each.
 */
static void
check_assignments(CreateTopic *t)
{
	bool	   *seen = palloc0(sizeof(bool) * t->nassignments);
	char	   *refusal;

	if (t->partitions != -1 || t->replication_factor != -1)
	{
		t->error = MQK_INVALID_REQUEST;
		t->message = psprintf("topic \"%s\": both a count of partitions or replicas and a replica assignment were given; give one or the other",
							  t->name);
		return;
	}
	for (int a = 0; a < t->nassignments; a++)
	{
		int32		p = t->assignments[a].partition;

		if (p < 0 || p >= t->nassignments || seen[p])
		{
			t->error = MQK_INVALID_REPLICA_ASSIGNMENT;
			t->message = psprintf("topic \"%s\": the partitions assigned must be 0 to %d, each once (partition %d)",
								  t->name, t->nassignments - 1, p);
			return;
		}
		seen[p] = true;
	}
	refusal = MqKafkaAssignmentRefusal(t->name, t->assignments, t->nassignments, false);
	if (refusal != NULL)
	{
		t->error = MQK_INVALID_REPLICA_ASSIGNMENT;
		t->message = refusal;
		return;
	}
	t->partitions = t->nassignments;
	t->replication_factor = 1;
}

/* what Kafka refuses before trying: a wrong count, placement by hand */
static void
precheck_topic(CreateTopic *t)
{
	if (t->nassignments > 0)
		check_assignments(t);
	else if (t->partitions == 0 || t->partitions < -1)
	{
		t->error = MQK_INVALID_PARTITIONS;
		t->message = psprintf("number of partitions must be at least 1, or -1 for the default (%d)",
							  mqlog_kafka_num_partitions);
	}
	else if (t->replication_factor == 0 || t->replication_factor < -1)
	{
		t->error = MQK_INVALID_REPLICATION_FACTOR;
		t->message = psprintf("replication factor must be at least 1, or -1 for the default (%d)",
							  mqlog_kafka_default_replication_factor);
	}
}

MqKafkaOutcome
MqKafkaCreateTopics(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int32		n = MqKafkaReadArrayLen(r, false, 16);
	CreateTopic *topics;
	char	  **names;
	bool	   *dup;
	bool		told = false;	/* of a name given twice (MqKafkaNamedAgain) */
	bool		validate_only = false;
	MemoryContext scratch;
	Oid			fn;
	static const Oid create_args[] = {TEXTOID, INT4OID, INT4OID, JSONBOID};

	if (n < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(CreateTopic) * (n + 1));
	names = palloc0(sizeof(char *) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
	{
		CreateTopic *t = &topics[i];

		t->name = names[i] = MqKafkaReadString(r, false, NULL);
		t->partitions = MqKafkaReadInt32(r);
		t->replication_factor = MqKafkaReadInt16(r);
		t->nassignments = MqKafkaReadArrayLen(r, false, 8);
		t->assignments = palloc0(sizeof(MqKafkaAssignment) * (Max(t->nassignments, 0) + 1));
		for (int a = 0; a < t->nassignments && !r->failed; a++)
		{
			MqKafkaAssignment *as = &t->assignments[a];

			as->partition = MqKafkaReadInt32(r);
			as->nbrokers = MqKafkaReadArrayLen(r, false, 4);
			as->brokers = palloc(sizeof(int32) * (Max(as->nbrokers, 0) + 1));
			for (int b = 0; b < as->nbrokers && !r->failed; b++)
				as->brokers[b] = MqKafkaReadInt32(r);
		}
		t->nconfigs = MqKafkaReadArrayLen(r, false, 4);
		if (r->failed || t->name == NULL || t->nconfigs < 0)
			return MQK_CLOSE;
		t->config_names = palloc(sizeof(char *) * (t->nconfigs + 1));
		t->config_values = palloc(sizeof(char *) * (t->nconfigs + 1));
		for (int c = 0; c < t->nconfigs && !r->failed; c++)
		{
			t->config_names[c] = MqKafkaReadString(r, false, NULL);
			t->config_values[c] = MqKafkaReadString(r, false, NULL);
			if (t->config_names[c] == NULL)
				return MQK_CLOSE;
		}
	}
	(void) MqKafkaReadInt32(r); /* timeout_ms: a topic is whole at commit */
	if (v >= 1)
		validate_only = MqKafkaReadInt8(r) != 0;
	if (r->failed)
		return MQK_CLOSE;

	fn = MqKafkaExtensionFunction("mq_create_topic", lengthof(create_args), create_args);
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka CreateTopics topic",
									ALLOCSET_DEFAULT_SIZES);
	dup = MqKafkaDuplicates(names, n);
	for (int i = 0; i < n; i++)
	{
		CreateTopic *t = &topics[i];

		if (dup[i])
		{
			t->error = MQK_INVALID_REQUEST;
			t->message = MqKafkaNamedAgain("topic", t->name, &told);
		}
		else if (!OidIsValid(fn))
		{
			t->error = MQK_INVALID_REQUEST;
			t->message = pstrdup("mqlog is not installed in the listener's database");
		}
		else
			precheck_topic(t);
		if (t->error != MQK_NONE)
			continue;
		t->fn = fn;
		t->error = MqKafkaTryInScratch(create_topic, t, create_error, !validate_only, scratch, &t->message);
	}

	if (v >= 2)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, false, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteString(out, false, topics[i].name);
		MqKafkaWriteInt16(out, topics[i].error);
		if (v >= 1)
			MqKafkaWriteString(out, false, topics[i].message);
	}
	return MQK_RESPOND;
}

/*
 * Metadata's auto-creation: name as CreateTopics would create it with -1
 * partitions and -1 replicas, as the request's role (so a role that may
 * not create topics is TOPIC_AUTHORIZATION_FAILED, an invalid name or one
 * that collides with a topic's modulo '.' and '_' INVALID_TOPIC_EXCEPTION,
 * a Kafka internal topic's name INVALID_REQUEST, and none of them creates
 * anything).  A topic of
 * that name that another request created meanwhile (it committed while
 * this one waited on the name's unique index, or it is in etcd) is
 * TOPIC_ALREADY_EXISTS, which the caller takes as success: Kafka's
 * concurrent auto-creates both see the topic.
 *
 * The creation waits for a lock at most MQK_REQUEST_TIME_MS (lock_timeout,
 * as a function's SET clause sets it): a SQL transaction that creates the
 * same name and stays open would otherwise hold the listener, and every
 * connection, until it ends.  Such a wait is REQUEST_TIMED_OUT.
 */
int16
MqKafkaAutoCreateTopic(const char *name, MemoryContext scratch, char **message)
{
	static const Oid create_args[] = {TEXTOID, INT4OID, INT4OID, JSONBOID};
	CreateTopic t = {0};
	int			nest;
	int16		code;

	*message = NULL;
	t.name = (char *) name;
	t.partitions = -1;
	t.replication_factor = -1;
	t.fn = MqKafkaExtensionFunction("mq_create_topic", lengthof(create_args), create_args);
	if (!OidIsValid(t.fn))
		return MQK_UNKNOWN_TOPIC_OR_PARTITION;
	nest = NewGUCNestLevel();
	(void) set_config_option("lock_timeout", CppAsString2(MQK_REQUEST_TIME_MS), PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	code = MqKafkaTryInScratch(create_topic, &t, create_error, true, scratch, message);
	AtEOXact_GUC(true, nest);
	return code;
}

/* one topic's drop, in a subtransaction (MqKafkaTryInScratch) */
static void
delete_topic(void *arg)
{
	DeleteTopic *t = arg;

	MqKafkaCheckExecute(t->fn);
	(void) OidFunctionCall1(t->fn, CStringGetTextDatum(t->name));
}

MqKafkaOutcome
MqKafkaDeleteTopics(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int32		n = MqKafkaReadArrayLen(r, false, 2);
	DeleteTopic *topics;
	char	  **names;
	bool	   *dup;
	MqKafkaAdminWalk walk;
	static const Oid drop_args[] = {TEXTOID};

	if (n < 0)
		return MQK_CLOSE;
	topics = palloc0(sizeof(DeleteTopic) * (n + 1));
	names = palloc0(sizeof(char *) * (n + 1));
	for (int i = 0; i < n && !r->failed; i++)
		if ((topics[i].name = names[i] = MqKafkaReadString(r, false, NULL)) == NULL)
			return MQK_CLOSE;
	(void) MqKafkaReadInt32(r); /* timeout_ms: a drop is whole at commit; MQK_REQUEST_TIME_MS bounds the request */
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaAdminBegin(&walk, req, "mq_drop_topic", lengthof(drop_args), drop_args,
					  "Kafka DeleteTopics topic");
	walk.elsewhere_ok = true;
	dup = MqKafkaDuplicates(names, n);
	for (int i = 0; i < n; i++)
	{
		DeleteTopic *t = &topics[i];
		char	   *message;

		if (dup[i])
			t->error = MQK_INVALID_REQUEST;
		else if (!OidIsValid(walk.fn))
			t->error = MQK_UNKNOWN_TOPIC_OR_PARTITION;
		else
		{
			/* a replicated topic held elsewhere is dropped through etcd (elsewhere_ok) */
			t->fn = walk.fn;
			t->error = MqKafkaAdminTry(&walk, t->name, NULL, delete_topic, t, NULL, true, &message);
		}
	}

	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, false, n);
	for (int i = 0; i < n; i++)
	{
		MqKafkaWriteString(out, false, topics[i].name);
		MqKafkaWriteInt16(out, topics[i].error);
	}
	return MQK_RESPOND;
}
