/*-------------------------------------------------------------------------
 *
 * api_add_offsets_to_txn.c
 *		AddOffsetsToTxn (key 25, v0-v3, flexible from v3): a consumer
 *		group joins a transactional producer's open transaction, whose
 *		TxnOffsetCommit may then commit the group's offsets, applied at
 *		the transaction's COMMIT (txn_coordinator.c).
 *
 * The group must be one the connection's role may use
 * (GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID), as for OffsetCommit;
 * then the producer is checked as for every transactional request.  A
 * transaction holds at most 100 groups.  One group, one subtransaction:
 * bounded by the frame.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

typedef struct AddOffsets
{
	MqKafkaTxnProducer p;
	const char *group;
} AddOffsets;

static int16
add_group(void *arg)
{
	AddOffsets *a = arg;
	int16		error = MqKafkaGroupAccess(a->group);

	if (error != MQK_NONE)
		return error;
	return MqKafkaTxnAddGroup(a->p.txn_id, a->p.producer_id, a->p.epoch, a->p.fenced_code, a->group);
}

MqKafkaOutcome
MqKafkaAddOffsetsToTxn(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = v >= 3;
	AddOffsets	a;

	MqKafkaTxnReadProducer(r, flex, v, 2, &a.p);
	a.group = MqKafkaReadString(r, flex, NULL);
	MqKafkaSkipTags(r, flex);
	if (r->failed || a.group == NULL)
		return MQK_CLOSE;
	return MqKafkaTxnAnswer(out, flex, MqKafkaTxnRun(add_group, &a));
}
