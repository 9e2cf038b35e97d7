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
#include "utils/timestamp.h"

#include "base/spi.h"
#include "log/kafka_marker_horizon.h"

/*
 * Runs sql over the markers at these offsets of a partition ($1 topic id,
 * $2 partition, $3 the offsets, $4 horizon if nargs is 4), as the
 * extension owner; for a SELECT, fn reads each row before SPI ends.
 */
typedef void (*row_fn) (HeapTuple tup, TupleDesc desc, void *arg);

static void
run(const char *sql, int expect, int32 topic_id, int32 partition, const int64 *markers, int n,
	int nargs, TimestampTz horizon, row_fn fn, void *arg)
{
	MqSpi		spi;
	Oid			types[4] = {INT4OID, INT4OID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[4] = {Int32GetDatum(topic_id), Int32GetDatum(partition),
	MqSpiInt8Array(markers, n), TimestampTzGetDatum(horizon)};

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, expect == SPI_OK_SELECT, 0) != expect)
		elog(ERROR, "mqlog: could not access the Kafka markers' delete horizons");
	for (uint64 r = 0; fn != NULL && r < SPI_processed; r++)
		fn(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, arg);
	MqSpiEnd(&spi);
}

typedef struct LoadState
{
	const int64 *markers;
	int			n;
	TimestampTz *horizons;
} LoadState;

static void
load_row(HeapTuple tup, TupleDesc desc, void *arg)
{
	LoadState  *ls = arg;
	bool		isnull;
	int64		offset = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	TimestampTz horizon = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));

	/* few markers of a segment are found empty: a scan is fine */
	for (int i = 0; i < ls->n; i++)
		if (ls->markers[i] == offset)
			ls->horizons[i] = horizon;
}

void
MqMarkerHorizonsLoad(int32 topic_id, int32 partition, const int64 *markers, int n,
					 TimestampTz *horizons)
{
	LoadState	ls = {markers, n, horizons};

	for (int i = 0; i < n; i++)
		horizons[i] = DT_NOBEGIN;
	if (n == 0)
		return;
	run("SELECT h.marker_offset, h.delete_horizon"
		" FROM mqlog.kafka_marker_horizon h"
		" WHERE h.topic_id OPERATOR(pg_catalog.=) $1"
		" AND h.\"partition\" OPERATOR(pg_catalog.=) $2"
		" AND h.marker_offset OPERATOR(pg_catalog.=) ANY ($3)",
		SPI_OK_SELECT, topic_id, partition, markers, n, 3, 0, load_row, &ls);
}

void
MqMarkerHorizonsRecord(int32 topic_id, int32 partition, const int64 *markers, int n,
					   TimestampTz horizon)
{
	/*
	 * The counting and the writing call of one compaction both record
	 * (the writing one may not run): the first's horizon stays.
	 */
	run("INSERT INTO mqlog.kafka_marker_horizon"
		" (topic_id, \"partition\", marker_offset, delete_horizon)"
		" SELECT $1, $2, m.o, $4 FROM pg_catalog.unnest($3) m(o)"
		" ON CONFLICT DO NOTHING",
		SPI_OK_INSERT, topic_id, partition, markers, n, 4, horizon, NULL, NULL);
}

void
MqMarkerHorizonsForget(int32 topic_id, int32 partition, const int64 *markers, int n)
{
	run("DELETE FROM mqlog.kafka_marker_horizon h"
		" WHERE h.topic_id OPERATOR(pg_catalog.=) $1"
		" AND h.\"partition\" OPERATOR(pg_catalog.=) $2"
		" AND h.marker_offset OPERATOR(pg_catalog.=) ANY ($3)",
		SPI_OK_DELETE, topic_id, partition, markers, n, 3, 0, NULL, NULL);
}
