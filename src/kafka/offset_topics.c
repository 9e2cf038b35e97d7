/*-------------------------------------------------------------------------
 *
 * offset_topics.c
 *		The topics-and-partitions array that the offset APIs
 *		(api_group_offsets.c) and the transaction APIs
 *		(api_txn_offset_commit.c, api_add_partitions_to_txn.c) read alike,
 *		and the per-partition errors they answer alike.
 *
 * Each request names topics, each with partitions by index; what follows
 * an index differs by API and version, so the caller reads it.  The
 * answer is the same array again, each partition with its error code.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "kafka/kafka_internal.h"

/*
 * ntopics topics (the count the caller read: some APIs take a null array),
 * each a name and its partitions; min_partition_size: the fewest bytes a
 * partition can take, which bounds the count (MqKafkaReadArrayLen);
 * read_partition reads what follows each index (NULL: nothing).  NULL:
 * malformed.  One more element than asked is allocated in both arrays, so
 * that none is of size 0.
 */
MqKafkaOffsetTopic *
MqKafkaReadOffsetTopics(MqKafkaReader *r, bool flex, int16 version, int32 ntopics,
						int min_partition_size, MqKafkaOffsetPartitionReader read_partition)
{
	MqKafkaOffsetTopic *topics = palloc0(sizeof(MqKafkaOffsetTopic) * (ntopics + 1));

	for (int t = 0; t < ntopics && !r->failed; t++)
	{
		MqKafkaOffsetTopic *ot = &topics[t];

		ot->name = MqKafkaReadString(r, flex, NULL);
		ot->npartitions = MqKafkaReadArrayLen(r, flex, min_partition_size);
		if (ot->name == NULL || ot->npartitions < 0)
			return NULL;
		ot->partitions = palloc0(sizeof(MqKafkaOffsetPartition) * (ot->npartitions + 1));
		for (int p = 0; p < ot->npartitions && !r->failed; p++)
		{
			ot->partitions[p].index = MqKafkaReadInt32(r);
			if (read_partition)
				read_partition(r, flex, version, &ot->partitions[p]);
		}
		MqKafkaSkipTags(r, flex);
	}
	return r->failed ? NULL : topics;
}

/*
 * Each topic with its partitions' indexes and error codes, as OffsetCommit,
 * OffsetDelete, AddPartitionsToTxn and TxnOffsetCommit answer after their
 * own first fields (with tagged fields where the version is flexible)
 */
void
MqKafkaWritePartitionErrors(StringInfo out, bool flex, const MqKafkaOffsetTopic *topics,
							int ntopics)
{
	MqKafkaWriteArrayLen(out, flex, ntopics);
	for (int t = 0; t < ntopics; t++)
	{
		MqKafkaWriteString(out, flex, topics[t].name);
		MqKafkaWriteArrayLen(out, flex, topics[t].npartitions);
		for (int p = 0; p < topics[t].npartitions; p++)
		{
			MqKafkaWriteInt32(out, topics[t].partitions[p].index);
			MqKafkaWriteInt16(out, topics[t].partitions[p].error);
			MqKafkaWriteTags(out, flex);
		}
		MqKafkaWriteTags(out, flex);
	}
}
