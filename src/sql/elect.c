/*-------------------------------------------------------------------------
 *
 * elect.c
 *		mq_elect_leader(topic, partition, node): an explicit leader move,
 *		Kafka's preferred leader election, run on the current leader.
 *
 * The move loses and duplicates nothing because the old leader stops
 * first and the new one starts only where the old one ended:
 *	1. fence: this node refuses its own appends to the partition under the
 *	   current epoch (checked under the partition lock, in the append
 *	   protocol), so the log end offset cannot move any more;
 *	2. wait until no transaction that appended here is still open (the
 *	   LSO reaches the log end offset), so every batch's fate is decided;
 *	3. wait until the new leader has reported that it holds the whole log;
 *	4. write leader and epoch + 1 to etcd with compare-and-swap, then to
 *	   mqlog.replica_state here; the other nodes take it from etcd.
 * If a step fails or times out the fence is lifted and nothing changed,
 * except when the compare-and-swap got no answer (it may have been
 * applied): then the fence stays until a later mq_elect_leader, or the
 * move itself, settles it.  One move of a partition runs at a time.
 * After the move this node follows the new leader like any replica, and
 * producers here get the not-leader error naming it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "cluster/etcd.h"
#include "cluster/metadata.h"
#include "log/partition.h"
#include "log/topic.h"
#include "acl/acl.h"

PG_FUNCTION_INFO_V1(mq_elect_leader);

/* how far the compare-and-swap in etcd got */
#define CAS_NOT_SENT	0
#define CAS_SENT		1		/* no answer: it may have been applied */
#define CAS_LOST		2		/* etcd answered: someone else wrote first */

static bool
in_isr(const MqReplicaInfo *ri, const char *node)
{
	for (int i = 0; i < ri->nisr; i++)
		if (strcmp(ri->isr[i], node) == 0)
			return true;
	return false;
}

/* wait until done() or the deadline; false on timeout */
static bool
wait_for(bool (*done) (MqTopic *, int32, const char *), MqTopic *topic, int32 partition,
		 const char *node, TimestampTz deadline)
{
	while (!done(topic, partition, node))
	{
		if (GetCurrentTimestamp() >= deadline)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

static bool
all_decided(MqTopic *topic, int32 partition, const char *node)
{
	int64		lso,
				leo;

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	return lso >= leo;
}

static bool
target_caught_up(MqTopic *topic, int32 partition, const char *node)
{
	MqFollowerProgress fp;
	int64		lso,
				leo;

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	return MqPartitionFollowerProgress(MqTopicPartition(topic, partition), node, &fp) &&
		fp.epoch == topic->replicas[partition].leader_epoch && fp.leo >= leo;
}

static void
move_failed(MqTopic *topic, int32 partition, const char *node, const char *why, int timeout_ms)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("could not move the leader of partition %d of topic \"%s\" to node \"%s\"",
					partition, topic->name, node),
			 errdetail("%s within %d ms; nothing changed.", why, timeout_ms),
			 errhint("Retry, or give a larger timeout_ms.")));
}

Datum
mq_elect_leader(PG_FUNCTION_ARGS)
{
	MqTopic    *topic = MqTopicLookup(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	int32		partition = PG_GETARG_INT32(1);
	char	   *node = text_to_cstring(PG_GETARG_TEXT_PP(2));
	int32		timeout_ms = PG_GETARG_INT32(3);
	const MqReplicaInfo *ri;
	MqPartition *part;
	char	   *key;
	MqEtcdKv	kv;
	MqPartitionMeta *meta;
	int32		epoch;
	TimestampTz deadline;
	volatile int cas = CAS_NOT_SENT;

	PreventInTransactionBlock(true, "mq_elect_leader()");
	MqTopicCheckPrivilege(topic, MQ_PRIV_ALTER);
	MqCheckPartition(topic, partition);
	if (timeout_ms < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout_ms must be at least 1")));
	if (topic->replicas == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic \"%s\" is not replicated", topic->name),
				 errhint("Only a topic created with replication_factor > 1 has leaders to move.")));
	ri = &topic->replicas[partition];
	if (ri->leader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_LEADER),
				 errmsg("partition %d of topic \"%s\" has no known leader on this node",
						partition, topic->name)));
	if (!MqTopicLeadsHere(topic, partition))
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_LEADER),
				 errmsg("node \"%s\" is not the leader of partition %d of topic \"%s\"",
						MqClusterNodeName(), partition, topic->name),
				 errhint("Run mq_elect_leader on node \"%s\", the leader.", ri->leader)));
	if (strcmp(node, ri->leader) != 0 && !in_isr(ri, node))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node \"%s\" is not an in-sync replica of partition %d of topic \"%s\"",
						node, partition, topic->name),
				 errdetail("Only an in-sync replica can lead without losing records."),
				 errhint("See the isr column of mqlog.partitions.")));

	/* etcd must say what this node believes, or someone else moved first */
	key = MqClusterKey("partitions/%s/%d", topic->name, partition);
	if (!MqEtcdGet(key, &kv, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("partition %d of topic \"%s\" is not in etcd", partition, topic->name)));
	meta = MqPartitionMetaParse(kv.value, partition, kv.mod_revision);
	if (meta->leader == NULL || strcmp(meta->leader, ri->leader) != 0 ||
		meta->leader_epoch != ri->leader_epoch || !MqClusterNameListed(meta->isr, node))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the leader of partition %d of topic \"%s\" changed meanwhile", partition, topic->name),
				 errhint("Retry once mqlog.partitions shows the change.")));
	part = MqTopicPartition(topic, partition);
	if (strcmp(node, ri->leader) == 0)
	{
		/* already there; a fence an unfinished move left is lifted */
		if (MqPartitionFence(part, ri->leader_epoch, ri->leader_epoch))
			MqPartitionUnfence(part, ri->leader_epoch, true);
		PG_RETURN_INT32(ri->leader_epoch);
	}
	epoch = meta->leader_epoch + 1;
	if (!MqPartitionFence(part, meta->leader_epoch, epoch))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another mq_elect_leader is moving the leader of partition %d of topic \"%s\"",
						partition, topic->name),
				 errhint("Wait for it to end, then look at mqlog.partitions.")));
	PG_TRY();
	{
		int64		rev;

		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
		if (!wait_for(all_decided, topic, partition, node, deadline))
			move_failed(topic, partition, node, "Transactions that produced to it did not end", timeout_ms);
		if (!wait_for(target_caught_up, topic, partition, node, deadline))
			move_failed(topic, partition, node, "The node did not report holding the whole log", timeout_ms);
		meta->leader = node;
		meta->leader_epoch = epoch;
		cas = CAS_SENT;
		if (!MqEtcdPutIfModRevision(key, MqPartitionMetaJson(meta), kv.mod_revision, 0, &rev))
		{
			cas = CAS_LOST;
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("the metadata of partition %d of topic \"%s\" changed meanwhile", partition, topic->name),
					 errhint("Retry.")));
		}
		meta->mod_revision = rev;
	}
	PG_CATCH();
	{
		/*
		 * Lift the fence only if the move cannot have happened: a request
		 * that failed on the way (a timeout, a cancel) may have reached
		 * etcd, and then another node leads already.  A retry of
		 * mq_elect_leader finds out and lifts or keeps it.
		 */
		MqPartitionUnfence(part, epoch - 1, cas != CAS_SENT);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* etcd has it: from here on the move stands, whatever happens locally */
	MqPartitionUnfence(part, epoch, false);
	{
		MqSpi		spi;

		MqSpiBegin(&spi, true);
		MqClusterStoreLocal(topic->topic_id, NULL, list_make1(meta));
		MqSpiEnd(&spi);
	}
	ereport(LOG,
			(errmsg("mqlog: the leader of partition %d of topic \"%s\" moved to node \"%s\" at epoch %d",
					partition, topic->name, node, epoch)));
	PG_RETURN_INT32(epoch);
}
