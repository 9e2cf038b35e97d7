/*-------------------------------------------------------------------------
 *
 * producers.h
 *		Idempotent producers (Kafka's KIP-98): per partition and producer
 *		id, the epoch and the last five batches' sequences and offsets, in
 *		shared memory, checked by the appender under the partition lock
 *		(producers.c), and rebuilt from the log's tail when a partition
 *		has none yet (producers_load.c).
 *
 * This header names no topic and no partition entry: partition.c calls
 * the check, and the loader, which reads the log, is called by append.c,
 * so that the log's modules include it without a circle.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_PRODUCERS_H
#define MQLOG_PRODUCERS_H

#include "utils/elog.h"

/* Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN */
#define MQ_PRODUCER_BATCHES		5

/*
 * How long after a leader loaded a partition's producers a gap in a
 * producer's sequence is answered as if this node did not lead yet
 * (MQ_PRODUCER_GAP_NEW_LEADER, producers.c)
 */
#define MQ_PRODUCER_NEW_LEADER_MS	2000

/* mqlog's SQLSTATEs for Kafka's producer errors (class MQ: see log/topic.h) */
#define ERRCODE_MQ_OUT_OF_ORDER_SEQUENCE	MAKE_SQLSTATE('M','Q','0','0','4')	/* OUT_OF_ORDER_SEQUENCE_NUMBER */
#define ERRCODE_MQ_INVALID_PRODUCER_EPOCH	MAKE_SQLSTATE('M','Q','0','0','5')	/* INVALID_PRODUCER_EPOCH */

/* settings (log_settings.c) */
extern int	mqlog_max_producer_states;
extern int	mqlog_kafka_producer_state_window;	/* kB */

/*
 * A producer of a partition; producer_id -1 names the partition's own
 * entry, which says that its producers are loaded (and at which leader
 * epoch).
 */
typedef struct MqProducerKey
{
	Oid			dboid;
	Oid			catalog_relid;
	int32		topic_id;
	int32		partition;
	int64		producer_id;
} MqProducerKey;

typedef struct MqProducerBatch
{
	int32		first_seq;
	int32		last_seq;
	int64		first_offset;
	int64		last_offset;
} MqProducerBatch;

/* what is known of one producer on one partition */
typedef struct MqProducerState
{
	int16		epoch;			/* -1: nothing known */
	int16		nbatches;
	MqProducerBatch batches[MQ_PRODUCER_BATCHES];	/* oldest first */
} MqProducerState;

typedef enum MqProducerVerdict
{
	MQ_PRODUCER_APPEND,			/* in sequence: append it (recorded as pending) */
	MQ_PRODUCER_DUPLICATE,		/* one of the last five again: not appended */
	MQ_PRODUCER_OUT_OF_ORDER,	/* a gap, or a new epoch not at sequence 0 */
	MQ_PRODUCER_GAP_NEW_LEADER, /* a gap just after this leader loaded the
								 * partition's producers (producers.c) */
	MQ_PRODUCER_OLD_EPOCH,		/* an epoch older than the producer's */
	MQ_PRODUCER_WAIT,			/* another transaction has one pending */
	MQ_PRODUCER_NOT_LOADED,		/* the partition's producers are to be loaded */
	MQ_PRODUCER_FULL			/* no entry free: mqlog.max_producer_states */
} MqProducerVerdict;

/*
 * A leader's append of a batch with a producer id, as MqPartitionAppend
 * checks it under the partition lock (MqProducersCheck); the caller fills
 * the batch's fields, the check the rest.
 */
typedef struct MqProducerAppend
{
	MqProducerKey key;
	int16		epoch;
	int32		first_seq;
	int32		count;
	int32		leader_epoch;	/* the append's (-1: not a replicated topic) */
	bool		nowait;			/* another transaction's pending batch: an
								 * error (55P03), not a wait */
	/* the outcome */
	MqProducerVerdict verdict;
	MqProducerState seen;		/* what the batch was checked against */
	int64		dup_first;		/* DUPLICATE: the original's offsets */
	int64		dup_last;
	TransactionId wait_for;		/* WAIT: the transaction to wait for */
} MqProducerAppend;

/* a sequence number count - 1 after first, wrapping at INT32_MAX as Kafka's */
static inline int32
MqProducerSeqAdd(int32 first, int32 delta)
{
	if (first > PG_INT32_MAX - delta)
		return delta - (PG_INT32_MAX - first) - 1;
	return first + delta;
}

extern void MqProducerStateAdd(MqProducerState *st, int16 epoch, int32 first_seq,
							   int32 last_seq, int64 first_offset, int64 last_offset);

/* shared memory (mqlog.c, mqlog.shared_memory) and the transaction callbacks */
extern Size MqProducersShmemSize(void);
extern void MqProducersShmemInit(void);
extern void MqProducersInitCallbacks(void);
extern int64 MqProducersInUse(void);

/* the check at append, and its refusal (after the partition lock is released) */
extern MqProducerVerdict MqProducersCheck(MqProducerAppend *pa, int64 base);
extern void MqProducersRefuse(const MqProducerAppend *pa, const char *topic) pg_attribute_noreturn();

/* the loader's side (producers_load.c) */
extern bool MqProducersLoaded(const MqProducerKey *partition_key, int32 leader_epoch);
extern void MqProducersInstall(const MqProducerKey *partition_key, int32 leader_epoch,
							   int n, const int64 *ids, const MqProducerState *states);

#endif							/* MQLOG_PRODUCERS_H */
