/*-------------------------------------------------------------------------
 *
 * logiter.h
 *		The one iterator over the batches and records of a partition's log
 *		(logiter.c).  Every reader uses it: mq_fetch and mq_poll, the Kafka
 *		batches served raw, offsets for times, compaction, the verifier,
 *		the segment statistics and the sequential scan of a segment.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_LOGITER_H
#define MQLOG_LOGITER_H

#include "utils/snapshot.h"
#include "log/topic.h"
#include "store/segment.h"

/* what the iterator returns */
#define MQ_ITER_RECORDS		0x01	/* decode records (else headers only) */
#define MQ_ITER_INVISIBLE	0x02	/* also return aborted batches (fate says) */
#define MQ_ITER_ANY_FATE	0x04	/* every whole batch, never stop at a running
									 * one (the verifier) */
#define MQ_ITER_BYTES		0x08	/* read each batch's bytes (raw, CRC) */
#define MQ_ITER_NO_CRC		0x10	/* the caller checks CRCs itself, on the
									 * pages (never the batch cache) */
#define MQ_ITER_HIDE_KAFKA_ABORTED	0x20	/* skip the batches of aborted
											 * Kafka transactions (SQL
											 * readers, read_committed) */

typedef struct MqLogIter
{
	/* what to read */
	MqTopic    *topic;			/* NULL: one segment, given by relation */
	int32		partition;
	int64		from;			/* first offset wanted */
	int64		lso;			/* below it the clog decides; -1: stop at the
								 * first running transaction */
	int64		bound;			/* and never at or past it: a hot standby's
								 * checkpointed high watermark, or its
								 * first open Kafka transaction */
	Snapshot	snapshot;		/* a hot standby's: a batch of a transaction
								 * it does not see committed is running */
	int			flags;
	int			max_records;	/* budget: records returned */
	int			batch_max_records;	/* records: a batch begun within
									 * max_records may be read on up to
									 * this many in all (0: max_records) */
	int64		max_bytes;		/* budget: keys and values (records) or stored
								 * bytes (batches); at least one is returned */

	/* where it is */
	int			seg;			/* index into the topic's segment chain */
	Relation	rel;
	bool		own_rel;		/* opened here, closed here */
	bool		reading;		/* reader is initialized */
	MqSegmentReader reader;
	bool		done;

	/* the current batch */
	MqBatchHeader hdr;
	MqBatchFate fate;
	const char *stored;			/* its bytes, with MQ_ITER_BYTES/RECORDS */

	/* records of the current batch */
	MqRecord   *recs;
	int			nrecs;
	int			cur;
	MemoryContext cxt;			/* per batch */

	/* progress */
	int			nreturned;
	int64		bytes;
	int64		next;			/* offset after what was returned or skipped */
	int64		invisible_records;	/* records of aborted batches passed */
	struct MqKafkaAborted *kafka_aborted;	/* MQ_ITER_HIDE_KAFKA_ABORTED: its
											 * window, made at need */

} MqLogIter;

extern void MqLogIterBegin(MqLogIter *it, MqTopic *topic, int32 partition,
						   int64 from, int64 lso, int flags);
extern void MqLogIterBeginSegment(MqLogIter *it, Relation rel, int flags);
extern bool MqLogNextBatch(MqLogIter *it);
extern MqRecord *MqLogNextRecord(MqLogIter *it);
extern bool MqLogNextBatchRecords(MqLogIter *it, MqRecord **recs, int *n);
extern void MqLogIterEnd(MqLogIter *it);

/*
 * A partition's stored batches as Kafka's Fetch serves them (the stored
 * bytes minus mqlog's prefix), for mq_fetch_kafka_batches and the Kafka
 * listener.  aborted, for a committed read: the batches of aborted Kafka
 * transactions are returned, and aborted is told each such transaction
 * (its producer id and first offset, once each) for Kafka's
 * aborted_transactions list; NULL: they are left out.
 */
typedef void (*MqKafkaBatchSink) (void *arg, const MqBatchHeader *hdr,
								  const char *kafka, Size len);
typedef void (*MqKafkaAbortedSink) (void *arg, int64 producer_id, int64 first_offset);
extern int	MqLogReadKafkaBatches(MqTopic *topic, int32 partition, int64 from,
								  int64 max_bytes, bool committed,
								  MqKafkaBatchSink sink, MqKafkaAbortedSink aborted,
								  void *arg);

/* the one offset-range check */
extern void MqCheckOffsetRange(MqTopic *topic, int32 partition, int64 offset,
							   bool position);

#endif							/* MQLOG_LOGITER_H */
