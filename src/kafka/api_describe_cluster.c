/*-------------------------------------------------------------------------
 *
 * api_describe_cluster.c
 *		DescribeCluster (key 60, v0-v1, always flexible) and
 *		DescribeLogDirs (key 35, v0-v4, flexible from v2): what Kafka's
 *		admin tools show of the brokers and of where their logs are.
 *
 * DescribeCluster answers what Metadata answers of the cluster: its id,
 * its controller (the listed broker of the lowest id) and the listed
 * brokers (brokers.c).  Only brokers are described: a request for the
 * controllers' endpoints (v1's endpoint_type 2) is UNSUPPORTED_ENDPOINT_TYPE,
 * mqlog having no controller quorum of its own.  Authorized operations
 * are not computed (INT32_MIN, Kafka's "not asked").
 *
 * DescribeLogDirs answers one log directory, the PostgreSQL data
 * directory the segments are in, with the partitions of this node the role
 * may describe (mqlog.partitions, read as the request's role): each with
 * its size in bytes (size_bytes, whole pages of its segments) and its
 * offset lag (log end offset less high watermark: above 0 while the
 * in-sync replicas of a replicated partition catch up).  The directory's
 * path is shown to a role that may read the data_directory setting
 * (superuser, pg_read_all_settings), as SHOW would; other roles see the
 * setting's name in its place.  Named partitions this node does not have
 * are left out, as a Kafka broker leaves out those it does not host.
 * The work is one query over the partitions asked for (each once, however
 * often the request names it), as a SQL session would read the view.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "base/spi.h"
#include "kafka/kafka_internal.h"

/* DescribeCluster's endpoint_type: brokers (the only one mqlog has) */
#define ENDPOINT_BROKERS 1

MqKafkaOutcome
MqKafkaDescribeCluster(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	int8		endpoint_type = ENDPOINT_BROKERS;
	MqKafkaBroker *brokers;
	int			nbrokers;
	int			nlisted = 0;

	(void) MqKafkaReadInt8(r);	/* include_cluster_authorized_operations */
	if (v >= 1)
		endpoint_type = MqKafkaReadInt8(r);
	MqKafkaSkipTags(r, true);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	if (endpoint_type != ENDPOINT_BROKERS)
	{
		MqKafkaWriteInt16(out, MQK_UNSUPPORTED_ENDPOINT_TYPE);
		MqKafkaWriteString(out, true,
						   psprintf("endpoint type %d is not served: mqlog's listeners are brokers (1), it has no controller quorum",
									endpoint_type));
		MqKafkaWriteInt8(out, endpoint_type);
		MqKafkaWriteString(out, true, MqKafkaClusterId());
		MqKafkaWriteInt32(out, -1);
		MqKafkaWriteArrayLen(out, true, 0);
		MqKafkaWriteInt32(out, PG_INT32_MIN);
		MqKafkaWriteTags(out, true);
		return MQK_RESPOND;
	}
	brokers = MqKafkaBrokers(&nbrokers);
	for (int i = 0; i < nbrokers; i++)
		nlisted += brokers[i].listed;
	MqKafkaWriteInt16(out, MQK_NONE);
	MqKafkaWriteString(out, true, NULL);	/* error_message */
	if (v >= 1)
		MqKafkaWriteInt8(out, endpoint_type);
	MqKafkaWriteString(out, true, MqKafkaClusterId());
	MqKafkaWriteInt32(out, MqKafkaControllerId(brokers, nbrokers));
	MqKafkaWriteArrayLen(out, true, nlisted);
	for (int i = 0; i < nbrokers; i++)
	{
		if (!brokers[i].listed)
			continue;
		MqKafkaWriteInt32(out, brokers[i].id);
		MqKafkaWriteString(out, true, brokers[i].host);
		MqKafkaWriteInt32(out, brokers[i].port);
		MqKafkaWriteString(out, true, NULL);	/* rack */
		MqKafkaWriteTags(out, true);
	}
	MqKafkaWriteInt32(out, PG_INT32_MIN);	/* cluster_authorized_operations */
	MqKafkaWriteTags(out, true);
	return MQK_RESPOND;
}

/* a partition of the answer */
typedef struct LogDirPartition
{
	char	   *topic;
	int32		partition;
	int64		size;
	int64		lag;
} LogDirPartition;

/*
 * The partitions asked for (all when topics is NULL: the request's null
 * list), as mqlog.partitions shows them to the request's role, by topic
 * and partition; *count of them
 */
static LogDirPartition *
read_partitions(ArrayType *topics, ArrayType *parts, int *count)
{
	MemoryContext outer = CurrentMemoryContext;
	Oid			types[2] = {TEXTARRAYOID, INT4ARRAYOID};
	Datum		values[2] = {PointerGetDatum(topics), PointerGetDatum(parts)};
	LogDirPartition *result;
	MqSpi		spi;

	MqSpiBegin(&spi, false);
	if (SPI_execute_with_args(topics == NULL ?
							  "SELECT p.topic, p.\"partition\", p.size_bytes,"
							  " p.log_end_offset OPERATOR(pg_catalog.-) p.high_watermark"
							  " FROM mqlog.partitions p ORDER BY 1, 2" :
							  "SELECT p.topic, p.\"partition\", p.size_bytes,"
							  " p.log_end_offset OPERATOR(pg_catalog.-) p.high_watermark"
							  " FROM mqlog.partitions p"
							  " WHERE p.topic OPERATOR(pg_catalog.=) ANY ($1)"
							  " AND (p.topic, p.\"partition\") IN (SELECT w.t, w.p FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) w(t, p))"
							  " ORDER BY 1, 2",
							  topics == NULL ? 0 : 2, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: mqlog.partitions could not be read");
	result = MemoryContextAllocZero(outer, sizeof(LogDirPartition) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		lag;

		result[i].topic = MemoryContextStrdup(outer, SPI_getvalue(tup, desc, 1));
		result[i].partition = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		result[i].size = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		lag = SPI_getbinval(tup, desc, 4, &isnull);
		result[i].lag = isnull ? 0 : Max(DatumGetInt64(lag), 0);
	}
	*count = (int) SPI_processed;
	MqSpiEnd(&spi);
	return result;
}

MqKafkaOutcome
MqKafkaDescribeLogDirs(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 3 : 6);
	ArrayBuildState *topics = NULL;
	ArrayBuildState *parts = NULL;
	LogDirPartition *found;
	int			count;
	int			ntopics = 0;

	if (n >= 0)
	{
		topics = initArrayResult(TEXTOID, CurrentMemoryContext, false);
		parts = initArrayResult(INT4OID, CurrentMemoryContext, false);
	}
	for (int i = 0; i < n && !r->failed; i++)
	{
		char	   *name = MqKafkaReadString(r, flex, NULL);
		int32		np = MqKafkaReadArrayLen(r, flex, 4);

		if (r->failed || name == NULL || np < 0)
			return MQK_CLOSE;
		for (int p = 0; p < np && !r->failed; p++)
		{
			accumArrayResult(topics, CStringGetTextDatum(name), false, TEXTOID, CurrentMemoryContext);
			accumArrayResult(parts, Int32GetDatum(MqKafkaReadInt32(r)), false, INT4OID,
							 CurrentMemoryContext);
		}
		MqKafkaSkipTags(r, flex);
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	found = read_partitions(topics ? DatumGetArrayTypeP(makeArrayResult(topics, CurrentMemoryContext)) : NULL,
							parts ? DatumGetArrayTypeP(makeArrayResult(parts, CurrentMemoryContext)) : NULL,
							&count);

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	if (v >= 3)
		MqKafkaWriteInt16(out, MQK_NONE);
	MqKafkaWriteArrayLen(out, flex, 1);
	MqKafkaWriteInt16(out, MQK_NONE);
	MqKafkaWriteString(out, flex,
					   has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_SETTINGS) ? DataDir : "data_directory");

	for (int i = 0; i < count; i++)
		if (i == 0 || strcmp(found[i].topic, found[i - 1].topic) != 0)
			ntopics++;
	MqKafkaWriteArrayLen(out, flex, ntopics);
	for (int i = 0; i < count;)
	{
		int			end = i;

		while (end < count && strcmp(found[end].topic, found[i].topic) == 0)
			end++;
		MqKafkaWriteString(out, flex, found[i].topic);
		MqKafkaWriteArrayLen(out, flex, end - i);
		for (; i < end; i++)
		{
			MqKafkaWriteInt32(out, found[i].partition);
			MqKafkaWriteInt64(out, found[i].size);
			MqKafkaWriteInt64(out, found[i].lag);
			MqKafkaWriteInt8(out, 0);	/* is_future_key */
			MqKafkaWriteTags(out, flex);
		}
		MqKafkaWriteTags(out, flex);
	}
	if (v >= 4)
	{
		MqKafkaWriteInt64(out, -1); /* total_bytes: not known */
		MqKafkaWriteInt64(out, -1); /* usable_bytes */
	}
	MqKafkaWriteTags(out, flex);	/* the log dir's */
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
