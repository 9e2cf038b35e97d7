/*-------------------------------------------------------------------------
 *
 * kafka_marker_horizon.c
 *		When compaction may remove a Kafka transaction's marker: the delete
 *		horizon recorded by the compaction that first found none of the
 *		transaction's batches in the log (mqlog.kafka_marker_horizon),
 *		Kafka's KIP-534 rule.
 *
 * Kafka's cleaner that first finds a marker's transaction empty stamps
 * the marker with a delete horizon (its base timestamp becomes now +
 * delete.retention.ms, with attribute bit 6), and a later cleaning past
 * the horizon drops it.  mqlog keeps the stored bytes of a kept marker as
 * they were and records the horizon in a catalog table instead, in the
 * compaction's PostgreSQL transaction: a row per marker, from that
 * compaction until the marker goes (log/lifecycle.c removes both), or
 * until the log start passes it (mq_run_maintenance, as for
 * mqlog.kafka_aborted_transaction) or its topic is dropped.  A marker's
 * offset names it: a partition's offsets are never given twice where
 * Kafka transactions run (a follower's truncation, the one place where
 * they are, is on a cluster, which serves no transaction).  The queries
 * run as the extension owner (the table is not PUBLIC's), and take the
 * compacted segment's markers only, so their cost is bounded by the
 * segment's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "log/kafka_marker_horizon.h"

/* The arguments every query takes: the partition and the markers' offsets. */
static void
marker_args(Datum *values, int32 topic_id, int32 partition, const int64 *markers, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(markers[i]);
	values[0] = Int32GetDatum(topic_id);
	values[1] = Int32GetDatum(partition);
	values[2] = PointerGetDatum(construct_array(elems, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
}

void
MqMarkerHorizonsLoad(int32 topic_id, int32 partition, const int64 *markers, int n,
					 TimestampTz *horizons)
{
	MqSpi		spi;
	Oid			types[3] = {INT4OID, INT4OID, INT8ARRAYOID};
	Datum		values[3];

	for (int i = 0; i < n; i++)
		horizons[i] = DT_NOBEGIN;
	if (n == 0)
		return;
	marker_args(values, topic_id, partition, markers, n);
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT h.marker_offset, h.delete_horizon"
							  " FROM mqlog.kafka_marker_horizon h"
							  " WHERE h.topic_id OPERATOR(pg_catalog.=) $1"
							  " AND h.\"partition\" OPERATOR(pg_catalog.=) $2"
							  " AND h.marker_offset OPERATOR(pg_catalog.=) ANY ($3)",
							  3, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not read the Kafka markers' delete horizons");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int64		offset = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		TimestampTz horizon = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));

		/* few markers a segment are found empty: a scan is fine */
		for (int i = 0; i < n; i++)
			if (markers[i] == offset)
				horizons[i] = horizon;
	}
	MqSpiEnd(&spi);
}

void
MqMarkerHorizonsRecord(int32 topic_id, int32 partition, const int64 *markers, int n,
					   TimestampTz horizon)
{
	MqSpi		spi;
	Oid			types[4] = {INT4OID, INT4OID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[4];

	marker_args(values, topic_id, partition, markers, n);
	values[3] = TimestampTzGetDatum(horizon);
	MqSpiBegin(&spi, true);
	/*
	 * The counting and the writing call of one compaction both record
	 * (the writing one may not run): the first's horizon stays.
	 */
	if (SPI_execute_with_args("INSERT INTO mqlog.kafka_marker_horizon"
							  " (topic_id, \"partition\", marker_offset, delete_horizon)"
							  " SELECT $1, $2, m.o, $4 FROM pg_catalog.unnest($3) m(o)"
							  " ON CONFLICT DO NOTHING",
							  4, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "mqlog: could not record the Kafka markers' delete horizons");
	MqSpiEnd(&spi);
}

void
MqMarkerHorizonsForget(int32 topic_id, int32 partition, const int64 *markers, int n)
{
	MqSpi		spi;
	Oid			types[3] = {INT4OID, INT4OID, INT8ARRAYOID};
	Datum		values[3];

	marker_args(values, topic_id, partition, markers, n);
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.kafka_marker_horizon h"
							  " WHERE h.topic_id OPERATOR(pg_catalog.=) $1"
							  " AND h.\"partition\" OPERATOR(pg_catalog.=) $2"
							  " AND h.marker_offset OPERATOR(pg_catalog.=) ANY ($3)",
							  3, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog: could not forget the Kafka markers' delete horizons");
	MqSpiEnd(&spi);
}
