/*-------------------------------------------------------------------------
 *
 * read_replicas.c
 *		Fetching from followers (KIP-392): which node may serve a Fetch of
 *		a replicated partition, and which follower a leader sends a
 *		consumer to by its rack (mqlog.node_rack, Kafka's broker.rack,
 *		against the request's rack_id, the client's client.rack).
 *
 * The leader: a Fetch v11+ whose rack_id is not empty and not the leader's
 * own rack, of a partition with an in-sync follower in that rack whose log
 * reaches the fetch offset, is answered with no records and that
 * follower's broker id as preferred_read_replica; among several, the
 * furthest ahead, then the most recently caught up (Kafka's
 * RackAwareReplicaSelector over the replicas ReplicaManager's
 * findPreferredReadReplica admits).  The client then fetches from the
 * follower (librdkafka keeps it for 5 minutes, the Java consumer for
 * metadata.max.age.ms, and both ask the leader again after that).
 *
 * A follower: a Fetch v11+ (a client that knows of preferred replicas:
 * Kafka's FetchParams.fetchOnlyLeader is false for a consumer with client
 * metadata) of a partition it holds a replica of is served from its own
 * log, as its SQL readers are: up to its high watermark, which is what
 * the leader last told it and never above its own log end, and for
 * read_committed up to its last stable offset, never above it either
 * (log/partition_offsets.c).  Fetch v4-v10 still gets
 * NOT_LEADER_OR_FOLLOWER, as Kafka answers a consumer without client
 * metadata.  Where the follower is behind, it answers what Kafka's
 * follower answers (LocalLog.read): an offset from its high watermark up
 * to its log end gets no records (and the Fetch waits its max_wait_ms for
 * the high watermark to move, which wakes it, log/partition_signal.c);
 * one past its log end is OFFSET_OUT_OF_RANGE, with high watermark -1,
 * which no client takes as final from a follower: librdkafka 2.0.2 goes
 * back to the leader when the offset is above the high watermark the
 * follower answered (rdkafka_fetcher.c), the Java consumer clears its
 * preferred replica on any OFFSET_OUT_OF_RANGE from one, and the leader
 * then gives the real answer.  NOT_LEADER_OR_FOLLOWER would not send a
 * client back: librdkafka refreshes its metadata, sees the same leader
 * and stays on the follower ("not migrating away from preferred replica",
 * rdkafka_topic.c).  A follower out of the ISR serves what it has as
 * well, as Kafka's does; the leader no longer sends clients to it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "cluster/metadata.h"
#include "log/partition.h"
#include "log/topic.h"
#include "kafka/kafka_internal.h"

/*
 * May this listener serve a Fetch of the partition?  Its leader may (and
 * every node for a single-node topic of its own); a follower holding a
 * replica may when the client is replica-aware (Fetch v11+): *follower is
 * then true.
 */
int16
MqKafkaCheckFetchReplica(MqTopic *topic, int32 partition, bool replica_aware, bool *follower)
{
	const char *self = MqClusterNodeName();
	MqReplicaInfo *ri;

	*follower = false;
	if (MqTopicLeadsHere(topic, partition))
		return MQK_NONE;
	if (!replica_aware || topic->replicas == NULL || self == NULL)
		return MQK_NOT_LEADER_OR_FOLLOWER;
	ri = &topic->replicas[partition];
	for (int i = 0; i < ri->nreplicas; i++)
		if (strcmp(ri->replicas[i], self) == 0)
		{
			*follower = true;
			return MQK_NONE;
		}
	return MQK_NOT_LEADER_OR_FOLLOWER;
}

/*
 * On the partition's leader: the broker id of the follower a consumer in
 * rack should fetch from at offset, or -1 to read from the leader (no
 * rack given, the leader in that rack, no in-sync follower there whose
 * log reaches offset, or a single-node topic).  The broker list it reads
 * (a copy of the node list, up to some 100 kB) is freed before it
 * returns: a Fetch of thousands of partitions asks once for each.
 */
int32
MqKafkaPreferredReplica(MqTopic *topic, int32 partition, int64 offset, const char *rack)
{
	MqReplicaInfo *ri;
	MqPartition *part;
	MqKafkaBroker *brokers;
	const MqKafkaBroker *self;
	int			nbrokers;
	int32		best = -1;
	MqFollowerProgress best_fp = {0};
	MemoryContext scratch;
	MemoryContext old;

	if (rack == NULL || rack[0] == '\0' || topic->replicas == NULL ||
		strcmp(mqlog_node_rack, rack) == 0 || MqTopicPartitionPending(topic, partition))
		return -1;
	ri = &topic->replicas[partition];
	part = MqTopicPartition(topic, partition);
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka preferred read replica",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(scratch);
	brokers = MqKafkaBrokers(&nbrokers);
	self = MqKafkaBrokerOf(brokers, nbrokers, NULL);
	for (int i = 0; i < ri->nisr; i++)
	{
		const MqKafkaBroker *b = MqKafkaBrokerOf(brokers, nbrokers, ri->isr[i]);
		MqFollowerProgress fp;

		if (b == NULL || b == self || !b->listed || b->rack == NULL ||
			strcmp(b->rack, rack) != 0)
			continue;
		/* what it reported to this leadership: its log holds offset */
		if (!MqPartitionFollowerProgress(part, ri->isr[i], &fp) ||
			fp.epoch != ri->leader_epoch || fp.leo < offset)
			continue;
		if (best < 0 || fp.leo > best_fp.leo ||
			(fp.leo == best_fp.leo && fp.caught_up > best_fp.caught_up))
		{
			best = b->id;
			best_fp = fp;
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(scratch);
	return best;
}

/*
 * A follower served a Fetch of the partition: a DEBUG1 line, the trace a
 * DBA (and test/perl/166_kafka_follower_fetch.pl) reads to see which node
 * served a consumer
 */
void
MqKafkaNoteFollowerFetch(MqKafkaRequest *req, const char *topic, int32 partition,
						 int64 offset, int64 high_watermark, int bytes)
{
	ereport(DEBUG1,
			(errmsg("Kafka client \"%s\" fetched partition %d of topic \"%s\" from follower \"%s\" at offset " INT64_FORMAT ": %d bytes, high watermark " INT64_FORMAT,
					req->client_id ? req->client_id : "", partition, topic,
					MqClusterNodeName(), offset, bytes, high_watermark)));
}
