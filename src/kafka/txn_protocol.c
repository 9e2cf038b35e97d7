/*-------------------------------------------------------------------------
 *
 * txn_protocol.c
 *		What the transaction APIs (api_add_partitions_to_txn.c,
 *		api_add_offsets_to_txn.c, api_end_txn.c, api_txn_offset_commit.c)
 *		read and write alike: the producer a request names, and the two
 *		shapes of their answers (one error; an error per partition).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

/*
 * transactional_id, producer_id, producer_epoch, as AddPartitionsToTxn,
 * AddOffsetsToTxn and EndTxn begin; fenced_from: the first version that
 * knows PRODUCER_FENCED
 */
void
MqKafkaTxnReadProducer(MqKafkaReader *r, bool flex, int16 version, int16 fenced_from,
					   MqKafkaTxnProducer *p)
{
	p->txn_id = MqKafkaReadString(r, flex, NULL);
	p->producer_id = MqKafkaReadInt64(r);
	p->epoch = MqKafkaReadInt16(r);
	p->fenced_code = version >= fenced_from;
	if (p->txn_id == NULL)
		r->failed = true;
}

/* throttle_time_ms and one error code (AddOffsetsToTxn, EndTxn) */
MqKafkaOutcome
MqKafkaTxnAnswer(StringInfo out, bool flex, int16 error)
{
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}

/* throttle_time_ms and each partition's error (AddPartitionsToTxn, TxnOffsetCommit) */
MqKafkaOutcome
MqKafkaTxnAnswerPartitions(StringInfo out, bool flex, const MqKafkaOffsetTopic *topics,
						   int ntopics)
{
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWritePartitionErrors(out, flex, topics, ntopics);
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
