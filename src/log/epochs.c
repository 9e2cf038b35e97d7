/*-------------------------------------------------------------------------
 *
 * epochs.c
 *		A partition's leader epochs, read from its log: Kafka's leader-epoch
 *		cache, without a cache.
 *
 * Every batch of a replicated partition carries, in Kafka's
 * partitionLeaderEpoch field, the epoch of the leader that wrote it, and a
 * follower keeps the leader's bytes; epochs never go down along a log.  So
 * the log itself answers what Kafka keeps a leader-epoch-checkpoint file
 * for: where an epoch ends.  The answer is found by bisecting the log's
 * offsets, a few batch headers per step (a seek through the page covers,
 * store/segment.c), so it costs O(log n) header reads, done once each time
 * a follower starts to follow a leader (workers/apply.c) and once for each
 * such question a leader answers (sql/replica_leader.c), a Kafka client's
 * OffsetForLeaderEpoch included (kafka/api_offset_for_leader_epoch.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "store/batch.h"
#include "log/epochs.h"
#include "log/logiter.h"
#include "log/partition.h"

/* the first batch whose records end after offset o; false: none */
static bool
batch_after(MqTopic *topic, int32 partition, int64 o, MqBatchHeader *hdr)
{
	MqLogIter	it;
	bool		found;

	MqLogIterBegin(&it, topic, partition, o, -1, MQ_ITER_ANY_FATE);
	found = MqLogNextBatch(&it);
	if (found)
		*hdr = it.hdr;
	MqLogIterEnd(&it);
	return found;
}

int32
MqLogLastEpoch(MqTopic *topic, int32 partition)
{
	int64		lso,
				leo;
	MqBatchHeader hdr;

	MqPartitionLogEnd(topic, partition, &lso, &leo);
	if (leo <= MqLogStartOffset(topic, partition) ||
		!batch_after(topic, partition, leo - 1, &hdr))
		return -1;
	return hdr.leader_epoch;
}

int32
MqLogEpochAt(MqTopic *topic, int32 partition, int64 offset)
{
	MqBatchHeader hdr;

	if (offset < MqLogStartOffset(topic, partition) ||
		!batch_after(topic, partition, offset, &hdr) || hdr.base_offset > offset)
		return -1;
	return hdr.leader_epoch;
}

int64
MqLogEpochEnd(MqTopic *topic, int32 partition, int32 epoch, int32 *found_epoch)
{
	int64		lso,
				leo;
	int64		start = MqLogStartOffset(topic, partition);
	int64		lo,
				hi;
	MqBatchHeader hdr;

	MqPartitionLogEnd(topic, partition, &lso, &leo);

	/*
	 * Every batch that ends at or below lo is of an epoch at most epoch;
	 * the batch at hi, if any, is of a later one.  Each step moves one of
	 * them to a batch boundary, so the two meet at the first batch of a
	 * later epoch, or at the log end.
	 */
	lo = start;
	hi = leo;
	while (lo < hi)
	{
		int64		mid = lo + (hi - lo) / 2;

		if (!batch_after(topic, partition, mid, &hdr) || hdr.base_offset >= hi)
			hi = mid;
		else if (hdr.leader_epoch > epoch)
			hi = Max(lo, hdr.base_offset);
		else
			lo = MqBatchNextOffset(&hdr);
	}
	lo = Min(lo, leo);

	/* the epoch of the batch before it: the largest one at most epoch */
	*found_epoch = -1;
	if (lo > start && batch_after(topic, partition, lo - 1, &hdr) &&
		hdr.base_offset < lo)
		*found_epoch = hdr.leader_epoch;
	return *found_epoch < 0 ? start : lo;
}
