/*-------------------------------------------------------------------------
 *
 * append.h
 *		The C service API for writing a partition's log (append.c): what
 *		mq_produce, mq_produce_batch, mq_produce_kafka_batch and, later, a
 *		follower's apply worker and the Kafka listener call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_APPEND_H
#define MQLOG_APPEND_H

#include "log/topic.h"
#include "store/batch.h"

/* records -> one batch in the topic's codec; returns the base offset */
extern int64 MqLogAppend(MqTopic **topicp, int32 partition, MqRecord *records,
						 int nrecords);

/*
 * A Kafka record batch v2 encoded by someone else.  at_offset < 0: the log
 * assigns the offsets (a Kafka client's produce); otherwise the batch goes
 * exactly there, with the given leader epoch (a follower).
 *
 * budget, when not NULL, is what the batches of one request may still
 * expand to in memory, in bytes: the batch's decompressed records, its
 * decoded record array and, when the topic re-encodes it, the new batch
 * are charged to it before they are allocated, and a batch that would
 * pass it is refused with ERRCODE_PROGRAM_LIMIT_EXCEEDED before it is
 * (the Kafka listener's mqlog.kafka_max_request_memory).  NULL: only what
 * one palloc can hold bounds it.
 *
 * A batch with a producer id is checked against its idempotent producer's
 * state (log/producers.c); producer_nowait: if another transaction has a
 * batch of that producer on the partition not yet committed, fail at once
 * with 55P03 instead of waiting for that transaction to end.
 * transactional_ok: a batch with the transactional bit is taken (the Kafka
 * listener, once the transaction's coordinator has admitted it); every
 * other caller refuses one.
 */
extern int64 MqLogAppendKafka(MqTopic **topicp, int32 partition, const char *kafka,
							  Size len, int64 at_offset, int32 leader_epoch,
							  Size *budget, bool producer_nowait,
							  bool transactional_ok);

/* a Kafka transaction's COMMIT or ABORT marker (a control batch) */
extern int64 MqLogAppendControl(MqTopic **topicp, int32 partition, int64 producer_id,
								int16 producer_epoch, bool commit, int32 coordinator_epoch);

/* a record as the topic's rules allow it (key on compacted topics, size) */
extern void MqCheckRecord(MqTopic *topic, MqRecord *rec);

#endif							/* MQLOG_APPEND_H */
