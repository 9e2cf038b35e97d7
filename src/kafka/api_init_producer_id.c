/*-------------------------------------------------------------------------
 *
 * api_init_producer_id.c
 *		InitProducerId (key 22, v0-v4, flexible from v2): a producer id for
 *		an idempotent producer (KIP-98), or a transactional producer's id
 *		and epoch from the transaction coordinator.  What the id buys is
 *		checked by every Produce, per partition, in log/producers.c.
 *
 * Ids come from the sequence mqlog.producer_id_seq of the listener's
 * database, with this node's broker id in the high bits on a cluster:
 * id = broker_id << MQ_PRODUCER_ID_BITS | nextval.  A sequence never hands
 * out a value twice, crash or not (it logs ahead of what it gives out and
 * is flushed with the commit that precedes the answer), and pg_dump keeps
 * its position; a broker id is taken once per node in etcd and never
 * reused by another node, so ids are unique across restarts and across
 * the nodes of a cluster without asking etcd for each one.  A single node
 * is broker 0: its ids are the sequence's values.
 *
 * Every idempotent producer gets epoch 0 of a new id.  An idempotent
 * producer that asks again (librdkafka does so to reset its sequences
 * after a fatal gap, KIP-360) is given a new id, as Kafka's broker gives
 * one to a request without a transactional id whatever producer id and
 * epoch v3+ name.  A transactional id is the transaction coordinator's
 * (txn_coordinator.c): its producer id, with the epoch bumped, the old
 * epoch's producer fenced and its open transaction aborted (an empty
 * transactional id is INVALID_REQUEST, as Kafka's; on an mqlog cluster,
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED: transactions are not served
 * there).
 *
 * Privilege: any role the listener serves may have an id (Kafka 3.0's
 * KIP-679 gives IDEMPOTENT_WRITE to every producer that may write any
 * topic; an id in itself writes nothing).  Each Produce checks its
 * topic's produce privilege as ever.  A hot standby cannot take a
 * sequence value: COORDINATOR_NOT_AVAILABLE, which a client retries, as
 * before a cluster node has its broker id.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "utils/lsyscache.h"

#include "kafka/kafka_internal.h"

/* the sequence's share of an id: 2^44 ids per node, 2^19 broker ids */
#define MQ_PRODUCER_ID_BITS		44
#define MQ_PRODUCER_BROKER_MAX	((1 << (63 - MQ_PRODUCER_ID_BITS)) - 1)

typedef struct NewId
{
	int32		broker_id;
	int64		producer_id;
} NewId;

/* in a subtransaction (MqKafkaTry): the sequence's next value, prefixed */
static void
next_producer_id(void *arg)
{
	NewId	   *id = arg;
	Oid			seq = get_relname_relid("producer_id_seq", get_namespace_oid("mqlog", false));
	int64		v;

	if (!OidIsValid(seq))
		elog(ERROR, "mqlog: sequence mqlog.producer_id_seq is missing");
	/* the listener's own counter, not the role's: no privilege asked */
	v = nextval_internal(seq, false);
	if (v <= 0 || v >= ((int64) 1 << MQ_PRODUCER_ID_BITS))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("mqlog has run out of Kafka producer ids"),
				 errdetail("mqlog.producer_id_seq reached " INT64_FORMAT "; a node's ids are below 2^%d.",
						   v, MQ_PRODUCER_ID_BITS)));
	id->producer_id = ((int64) id->broker_id << MQ_PRODUCER_ID_BITS) | v;
}

/* a new id for the transaction coordinator (in its subtransaction) */
static int64
new_producer_id(void)
{
	NewId		id = {MqKafkaSelfBrokerId(), -1};

	if (RecoveryInProgress() || id.broker_id < 0 || id.broker_id > MQ_PRODUCER_BROKER_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("this node cannot hand out Kafka producer ids now")));
	next_producer_id(&id);
	return id.producer_id;
}

typedef struct TxnInit
{
	const char *txn_id;
	int32		timeout_ms;
	int64		given_id;
	int16		given_epoch;
	bool		fenced_code;
	int16		error;
	int64		producer_id;
	int16		epoch;
} TxnInit;

static void
init_transactional(void *arg)
{
	TxnInit    *ti = arg;

	ti->error = MqKafkaTxnInitProducer(ti->txn_id, ti->timeout_ms, ti->given_id, ti->given_epoch,
									   ti->fenced_code, new_producer_id, &ti->producer_id,
									   &ti->epoch);
}

MqKafkaOutcome
MqKafkaInitProducerId(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flexible = v >= 2;
	bool		no_txn;
	char	   *txn_id = MqKafkaReadString(r, flexible, &no_txn);
	NewId		id = {MqKafkaSelfBrokerId(), -1};
	int16		error = MQK_NONE;
	TxnInit		ti;
	int16		epoch = 0;

	memset(&ti, 0, sizeof(ti));
	ti.txn_id = txn_id;
	ti.timeout_ms = MqKafkaReadInt32(r);
	ti.given_id = -1;
	if (v >= 3)
	{
		/* an idempotent producer is given a new id whatever it names */
		ti.given_id = MqKafkaReadInt64(r);
		ti.given_epoch = MqKafkaReadInt16(r);
	}
	ti.fenced_code = v >= 4;
	MqKafkaSkipTags(r, flexible);
	if (r->failed)
		return MQK_CLOSE;

	if (!no_txn && txn_id[0] == '\0')
		error = MQK_INVALID_REQUEST;
	else if (!no_txn && MqKafkaTxnRefused())
		error = MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	else if (!no_txn && RecoveryInProgress())
		error = MQK_COORDINATOR_NOT_AVAILABLE;
	else if (!no_txn)
	{
		error = MqKafkaTry(init_transactional, &ti, MQK_UNKNOWN_SERVER_ERROR, NULL);
		if (error == MQK_NONE)
			error = ti.error;
		id.producer_id = ti.producer_id;
		epoch = ti.epoch;
	}
	else if (RecoveryInProgress() || id.broker_id < 0 || id.broker_id > MQ_PRODUCER_BROKER_MAX)
		error = MQK_COORDINATOR_NOT_AVAILABLE;
	else
		error = MqKafkaTry(next_producer_id, &id, MQK_UNKNOWN_SERVER_ERROR, NULL);

	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	MqKafkaWriteInt64(out, error == MQK_NONE ? id.producer_id : -1);
	MqKafkaWriteInt16(out, error == MQK_NONE ? epoch : -1);
	MqKafkaWriteTags(out, flexible);
	return MQK_RESPOND;
}
