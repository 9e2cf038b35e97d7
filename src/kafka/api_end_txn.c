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
 * most mqlog.max_inflight_partitions of them, and at most 1,000 offsets
 * (each with at most 4 kB of metadata, read into memory at once): the one
 * request this listener serves meanwhile is bounded by them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

typedef struct EndTxn
{
	MqKafkaTxnProducer p;
	bool		commit;
} EndTxn;

static int16
end_txn(void *arg)
{
	EndTxn	   *e = arg;

	return MqKafkaTxnEnd(e->p.txn_id, e->p.producer_id, e->p.epoch, e->p.fenced_code, e->commit);
}

MqKafkaOutcome
MqKafkaEndTxn(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = v >= 3;
	EndTxn		e;

	MqKafkaTxnReadProducer(r, flex, v, 2, &e.p);
	e.commit = MqKafkaReadInt8(r) != 0;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;
	return MqKafkaTxnAnswer(out, flex, MqKafkaTxnRun(end_txn, &e));
}
