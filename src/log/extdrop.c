/*-------------------------------------------------------------------------
 *
 * extdrop.c
 *		DROP EXTENSION mqlog with thousands of segments, at the default
 *		lock settings: the segments go first in bounded transactions.
 *
 * DROP EXTENSION drops every object that depends on the extension in its
 * one transaction, and dropping a segment relation takes three locks (the
 * relation, its row type and its array type) that are held to the end:
 * past a few thousand segments the shared lock table
 * (max_locks_per_transaction x (MaxBackends + max_prepared_transactions))
 * runs out and the command fails with 53200.  A DBA must never have to
 * raise a lock setting to drop mqlog, so the utility hook (am.c) calls
 * MqDropExtensionPrepare first:
 *
 *	- At top level outside a transaction block (where VACUUM and CREATE
 *	  INDEX CONCURRENTLY may commit: the conditions of
 *	  PreventInTransactionBlock), it commits the statement's transaction
 *	  and runs mqlog._drop_extension_step in transactions of its own until
 *	  the step says the rest is small, announcing the drop to waiting polls
 *	  before each one (they give way, groups/consumer.c).  Each step drops
 *	  whole topics as mq_drop_topic does (at most mqlog._drop_batch()
 *	  relations dropped, the rest unlinked as orphans), then the orphans a
 *	  batch at a time, so every committed step leaves an extension whose
 *	  remaining topics work and whose orphans the sweep drops: an error, a
 *	  cancel or a kill -9 between steps loses nothing but what was meant to
 *	  go, and running the DROP again goes on.  The real DROP EXTENSION then
 *	  runs, in a new transaction, on what is left.
 *	- Inside a transaction block (or a function, or with other extensions
 *	  named beside mqlog), nothing can commit early: a drop that would need
 *	  more locks than the lock table is sized for is refused up front with
 *	  25001, naming the count, instead of failing at the lock table.
 *
 * Without CASCADE the real command refuses while topics exist, dropping
 * nothing: the steps then touch only orphans, and only once no topic is
 * left.  Replicated topics are never dropped early (see the step's
 * comment in the SQL script); their segments are the real command's, and
 * if they alone are too many it is refused up front as well.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/snapmgr.h"

#include "base/spi.h"
#include "log/am.h"
#include "log/partition.h"

/* locks DROP takes per segment relation: the relation, its row type, its array type */
#define MQ_LOCKS_PER_SEGMENT	3

/* the relations below mqlog's functions' reach: what DROP EXTENSION would drop */
typedef struct DropCounts
{
	int64		segments;		/* relations of the access method */
	int64		replicated;		/* of them, in chains of replicated topics */
	int64		topics;
	int			batch;			/* relations one transaction drops: mqlog._drop_batch() */
} DropCounts;

static void
count_segments(DropCounts *c)
{
	MqSpi		spi;
	bool		isnull;

	MqSpiBegin(&spi, true);
	if (SPI_execute("SELECT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c"
					"         JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam"
					"        WHERE a.amname OPERATOR(pg_catalog.=) 'mqlog'),"
					"       (SELECT pg_catalog.count(*) FROM mqlog.segment s"
					"         JOIN mqlog.replicated_topic r ON r.topic_id OPERATOR(pg_catalog.=) s.topic_id),"
					"       (SELECT pg_catalog.count(*) FROM mqlog.topic), mqlog._drop_batch()",
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog: counting the segments to drop failed");
	c->segments = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	c->replicated = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	c->topics = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	c->batch = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	MqSpiEnd(&spi);
}

/* the lock table's size, as PostgreSQL sizes it (lock.c, NLOCKENTS) */
static int64
lock_table_size(void)
{
	return (int64) max_locks_per_xact * (MaxBackends + max_prepared_xacts);
}

static bool
too_many(int64 segments)
{
	return segments * MQ_LOCKS_PER_SEGMENT > lock_table_size();
}

static void
refuse_in_block(const DropCounts *c) pg_attribute_noreturn();

static void
refuse_in_block(const DropCounts *c)
{
	ereport(ERROR,
			(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
			 errmsg("DROP EXTENSION mqlog cannot drop " INT64_FORMAT " segment relations inside a transaction block",
					c->segments),
			 errdetail("Dropping them in one transaction takes about " INT64_FORMAT " locks; the shared lock table is sized for " INT64_FORMAT " (max_locks_per_transaction x (max_connections + background processes + max_prepared_transactions)).",
					   c->segments * MQ_LOCKS_PER_SEGMENT, lock_table_size()),
			 errhint("Run DROP EXTENSION mqlog by itself outside a transaction block, where it drops the segments in transactions of %d first, or drop the big topics with mq_drop_topic() first.",
					 c->batch)));
}

/* one step in a transaction of its own; true while there is more */
static bool
run_step(bool cascade)
{
	MqSpi		spi;
	Oid			types[1] = {BOOLOID};
	Datum		values[1] = {BoolGetDatum(cascade)};
	bool		more;
	bool		isnull;

	StartTransactionCommand();
	/* a cancel between steps ends the command here, inside a transaction */
	CHECK_FOR_INTERRUPTS();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* polls that began since the last step give way too */
	MqAnnounceDdl(0);
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT mqlog._drop_extension_step($1)", 1, types, values, NULL,
							  false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "mqlog: a step of DROP EXTENSION failed");
	more = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MqSpiEnd(&spi);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return more;
}

/*
 * Called by the utility hook before DROP EXTENSION mqlog runs, by a role
 * that may drop it.  batched: the statement runs by itself at top level,
 * outside a transaction block, so it may commit on its way.  Returns with
 * the caller's memory context current and, if it committed, in a new
 * transaction with a snapshot of its own pushed (*pushed), which the
 * caller pops after the statement.
 */
void
MqDropExtensionPrepare(bool cascade, bool batched, bool *pushed)
{
	MemoryContext caller = CurrentMemoryContext;
	DropCounts	c;
	bool		more;

	*pushed = false;
	count_segments(&c);
	/*
	 * Without CASCADE, topics make the real command refuse, dropping
	 * nothing; but it locks every dependent object before it says so, and
	 * that alone can fill the lock table.
	 */
	if (!cascade && c.topics > 0)
	{
		if (too_many(c.segments))
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop extension mqlog because other objects depend on it"),
					 errdetail(INT64_FORMAT " topics with " INT64_FORMAT " segment relations depend on it.",
							   c.topics, c.segments),
					 errhint("Use DROP ... CASCADE to drop the dependent objects too.")));
		return;
	}
	if (!batched)
	{
		if (too_many(c.segments))
			refuse_in_block(&c);
		return;
	}
	/*
	 * With CASCADE a few segments go with the extension; without, orphans
	 * (all that can be left once no topic is) would make it refuse, and
	 * they are mqlog's to drop.
	 */
	if (c.segments == 0 || (cascade && c.segments <= c.batch))
		return;
	if (cascade && too_many(c.replicated))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("DROP EXTENSION mqlog cannot drop the " INT64_FORMAT " segment relations of replicated topics in one transaction",
						c.replicated),
				 errdetail("Dropping them takes about " INT64_FORMAT " locks; the shared lock table is sized for " INT64_FORMAT ". A replicated topic is dropped with the extension in one transaction: dropped early, the cluster worker would create it again from etcd.",
						   c.replicated * MQ_LOCKS_PER_SEGMENT, lock_table_size()),
				 errhint("Drop the big replicated topics with mq_drop_topic() first (that drops them on every node).")));

	/* as vacuum() does: the statement's transaction ends here */
	if (ActiveSnapshotSet())
		PopActiveSnapshot();
	CommitTransactionCommand();
	do
		more = run_step(cascade);
	while (more);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	*pushed = true;
	MemoryContextSwitchTo(caller);
}
