/*-------------------------------------------------------------------------
 *
 * topic_admin.c
 *		Topic administration entry points: mq_create_topic, mq_alter_topic,
 *		mq_add_partitions, mq_drop_topic.
 *
 * The catalog work itself is PL/pgSQL (mqlog._create_topic and friends in
 * the install script), which no ordinary role may execute.  These C entry
 * points stand in front of it because only here is the caller still the
 * current user: a SECURITY DEFINER function cannot tell who called it, so
 * it could neither check the caller's topic privilege nor record who owns
 * a new topic.  Each checks, then runs the internal function as the
 * extension owner with a pinned search_path (MqSpiBegin).
 *
 * A topic with a replication factor above 1 is also a cluster object: its
 * creation and drop are checked against etcd here and written there when
 * the transaction commits (cluster/topics.c); one that this node holds no
 * replica of can be altered and dropped here too, by mqlog_admin
 * (held_elsewhere).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "base/spi.h"
#include "cluster/metadata.h"
#include "log/partition.h"
#include "log/topic.h"
#include "acl/acl.h"

PG_FUNCTION_INFO_V1(mq_create_topic);
PG_FUNCTION_INFO_V1(mq_alter_topic);
PG_FUNCTION_INFO_V1(mq_add_partitions);
PG_FUNCTION_INFO_V1(mq_drop_topic);
PG_FUNCTION_INFO_V1(mq_delete_records);

/*
 * Run "SELECT mqlog._<what>($1, ...)" as the extension owner, with the
 * caller's arguments (nulls included) and, when extra is valid, one more
 * oid argument after them.
 */
static void
call_internal(const char *call, FunctionCallInfo fcinfo, int nargs, const Oid *types,
			  Oid extra)
{
	Oid			argtypes[8];
	Datum		values[8];
	char		nulls[8];
	int			n = nargs;
	MqSpi		spi;
	int			ret;

	Assert(nargs < lengthof(values));
	for (int i = 0; i < nargs; i++)
	{
		argtypes[i] = types[i];
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (OidIsValid(extra))
	{
		argtypes[n] = OIDOID;
		values[n] = ObjectIdGetDatum(extra);
		nulls[n] = ' ';
		n++;
	}
	PreventCommandIfReadOnly(call);
	MqSpiBegin(&spi, true);
	ret = SPI_execute_with_args(call, n, argtypes, values, nulls, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: \"%s\" failed: %s", call, SPI_result_code_string(ret));
	MqSpiEnd(&spi);
}

/* the topic named by argument 0, which the caller may alter */
static MqTopic *
check_alter(FunctionCallInfo fcinfo)
{
	MqTopic    *topic;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic name must not be null")));
	topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	MqTopicCheckPrivilege(topic, MQ_PRIV_ALTER);
	return topic;
}

/*
 * mq_drop_topic or mq_alter_topic (what) of a name this node has no topic
 * of, but that is a replicated topic of the cluster held by other nodes
 * (this node's copy of etcd, mqlog.cluster_partition): its uuid there, for
 * the change to go to etcd at commit (cluster/topics.c), whence the nodes
 * that hold it take it.  The topic's grants and owner are rows of the
 * nodes that hold it, which this node cannot read, so the one role that
 * may change it here is one that may change every topic on every node: a
 * member of mqlog_admin (or a superuser).  NULL when name (argument 0) is
 * no such topic, or this node has a topic of the name.
 */
static char *
held_elsewhere(FunctionCallInfo fcinfo, const char *what)
{
	char	   *name;
	List	   *found;

	if (PG_ARGISNULL(0) || !MqClusterEnabled())
		return NULL;
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (MqTopicLookup(name, true) != NULL || (found = MqClusterDirectoryRead(name)) == NIL)
		return NULL;
	if (!MqIsAdmin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for topic \"%s\"", name),
				 errdetail("This node holds no replica of replicated topic \"%s\", nor its grants: only a member of mqlog_admin may %s it here.",
						   name, what),
				 errhint("%s it at a node that holds it.", strcmp(what, "drop") == 0 ? "Drop" : "Alter")));
	PreventCommandIfReadOnly(what);
	return ((MqClusterTopic *) linitial(found))->meta->uuid;
}

/*
 * Who may create topics is the EXECUTE privilege on mq_create_topic
 * (granted to mqlog_admin); the creator owns the topic.
 */
Datum
mq_create_topic(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID, INT4OID, INT4OID, JSONBOID};
	int			factor = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT32(2);

	MqClusterCheckReplicationFactor(factor);
	call_internal("SELECT mqlog._create_topic($1, $2, $3, $4, $5)", fcinfo, 4, types, GetUserId());
	if (factor > 1)
		MqClusterCreateTopic(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

Datum
mq_alter_topic(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID, JSONBOID};
	char	   *uuid = held_elsewhere(fcinfo, "alter");
	char	   *change = PG_ARGISNULL(1) ? "{}" :
		JsonbToCString(NULL, &PG_GETARG_JSONB_P(1)->root, VARSIZE(PG_GETARG_JSONB_P(1)));
	MqTopic    *topic;
	char	   *name;

	if (uuid != NULL)
	{
		/* held elsewhere: etcd's config changed at commit, nothing here */
		MqClusterAlterTopicByUuid(text_to_cstring(PG_GETARG_TEXT_PP(0)), uuid, change);
		PG_RETURN_VOID();
	}
	topic = check_alter(fcinfo);
	name = pstrdup(topic->name);
	call_internal("SELECT mqlog._alter_topic($1, $2)", fcinfo, 2, types, InvalidOid);
	/* a replicated topic: its config in etcd at commit, for every node */
	MqClusterAlterTopic(name, change);
	PG_RETURN_VOID();
}

Datum
mq_add_partitions(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID, INT4OID};
	MqTopic    *topic = check_alter(fcinfo);
	int			old_count = topic->partitions;
	char	   *name = pstrdup(topic->name);

	call_internal("SELECT mqlog._add_partitions($1, $2)", fcinfo, 2, types, InvalidOid);
	/* a replicated topic: place the new partitions, in etcd at commit */
	MqClusterAddPartitions(name, old_count);
	PG_RETURN_VOID();
}

Datum
mq_drop_topic(PG_FUNCTION_ARGS)
{
	static const Oid types[] = {TEXTOID};
	MqTopic    *topic;
	char	   *uuid = held_elsewhere(fcinfo, "drop");

	if (uuid != NULL)
	{
		MqClusterDropTopicByUuid(text_to_cstring(PG_GETARG_TEXT_PP(0)), uuid);
		PG_RETURN_VOID();
	}
	topic = check_alter(fcinfo);

	/* a replicated topic's etcd keys go when the drop commits */
	MqClusterDropTopic(topic->name, topic->topic_id);
	/* waiting consumers of the topic hold locks the drop needs: wake them */
	MqAnnounceDdl(topic->topic_id);
	call_internal("SELECT mqlog._drop_topic($1)", fcinfo, 1, types, InvalidOid);
	PG_RETURN_VOID();
}

/*
 * mq_delete_records(topic, partition, before_offset): Kafka's
 * DeleteRecords, for a role that may alter the topic.  before_offset is at
 * most the last stable offset (-1: the last stable offset); at or below
 * the log start it changes nothing.  Returns the log start offset.
 *
 * Kafka takes offsets up to the high watermark, past an open
 * transaction's first batch; here the log start never passes an open
 * transaction, Kafka's or SQL's, as retention never does
 * (mq_run_maintenance): its batches have no fate yet, and a Kafka
 * transaction's records are read back from the log when logical decoding
 * meets its COMMIT marker.  With no transaction open the two are the same
 * offset.
 */
Datum
mq_delete_records(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = check_alter(fcinfo);
	int32		partition;
	int64		before;
	int64		lso,
				hw,
				start;
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3];
	MqSpi		spi;
	bool		isnull;

	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("partition and before_offset must not be null")));
	partition = PG_GETARG_INT32(1);
	before = PG_GETARG_INT64(2);
	MqCheckPartition(topic, partition);
	if (topic->replicas != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("mq_delete_records of replicated topic \"%s\" is not supported yet", topic->name),
				 errdetail("Its followers would keep the records: the log start offset does not reach them yet."),
				 errhint("Lower retention.ms or retention.bytes with mq_alter_topic instead.")));
	MqPartitionOffsets(topic, partition, &lso, &hw);
	start = MqLogStartOffset(topic, partition);
	if (before == -1)
		before = lso;
	if (before < 0 || before > hw)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset " INT64_FORMAT " is out of range for partition %d of topic \"%s\"",
						before, partition, topic->name),
				 errdetail("Records can be deleted up to an offset no higher than the high watermark " INT64_FORMAT ".",
						   hw),
				 errhint("Pass -1 for the last stable offset.")));
	if (before > lso)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("offset " INT64_FORMAT " is past the last stable offset " INT64_FORMAT " of partition %d of topic \"%s\"",
						before, lso, partition, topic->name),
				 errdetail("A transaction that is still open, Kafka's or SQL's, wrote offset " INT64_FORMAT "; its records are not deleted before it ends.",
						   lso),
				 errhint("Wait for the transaction to end, or pass -1 for the last stable offset.")));
	if (before <= start)
		PG_RETURN_INT64(start);	/* already deleted, as Kafka answers it */
	PreventCommandIfReadOnly("mq_delete_records");
	values[0] = Int32GetDatum(topic->topic_id);
	values[1] = Int32GetDatum(partition);
	values[2] = Int64GetDatum(before);
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT mqlog._delete_records($1, $2, $3)", 3, types, values, NULL,
							  false, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog: mqlog._delete_records failed");
	start = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MqSpiEnd(&spi);
	PG_RETURN_INT64(start);
}
