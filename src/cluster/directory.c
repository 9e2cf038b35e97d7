/*-------------------------------------------------------------------------
 *
 * directory.c
 *		Every replicated topic of the cluster, held here or not: this
 *		node's copy of etcd's topics/ and partitions/ in
 *		mqlog.cluster_partition, written by the cluster sync worker each
 *		round and read by the Kafka listener, whose Metadata names the
 *		leaders of topics this node holds no replica of.
 *
 * Why a catalog table and not shared memory: the cluster's topics and
 * partitions have no bound known at server start (shared memory would need
 * a setting, and a topic beyond it would silently vanish from Metadata),
 * and a table costs the listener memory only for the request that reads
 * it.  The worker already reads all of topics/ and partitions/ every round
 * for its own topics; it hands the complete topics here, and only rows
 * whose etcd key changed (mod_revision or the topic's uuid) are written,
 * so an idle cluster writes nothing.  A topic still being written to etcd
 * (fewer partition keys than partitions) keeps its old rows until it is
 * whole.  The copy is as fresh as one round of the worker (a second), as
 * mqlog.replica_state is for local topics.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "base/spi.h"
#include "cluster/json.h"
#include "cluster/metadata.h"

#define DIRECTORY_ROW \
	"x(topic pg_catalog.text, \"partition\" pg_catalog.int4, uuid pg_catalog.text," \
	" replicas pg_catalog.text[], leader pg_catalog.text, leader_epoch pg_catalog.int4," \
	" isr pg_catalog.text[], mod_revision pg_catalog.int8)"

/*
 * Make mqlog.cluster_partition hold the given topics (MqClusterTopic *,
 * each whole) and no other, but for the rows of the topics named in
 * partial (char *: still being written to etcd), left as they are.  Only
 * rows that differ from etcd (mod_revision, uuid) are written.  The caller
 * runs in a transaction, connected to SPI, as the cluster sync worker (a
 * role that may write the catalog).
 */
void
MqClusterDirectoryStore(List *topics, List *partial)
{
	StringInfoData buf;
	ListCell   *lc;
	Oid			types[2] = {JSONBOID, TEXTARRAYOID};
	Datum		values[2];
	Datum	   *names = palloc(sizeof(Datum) * (list_length(partial) + 1));
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	foreach(lc, topics)
	{
		MqClusterTopic *t = lfirst(lc);
		ListCell   *pc;

		foreach(pc, t->parts)
		{
			MqPartitionMeta *p = lfirst(pc);

			appendStringInfoString(&buf, first ? "{" : ",{");
			first = false;
			MqJsonAppendField(&buf, true, "topic", t->meta->name);
			appendStringInfo(&buf, ",\"partition\":%d", p->partition);
			MqJsonAppendField(&buf, false, "uuid", t->meta->uuid);
			appendStringInfoString(&buf, ",\"replicas\":");
			MqClusterAppendNames(&buf, p->replicas);
			MqJsonAppendField(&buf, false, "leader", p->leader);
			appendStringInfo(&buf, ",\"leader_epoch\":%d,\"isr\":", p->leader_epoch);
			MqClusterAppendNames(&buf, p->isr);
			appendStringInfo(&buf, ",\"mod_revision\":" INT64_FORMAT "}", p->mod_revision);
		}
	}
	appendStringInfoChar(&buf, ']');
	values[0] = DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
	foreach(lc, partial)
		names[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	values[1] = PointerGetDatum(construct_array(names, list_length(partial), TEXTOID,
												-1, false, TYPALIGN_INT));

	if (SPI_execute_with_args("DELETE FROM mqlog.cluster_partition c WHERE NOT EXISTS ("
							  " SELECT FROM pg_catalog.jsonb_to_recordset($1) AS " DIRECTORY_ROW
							  " WHERE x.topic OPERATOR(pg_catalog.=) c.topic"
							  "   AND x.\"partition\" OPERATOR(pg_catalog.=) c.\"partition\")"
							  " AND NOT c.topic OPERATOR(pg_catalog.=) ANY ($2)",
							  2, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog cluster sync: could not delete from mqlog.cluster_partition");
	if (SPI_execute_with_args("INSERT INTO mqlog.cluster_partition AS c"
							  " (topic, \"partition\", uuid, replicas, leader, leader_epoch, isr, mod_revision)"
							  " SELECT x.topic, x.\"partition\", x.uuid, x.replicas, x.leader,"
							  "        x.leader_epoch, x.isr, x.mod_revision"
							  "   FROM pg_catalog.jsonb_to_recordset($1) AS " DIRECTORY_ROW
							  "  WHERE NOT EXISTS (SELECT FROM mqlog.cluster_partition o"
							  "   WHERE o.topic OPERATOR(pg_catalog.=) x.topic"
							  "     AND o.\"partition\" OPERATOR(pg_catalog.=) x.\"partition\""
							  "     AND o.uuid OPERATOR(pg_catalog.=) x.uuid"
							  "     AND o.mod_revision OPERATOR(pg_catalog.=) x.mod_revision)"
							  " ON CONFLICT (topic, \"partition\") DO UPDATE"
							  " SET uuid = excluded.uuid, replicas = excluded.replicas,"
							  "     leader = excluded.leader, leader_epoch = excluded.leader_epoch,"
							  "     isr = excluded.isr, mod_revision = excluded.mod_revision",
							  1, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "mqlog cluster sync: could not write mqlog.cluster_partition");
}

static List *
text_array(Datum d)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	List	   *l = NIL;

	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			l = lappend(l, TextDatumGetCString(elems[i]));
	return l;
}

/*
 * The replicated topics of the cluster as this node last copied them
 * (MqClusterTopic *, in the database's order of names, each with all its
 * partitions in order), or the
 * one named (NULL: all).  Read as the extension owner: the table is not
 * readable by PUBLIC.  Nothing is cached: the answer lives in the
 * caller's memory context.
 */
List *
MqClusterDirectoryRead(const char *name)
{
	MemoryContext outer = CurrentMemoryContext;
	MqSpi		spi;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	List	   *result = NIL;
	MqClusterTopic *cur = NULL;
	int			rc;

	MqSpiBegin(&spi, true);
	if (name != NULL)
	{
		values[0] = CStringGetTextDatum(name);
		rc = SPI_execute_with_args("SELECT c.topic, c.\"partition\", c.uuid, c.replicas, c.leader,"
								   "       c.leader_epoch, c.isr"
								   "  FROM mqlog.cluster_partition c"
								   " WHERE c.topic OPERATOR(pg_catalog.=) $1"
								   " ORDER BY c.\"partition\"",
								   1, types, values, NULL, true, 0);
	}
	else
		rc = SPI_execute("SELECT c.topic, c.\"partition\", c.uuid, c.replicas, c.leader,"
						 "       c.leader_epoch, c.isr"
						 "  FROM mqlog.cluster_partition c"
						 " ORDER BY c.topic, c.\"partition\"", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not read mqlog.cluster_partition");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(outer);
		char	   *topic = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		MqPartitionMeta *p = palloc0(sizeof(MqPartitionMeta));

		if (cur == NULL || strcmp(cur->meta->name, topic) != 0)
		{
			cur = palloc0(sizeof(MqClusterTopic));
			cur->meta = palloc0(sizeof(MqTopicMeta));
			cur->meta->name = topic;
			cur->meta->uuid = SPI_getvalue(tup, desc, 3);
			result = lappend(result, cur);
		}
		p->partition = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		p->replicas = text_array(SPI_getbinval(tup, desc, 4, &isnull));
		p->leader = SPI_getvalue(tup, desc, 5);
		p->leader_epoch = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
		p->isr = text_array(SPI_getbinval(tup, desc, 7, &isnull));
		cur->parts = lappend(cur->parts, p);
		cur->meta->partitions = list_length(cur->parts);
		MemoryContextSwitchTo(old);
	}
	MqSpiEnd(&spi);
	return result;
}
