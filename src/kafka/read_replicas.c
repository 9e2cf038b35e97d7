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
 * the high watermark to move, which wakes it, log/partition_signal.c).
 * One past its log end is where mqlog departs from Kafka's follower,
 * which answers OFFSET_OUT_OF_RANGE there and relies on the client to
 * know it asked a follower: librdkafka 2.0.2 goes back to the leader only
 * when the broker it asked is not the one it takes for the leader
 * (rdkafka_fetcher.c), and otherwise resets its position by
 * auto.offset.reset.  A client may take a follower for the leader: its
 * metadata predates an election (the old leader, now a follower, whose
 * log may have lost a tail the client read from the new leader).  A
 * follower therefore sends the client to the leader there: no error, no
 * records, and the leader's broker id as preferred_read_replica (the
 * field a leader sends a consumer to a follower with), which librdkafka
 * takes whatever the broker that sent it (rdkafka_fetcher.c, before it
 * looks at the error) and the Java consumer takes from any answer
 * without error; NOT_LEADER_OR_FOLLOWER where this node knows no listed
 * leader.  (NOT_LEADER_OR_FOLLOWER alone would keep a librdkafka client
 * sent here as to a preferred replica asking here, "not migrating away
 * from preferred replica", rdkafka_topic.c, for up to the 5 minutes it
 * keeps one.)  A follower out of the ISR serves
 * what it has as well, as Kafka's does; the leader no longer sends
 * clients to it.  A leader that may have been replaced (its lease in etcd
 * lapsed, MqTopicLeadsHereNow) serves no reads, and its Metadata names no
 * leader for the partition, until it knows (test/perl/167_kafka_faults.pl
 * met a consumer that reset to offset 0 when such a node took it back
 * from the new leader by its stale Metadata and answered
 * OFFSET_OUT_OF_RANGE at its own, shorter, log end).
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
MqKafkaCheckFetchReplica(MqTopic **topicp, int32 partition, bool replica_aware, bool *follower)
{
	const char *self = MqClusterNodeName();
	MqTopic    *topic = *topicp;
	MqReplicaInfo *ri;

	*follower = false;
	/*
	 * A leader that may have been replaced (its lease lapsed) serves no
	 * reads until it knows: a client that takes it for the leader would
	 * take its log end for the partition's, and reset its position on
	 * OFFSET_OUT_OF_RANGE when its log is behind the new leader's.
	 */
	if (MqTopicLeadsHere(topic, partition))
	{
		MqTopic    *led = MqTopicLedHereNow(topic, partition);

		if (led == NULL)
			return MQK_NOT_LEADER_OR_FOLLOWER;
		*topicp = led;			/* read again, perhaps (MqTopicLedHereNow) */
		return MQK_NONE;
	}
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
 * On a follower: is offset past its log end (see the header: the client
 * is sent to the leader, not answered OFFSET_OUT_OF_RANGE)?
 */
bool
MqKafkaFollowerBehind(MqTopic *topic, int32 partition, int64 offset)
{
	int64		lso,
				leo;

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	return offset > leo;
}

/*
 * The broker id of the partition's leader as this node's copy of etcd
 * names it, if it is listed; else -1 (the broker list is read in a
 * scratch context freed before it returns, as MqKafkaPreferredReplica's)
 */
int32
MqKafkaLeaderBroker(MqTopic *topic, int32 partition)
{
	const char *leader = topic->replicas ? topic->replicas[partition].leader : NULL;
	MemoryContext scratch;
	MemoryContext old;
	MqKafkaBroker *brokers;
	const MqKafkaBroker *b;
	int			nbrokers;
	int32		id = -1;

	if (leader == NULL)
		return -1;
	scratch = AllocSetContextCreate(CurrentMemoryContext, "Kafka partition leader",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(scratch);
	brokers = MqKafkaBrokers(&nbrokers);
	b = MqKafkaBrokerOf(brokers, nbrokers, leader);
	if (b != NULL && b->listed)
		id = b->id;
	MemoryContextSwitchTo(old);
	MemoryContextDelete(scratch);
	return id;
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
