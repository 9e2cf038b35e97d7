/*-------------------------------------------------------------------------
 *
 * api_end_txn.c
 *		EndTxn (key 26, v0-v3, flexible from v3): a transactional
 *		producer commits or aborts its open transaction.  The coordinator
 *		(txn_coordinator.c) writes the COMMIT or ABORT marker into every
 *		partition of the transaction, applies or drops its offsets, and
 *		ends it, all in the request's PostgreSQL transaction, which
 *		commits before the answer is sent: a client told its transaction
 *		committed finds every marker and offset durable.
 *
 * Bounds: one marker per partition of the transaction, which holds at
 * most mqlog.max_inflight_partitions of them, and at most 10,000 offsets:
 * the one request this listener serves meanwhile is bounded by them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

typedef struct EndTxn
{
	const char *txn_id;
	int64		producer_id;
	int16		epoch;
	bool		fenced_code;
	bool		commit;
} EndTxn;

static int16
end_txn(void *arg)
{
	EndTxn	   *e = arg;

	return MqKafkaTxnEnd(e->txn_id, e->producer_id, e->epoch, e->fenced_code, e->commit);
}

MqKafkaOutcome
MqKafkaEndTxn(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = v >= 3;
	EndTxn		e;
	int16		error;

	e.txn_id = MqKafkaReadString(r, flex, NULL);
	e.producer_id = MqKafkaReadInt64(r);
	e.epoch = MqKafkaReadInt16(r);
	e.commit = MqKafkaReadInt8(r) != 0;
	e.fenced_code = v >= 2;
	MqKafkaSkipTags(r, flex);
	if (r->failed || e.txn_id == NULL)
		return MQK_CLOSE;

	error = MqKafkaTxnRun(end_txn, &e);

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
