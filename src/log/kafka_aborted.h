/*-------------------------------------------------------------------------
 *
 * kafka_aborted.h
 *		The aborted Kafka transactions of a partition, as the log's
 *		readers that hide them (mq_fetch, mq_poll, a read_committed Fetch)
 *		ask for them: a window of mqlog.kafka_aborted_transaction
 *		(kafka_aborted.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_ABORTED_H
#define MQLOG_KAFKA_ABORTED_H

#include "store/batch.h"

/* ranges loaded at once: a window, loaded again past its end */
#define MQ_ABORTED_WINDOW 256

typedef struct MqKafkaAborted
{
	int64		from;			/* the window covers batches at or after */
	int64		until;			/* and before this offset */
	int			n;
	int64		producer_id[MQ_ABORTED_WINDOW];
	int64		first_offset[MQ_ABORTED_WINDOW];
	int64		last_offset[MQ_ABORTED_WINDOW];	/* the ABORT marker's */
} MqKafkaAborted;

/*
 * Is the batch (below the LSO) one of an aborted Kafka transaction?  w
 * (zeroed by the caller at first) is loaded from the catalog as needed;
 * *first_offset (if not NULL): where that transaction began.
 */
extern bool MqKafkaBatchAborted(MqKafkaAborted *w, int32 topic_id, int32 partition,
								const MqBatchHeader *hdr, int64 *first_offset);

/*
 * Compaction removed the ABORT markers at these offsets of a partition
 * (their transactions' batches were gone already): their ranges go too.
 */
extern void MqKafkaAbortedForget(int32 topic_id, int32 partition, const int64 *markers, int n);

#endif							/* MQLOG_KAFKA_ABORTED_H */
