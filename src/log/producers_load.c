/*-------------------------------------------------------------------------
 *
 * producers_load.c
 *		Loading a partition's idempotent producers from its log: the state
 *		producers.c keeps is rebuilt, with no file of its own, from the
 *		batch headers at the log's end.
 *
 * Every stored batch is Kafka's record batch v2 with its producer id,
 * epoch, base sequence and record count, and every replica holds the same
 * batches, so the log is the state's source of truth.  After a restart
 * (or kill -9), or on a node that leads a partition at a new leader epoch
 * (a follower promoted), the first append with a producer id to the
 * partition loads it: the headers of the committed batches from
 * max(log start, end - mqlog.kafka_producer_state_window) to the end,
 * applied in order as Kafka loads a log (MqProducerStateAdd, unchecked).
 * The work is bounded by the window.  Its consequence: a producer whose
 * last batch is older than the window is unknown after a restart, so a
 * retry of a batch that old is not recognized and appended again (Kafka's
 * equivalent is the expiry of a producer's state, producer.id.expiration.ms).
 *
 * Only batches whose transaction committed count (aborted ones are holes,
 * and one still running is skipped: no batch with a producer id can be
 * running, since its appender would have waited for this load).  One
 * backend loads a partition at a time, under a heavyweight lock on it
 * (an advisory lock tag of mqlog's own, which no SQL advisory lock can
 * name); an appender that finds the partition loading waits for that lock
 * and then finds the partition loaded.  An error releases the lock with
 * the transaction, and the next appender loads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "lib/ilist.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "store/segment.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/producers.h"
#include "log/producers_load.h"
#include "log/topic.h"

/* the advisory lock's field4: SQL's advisory locks use 1 and 2 */
#define MQ_PRODUCERS_LOCK_TAG	0x4D51

/* a producer as the load finds it, in least recently used order */
typedef struct Found
{
	int64		producer_id;	/* hash key */
	dlist_node	node;
	MqProducerState state;
} Found;

void
MqProducerKeyOf(MqProducerKey *key, MqTopic *topic, int32 partition, int64 producer_id)
{
	memset(key, 0, sizeof(*key));
	key->dboid = MyDatabaseId;
	key->catalog_relid = topic->catalog_relid;
	key->topic_id = topic->topic_id;
	key->partition = partition;
	key->producer_id = producer_id;
}

/*
 * The offset the window starts at: the batch covering the first block of
 * the partition's last mqlog.kafka_producer_state_window bytes, counted in
 * whole blocks of its segments from the newest back.
 */
static int64
window_start(MqTopic *topic, int32 partition)
{
	int64		want = (int64) mqlog_kafka_producer_state_window * 1024;
	int64		from = 0;

	for (int i = topic->nsegments[partition] - 1; i >= 0; i--)
	{
		const MqSegmentRef *ref = &topic->segments[partition][i];
		Relation	rel = try_table_open(ref->relid, AccessShareLock);
		int64		bytes;

		if (rel == NULL)
			break;				/* gone to retention: the log starts after it */
		bytes = (int64) MqSegmentUsedBlocks(rel) * BLCKSZ;
		from = ref->base_offset;
		if (bytes >= want)
		{
			int64		at = MqSegmentOffsetAtBlock(rel, (BlockNumber) ((bytes - want) / BLCKSZ));

			if (at >= 0)
				from = at;
			table_close(rel, AccessShareLock);
			break;
		}
		want -= bytes;
		table_close(rel, AccessShareLock);
	}
	return Max(from, MqLogStartOffset(topic, partition));
}

/*
 * Load the partition's producers, unless another backend has loaded them
 * meanwhile; *topicp is refreshed first, so that the window reads the
 * segment chain as it is now.
 */
void
MqProducersLoad(MqTopic **topicp, int32 partition, int32 leader_epoch)
{
	MqTopic    *topic = *topicp;
	MqProducerKey pkey;
	LOCKTAG		tag;
	MemoryContext cxt,
				old;
	HASHCTL		info;
	HTAB	   *found;
	dlist_head	lru;
	int			n = 0;
	int64	   *ids;
	MqProducerState *states;
	MqLogIter	it;
	dlist_iter	di;

	MqProducerKeyOf(&pkey, topic, partition, -1);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) topic->topic_id, (uint32) partition,
						 MQ_PRODUCERS_LOCK_TAG);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
	if (MqProducersLoaded(&pkey, leader_epoch))
	{
		LockRelease(&tag, ExclusiveLock, false);
		return;
	}
	topic = *topicp = MqTopicRefresh(topic->name);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "mqlog producers load", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(int64);
	info.entrysize = sizeof(Found);
	info.hcxt = cxt;
	found = hash_create("mqlog producers found", 1024, &info, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	dlist_init(&lru);

	/* headers only, every fate: the clog decides each batch with a producer */
	MqLogIterBegin(&it, topic, partition, window_start(topic, partition), -1, MQ_ITER_ANY_FATE);
	while (MqLogNextBatch(&it))
	{
		const MqBatchHeader *h = &it.hdr;
		Found	   *f;
		bool		present;

		if (h->producer_id < 0 || (h->attributes & MQ_ATTR_CONTROL) ||
			MqBatchGetFate(h, -1) != MQ_FATE_VISIBLE)
			continue;
		f = hash_search(found, &h->producer_id, HASH_ENTER, &present);
		if (!present)
		{
			f->state.epoch = -1;
			f->state.nbatches = 0;
			dlist_push_tail(&lru, &f->node);
			/* no more than the shared hash could hold: the oldest go */
			if (++n > mqlog_max_producer_states)
			{
				Found	   *oldest = dlist_container(Found, node, dlist_pop_head_node(&lru));

				hash_search(found, &oldest->producer_id, HASH_REMOVE, NULL);
				n--;
			}
		}
		else
			dlist_move_tail(&lru, &f->node);
		MqProducerStateAdd(&f->state, h->producer_epoch, h->base_sequence,
						   MqProducerSeqAdd(h->base_sequence, h->last_offset_delta),
						   h->base_offset, MqBatchNextOffset(h) - 1);
	}
	MqLogIterEnd(&it);

	ids = palloc(sizeof(int64) * (n + 1));
	states = palloc(sizeof(MqProducerState) * (n + 1));
	n = 0;
	dlist_foreach(di, &lru)
	{
		Found	   *f = dlist_container(Found, node, di.cur);

		ids[n] = f->producer_id;
		states[n++] = f->state;
	}
	MemoryContextSwitchTo(old);
	MqProducersInstall(&pkey, leader_epoch, n, ids, states);
	MemoryContextDelete(cxt);
	LockRelease(&tag, ExclusiveLock, false);
	ereport(DEBUG1,
			(errmsg("loaded %d idempotent producers of partition %d of topic \"%s\" from its log",
					n, partition, topic->name)));
}
