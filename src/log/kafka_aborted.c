/*-------------------------------------------------------------------------
 *
 * kafka_aborted.c
 *		Which batches of a partition belong to an aborted Kafka
 *		transaction: the ranges mqlog.kafka_aborted_transaction holds (the
 *		producer id, the transaction's first offset on the partition and
 *		its ABORT marker's offset, written with the marker by the
 *		transaction coordinator, kafka/txn_coordinator.c), as Kafka's
 *		aborted transaction index.
 *
 * A batch is aborted when it has the transactional bit (not the control
 * bit) and a range of its producer id holds its base offset: a producer
 * has one transaction open at a time, so its batches between the
 * transaction's first offset and its marker are the transaction's.  The
 * readers that hide them (MQ_ITER_HIDE_KAFKA_ABORTED) only ask when they
 * meet a transactional batch, so a log without Kafka transactions costs
 * no query; they then load a window of at most MQ_ABORTED_WINDOW ranges
 * from that batch on, and again past its end: a reader holds one window,
 * whatever the number of aborted transactions.  The query runs as the
 * extension owner (the table is not PUBLIC's), in the reader's snapshot.
 * A range goes when the partition's log start passes its marker (the
 * maintenance pass, mq_run_maintenance), as Kafka's index goes with its
 * segment, or when compaction removes its ABORT marker, which it does only
 * once the transaction's batches are gone (log/lifecycle.c), as Kafka's
 * cleaner leaves such a transaction out of the index it rewrites.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"

#include "base/spi.h"
#include "log/kafka_aborted.h"

static void
load_window(MqKafkaAborted *w, int32 topic_id, int32 partition, int64 from)
{
	MqSpi		spi;
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3] = {Int32GetDatum(topic_id), Int32GetDatum(partition), Int64GetDatum(from)};
	int			n;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT a.producer_id, a.first_offset, a.last_offset"
							  " FROM mqlog.kafka_aborted_transaction a"
							  " WHERE a.topic_id OPERATOR(pg_catalog.=) $1"
							  " AND a.\"partition\" OPERATOR(pg_catalog.=) $2"
							  " AND a.last_offset OPERATOR(pg_catalog.>) $3"
							  " ORDER BY a.first_offset LIMIT " CppAsString2(MQ_ABORTED_WINDOW) " + 1",
							  3, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: could not read the aborted Kafka transactions");
	n = (int) SPI_processed;
	w->from = from;
	w->until = PG_INT64_MAX;
	w->n = Min(n, MQ_ABORTED_WINDOW);
	for (int i = 0; i < n; i++)
	{
		bool		isnull;
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int64		first = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));

		if (i == MQ_ABORTED_WINDOW)
		{
			/* ranges starting here or later are not in the window */
			w->until = first;
			break;
		}
		w->producer_id[i] = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		w->first_offset[i] = first;
		w->last_offset[i] = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));
	}
	MqSpiEnd(&spi);
}

bool
MqKafkaBatchAborted(MqKafkaAborted *w, int32 topic_id, int32 partition, const MqBatchHeader *hdr,
					int64 *first_offset)
{
	if (!(hdr->attributes & MQ_ATTR_TRANSACTIONAL) || (hdr->attributes & MQ_ATTR_CONTROL) ||
		hdr->producer_id < 0)
		return false;
	if (w->until == 0 || hdr->base_offset < w->from || hdr->base_offset >= w->until)
		load_window(w, topic_id, partition, hdr->base_offset);
	for (int i = 0; i < w->n; i++)
		if (w->producer_id[i] == hdr->producer_id && w->first_offset[i] <= hdr->base_offset &&
			hdr->base_offset < w->last_offset[i])
		{
			if (first_offset)
				*first_offset = w->first_offset[i];
			return true;
		}
	return false;
}

void
MqKafkaAbortedForget(int32 topic_id, int32 partition, const int64 *markers, int n)
{
	MqSpi		spi;
	Oid			types[3] = {INT4OID, INT4OID, INT8ARRAYOID};
	Datum		values[3] = {Int32GetDatum(topic_id), Int32GetDatum(partition),
	MqSpiInt8Array(markers, n)};

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.kafka_aborted_transaction a"
							  " WHERE a.topic_id OPERATOR(pg_catalog.=) $1"
							  " AND a.\"partition\" OPERATOR(pg_catalog.=) $2"
							  " AND a.last_offset OPERATOR(pg_catalog.=) ANY ($3)",
							  3, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog: could not forget the aborted Kafka transactions");
	MqSpiEnd(&spi);
}
