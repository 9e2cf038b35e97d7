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
 * The view is read for LOG_DIR_CHUNK topics at a time (each partition
 * once, however often the request names it), as a SQL session would read
 * it, until the request has run for MQK_REQUEST_TIME_MS: the topics not
 * read by then are left out, and the directory's error is
 * REQUEST_TIMED_OUT (a database of many thousands of partitions is
 * described a part at a time, by naming its topics).  A read that fails
 * (the view's own errors) ends the answer the same way, with its error.
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
#include "log/topic.h"
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
	MqKafkaWriteInt16(out, MQK_NONE);
	MqKafkaWriteString(out, true, NULL);	/* error_message */
	if (v >= 1)
		MqKafkaWriteInt8(out, endpoint_type);
	MqKafkaWriteString(out, true, MqKafkaClusterId());
	MqKafkaWriteInt32(out, MqKafkaControllerId(brokers, nbrokers));
	MqKafkaWriteBrokers(out, brokers, nbrokers, true, true);
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

/* a partition a request names */
typedef struct WantedPartition
{
	char	   *topic;
	int32		partition;
} WantedPartition;

static int
wanted_cmp(const void *a, const void *b)
{
	const WantedPartition *x = a;
	const WantedPartition *y = b;
	int			c = strcmp(x->topic, y->topic);

	return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/*
 * Topics a read of mqlog.partitions covers: at most so many, and no more
 * once their partitions reach LOG_DIR_PARTITIONS (a partition costs about
 * 40 us, its segments' sizes and its offsets), so that a read is a small
 * part of MQK_REQUEST_TIME_MS (but a topic of 10000 partitions, read
 * alone); and its plan is the view's per-topic one (a read of every topic
 * at once is planned for thousands of partitions, and JIT-compiled for a
 * few hundred milliseconds)
 */
#define LOG_DIR_CHUNK 64
#define LOG_DIR_PARTITIONS 1000

static ArrayType *
text_array(char **names, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * (n + 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(names[i]);
	return construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * One read of mqlog.partitions as the request's role, in a subtransaction
 * (MqKafkaTryAdmin: an error of the view, such as more partitions than
 * mqlog.max_partitions, is the directory's error): the partitions of
 * topics names[0 .. n - 1] it may describe (only those of wanted[0 ..
 * nwanted - 1] when wanted is given), by topic and partition, appended to
 * *found in outer
 */
typedef struct LogDirRead
{
	char	  **names;
	int			n;
	WantedPartition *wanted;
	int			nwanted;
	List	  **found;
	MemoryContext outer;
} LogDirRead;

static void
read_partitions(void *arg)
{
	LogDirRead *rd = arg;
	char	  **names = rd->names;
	int			n = rd->n;
	WantedPartition *wanted = rd->wanted;
	int			nwanted = rd->nwanted;
	MemoryContext outer = rd->outer;
	Oid			types[3] = {TEXTARRAYOID, TEXTARRAYOID, INT4ARRAYOID};
	Datum		values[3];
	MqSpi		spi;

	values[0] = PointerGetDatum(text_array(names, n));
	if (wanted != NULL)
	{
		char	  **topics = palloc(sizeof(char *) * (nwanted + 1));
		Datum	   *parts = palloc(sizeof(Datum) * (nwanted + 1));

		for (int i = 0; i < nwanted; i++)
		{
			topics[i] = wanted[i].topic;
			parts[i] = Int32GetDatum(wanted[i].partition);
		}
		values[1] = PointerGetDatum(text_array(topics, nwanted));
		values[2] = PointerGetDatum(construct_array(parts, nwanted, INT4OID, 4, true, TYPALIGN_INT));
	}

	MqSpiBegin(&spi, false);
	if (SPI_execute_with_args(wanted == NULL ?
							  "SELECT p.topic, p.\"partition\", p.size_bytes,"
							  " p.log_end_offset OPERATOR(pg_catalog.-) p.high_watermark"
							  " FROM mqlog.partitions p WHERE p.topic OPERATOR(pg_catalog.=) ANY ($1)"
							  " ORDER BY 1, 2" :
							  "SELECT p.topic, p.\"partition\", p.size_bytes,"
							  " p.log_end_offset OPERATOR(pg_catalog.-) p.high_watermark"
							  " FROM mqlog.partitions p WHERE p.topic OPERATOR(pg_catalog.=) ANY ($1)"
							  " AND (p.topic, p.\"partition\") IN (SELECT w.t, w.p FROM"
							  " ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) w(t, p))"
							  " ORDER BY 1, 2",
							  wanted == NULL ? 1 : 3, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: mqlog.partitions could not be read");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		LogDirPartition *lp = MemoryContextAlloc(outer, sizeof(LogDirPartition));
		bool		isnull;
		Datum		lag;
		MemoryContext oldcxt;

		lp->topic = MemoryContextStrdup(outer, SPI_getvalue(tup, desc, 1));
		lp->partition = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		lp->size = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
		lag = SPI_getbinval(tup, desc, 4, &isnull);
		lp->lag = isnull ? 0 : Max(DatumGetInt64(lag), 0);
		oldcxt = MemoryContextSwitchTo(outer);
		*rd->found = lappend(*rd->found, lp);
		MemoryContextSwitchTo(oldcxt);
	}
	MqSpiEnd(&spi);
}

static inline LogDirPartition *
found_at(List *found, int i)
{
	return (LogDirPartition *) list_nth(found, i);
}

MqKafkaOutcome
MqKafkaDescribeLogDirs(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		n = MqKafkaReadArrayLen(r, flex, flex ? 3 : 6);
	WantedPartition *wanted = NULL;
	int			nwanted = 0;
	char	  **names;
	int			nnames = 0;
	List	   *found = NIL;
	int16		dir_error = MQK_NONE;
	int			attempted = 0;
	int			ntopics = 0;
	int			capacity = 0;
	MqKafkaTopicSet known;
	LogDirRead	rd = {.found = &found, .outer = CurrentMemoryContext};
	char	   *message;

	for (int i = 0; i < n && !r->failed; i++)
	{
		char	   *name = MqKafkaReadString(r, flex, NULL);
		int32		np = MqKafkaReadArrayLen(r, flex, 4);

		if (r->failed || name == NULL || np < 0)
			return MQK_CLOSE;
		if (nwanted + np >= capacity)
		{
			capacity = Max(2 * capacity, nwanted + np + 16);
			wanted = wanted ? repalloc(wanted, sizeof(WantedPartition) * capacity) :
				palloc(sizeof(WantedPartition) * capacity);
		}
		for (int p = 0; p < np && !r->failed; p++)
		{
			wanted[nwanted].topic = name;
			wanted[nwanted++].partition = MqKafkaReadInt32(r);
		}
		MqKafkaSkipTags(r, flex);
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	MqKafkaKnownTopics(&known);
	if (n < 0)
	{
		/* all topics: each read covers a run of their names */
		names = known.names;
		nnames = known.n;
	}
	else
	{
		/*
		 * the partitions named, each once, by topic, of the topics there are
		 * (a made-up name costs no read): a read covers a run of them
		 */
		int			kept = 0;

		if (wanted != NULL)
			qsort(wanted, nwanted, sizeof(WantedPartition), wanted_cmp);
		names = palloc(sizeof(char *) * (nwanted + 1));
		for (int i = 0; i < nwanted; i++)
		{
			if ((kept > 0 && wanted_cmp(&wanted[i], &wanted[kept - 1]) == 0) ||
				!MqKafkaKnownTopic(&known, wanted[i].topic))
				continue;
			wanted[kept++] = wanted[i];
			if (nnames == 0 || strcmp(names[nnames - 1], wanted[i].topic) != 0)
				names[nnames++] = wanted[i].topic;
		}
		nwanted = kept;
	}
	for (int i = 0, w = 0; i < nnames;)
	{
		int			chunk = 0;
		int64		partitions = 0;
		int			first = w;

		/* what is not read by then is left out, and the directory says so */
		if (MqKafkaOutOfTime(req, &attempted))
		{
			dir_error = MQK_REQUEST_TIMED_OUT;
			break;
		}
		while (i + chunk < nnames && chunk < LOG_DIR_CHUNK && partitions < LOG_DIR_PARTITIONS)
		{
			MqTopic    *topic = MqTopicLookup(names[i + chunk++], true);

			partitions += topic ? topic->partitions : 0;
		}
		while (wanted != NULL && w < nwanted && strcmp(wanted[w].topic, names[i + chunk - 1]) <= 0)
			w++;
		rd.names = &names[i];
		rd.n = chunk;
		rd.wanted = n < 0 ? NULL : &wanted[first];
		rd.nwanted = w - first;
		dir_error = MqKafkaTryAdmin(read_partitions, &rd, NULL, true, &message);
		if (dir_error != MQK_NONE)
			break;
		i += chunk;
	}

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	if (v >= 3)
		MqKafkaWriteInt16(out, MQK_NONE);
	MqKafkaWriteArrayLen(out, flex, 1);
	MqKafkaWriteInt16(out, dir_error);
	MqKafkaWriteString(out, flex,
					   has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_SETTINGS) ? DataDir : "data_directory");
	for (int i = 0; i < list_length(found); i++)
		if (i == 0 || strcmp(found_at(found, i)->topic, found_at(found, i - 1)->topic) != 0)
			ntopics++;
	MqKafkaWriteArrayLen(out, flex, ntopics);
	for (int i = 0; i < list_length(found);)
	{
		int			end = i;

		/* a topic's run of partitions */
		while (end < list_length(found) && strcmp(found_at(found, end)->topic, found_at(found, i)->topic) == 0)
			end++;
		MqKafkaWriteString(out, flex, found_at(found, i)->topic);
		MqKafkaWriteArrayLen(out, flex, end - i);
		for (; i < end; i++)
		{
			LogDirPartition *part = found_at(found, i);

			MqKafkaWriteInt32(out, part->partition);
			MqKafkaWriteInt64(out, part->size);
			MqKafkaWriteInt64(out, part->lag);
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
