/*-------------------------------------------------------------------------
 *
 * kafka_holds.c
 *		An open Kafka transaction holds the last stable offset of each
 *		partition it wrote to at its first offset there: an entry of the
 *		partition's in-flight list (partition.c), which is shared memory
 *		and so lost at a restart.  Here the holds of the transactions still
 *		open are put back from the coordinator's table
 *		(mqlog.kafka_transaction_partition, kafka/txn_coordinator.c), on
 *		each partition before anyone reads it or appends to it.
 *
 * Every reader's last stable offset (MqPartitionLogEnd) and every append
 * (MqPartitionAppend) calls the partition's first-use hook first
 * (MqPartitionFirstUse), which is ensure here and costs a flag test once
 * the partition's entry is checked.  The first caller after the
 * entry is made (after a start) reads the partition's open transactions
 * and puts their holds in (MqPartitionRestoreKafkaHolds), whoever it is:
 * a SQL reader, a Kafka Fetch, the listener's producer, a SQL producer.
 * So the holds are in place within the server's first read, with or
 * without the listener (mqlog.kafka_listen empty).  No transaction can end
 * between the read of the table and the holds: its marker is an append to
 * the partition, and that append checks the partition first.
 *
 * A replicated topic has no Kafka transactions (they are refused on a
 * cluster), nor has a hot standby an in-flight list: those are marked
 * checked without a query.  The query runs as the extension owner (the
 * table is not PUBLIC's).
 *
 * A hot standby's readers stop, without an in-flight list, at the first
 * batch of a PostgreSQL transaction still running in the replayed WAL
 * (logiter.c); MqKafkaOpenFirstOffset gives them the other stop, the
 * first offset of the Kafka transactions open on the partition, from the
 * replayed table.  The reader reads it in a snapshot of its own and then
 * takes no batch of a transaction that snapshot does not see committed:
 * the row of a transaction's first offset is written in the PostgreSQL
 * transaction of its first batch, so a reader that takes the batch saw
 * the row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/snapmgr.h"

#include "base/spi.h"
#include "log/kafka_holds.h"
#include "log/partition.h"
#include "log/topic.h"

/* the open transactions' first offsets on the partition, then their holds */
static void
restore(MqTopic *topic, int32 partition)
{
	MemoryContext caller = CurrentMemoryContext;
	MqSpi		spi;
	Oid			types[2] = {INT4OID, INT4OID};
	Datum		values[2] = {Int32GetDatum(topic->topic_id), Int32GetDatum(partition)};
	int64	   *pids = NULL;
	int64	   *offsets = NULL;
	int			n = 0;

	if (topic->replicas == NULL)
	{
		MqSpiBegin(&spi, true);
		/* read_only false: a snapshot of its own, the newest */
		if (SPI_execute_with_args("SELECT t.producer_id, p.first_offset"
								  " FROM mqlog.kafka_transaction_partition p"
								  " JOIN mqlog.kafka_transaction t USING (transactional_id)"
								  " WHERE p.topic_id OPERATOR(pg_catalog.=) $1"
								  " AND p.\"partition\" OPERATOR(pg_catalog.=) $2"
								  " AND p.first_offset IS NOT NULL",
								  2, types, values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog: could not read the open Kafka transactions");
		n = (int) SPI_processed;
		pids = MemoryContextAlloc(caller, sizeof(int64) * (n + 1));
		offsets = MemoryContextAlloc(caller, sizeof(int64) * (n + 1));
		for (int i = 0; i < n; i++)
		{
			bool		isnull;

			pids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
			offsets[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		}
		MqSpiEnd(&spi);
	}
	MqPartitionRestoreKafkaHolds(topic, partition, n, pids, offsets);
}

/*
 * Before the partition's LSO is read or an append made: the holds of the
 * Kafka transactions open at the start, put back if this partition's
 * entry has not had them yet.  Not where there is no transaction to query
 * in (the next caller does it), nor inside itself (restore reads the log
 * end too).
 */
static void
ensure(MqTopic *topic, int32 partition)
{
	static bool busy = false;

	if (busy || RecoveryInProgress() || !IsTransactionState() || IsInParallelMode())
		return;
	busy = true;
	PG_TRY();
	{
		restore(topic, partition);
	}
	PG_FINALLY();
	{
		busy = false;
	}
	PG_END_TRY();
}

/* when mqlog is loaded */
void
MqKafkaHoldsInit(void)
{
	MqPartitionSetFirstUseHook(ensure);
}

/*
 * The first offset of the Kafka transactions open on the partition as
 * snapshot sees them (PG_INT64_MAX: none), for a hot standby's readers.
 */
int64
MqKafkaOpenFirstOffset(int32 topic_id, int32 partition, Snapshot snapshot)
{
	MqSpi		spi;
	Oid			types[2] = {INT4OID, INT4OID};
	Datum		values[2] = {Int32GetDatum(topic_id), Int32GetDatum(partition)};
	SPIPlanPtr	plan;
	int64		first = PG_INT64_MAX;

	MqSpiBegin(&spi, true);
	plan = SPI_prepare("SELECT pg_catalog.min(p.first_offset) FROM mqlog.kafka_transaction_partition p"
					   " WHERE p.topic_id OPERATOR(pg_catalog.=) $1"
					   " AND p.\"partition\" OPERATOR(pg_catalog.=) $2",
					   2, types);
	if (plan == NULL ||
		SPI_execute_snapshot(plan, values, NULL, snapshot, InvalidSnapshot, true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not read the open Kafka transactions");
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			first = DatumGetInt64(d);
	}
	MqSpiEnd(&spi);
	return first;
}
