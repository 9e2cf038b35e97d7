/*-------------------------------------------------------------------------
 *
 * watch.c
 *		What a parked Fetch waits for: the partitions it read, so that the
 *		listener re-runs it only once one of them may have something new
 *		for it, its max_wait_ms is up or the catalog changed.
 *
 * A Fetch that parks has read, for each partition it names, the log end,
 * last stable offset and high watermark under a stamp of the partition's
 * change counter taken just before (log/partition.c says when a counter
 * moves).  While none of those counters moved, a re-run would read the
 * same offsets and the same (too few) bytes, and answer nothing new: the
 * listener leaves the request parked.  The counters are grouped by topic
 * slot, and the slot's counter is read before its partitions': a wake-up
 * that moved no slot of the request (a commit to another topic) costs one
 * comparison per topic the request names, and one that moved a slot
 * costs one pass over that topic's partitions, atomic reads only, with no
 * transaction, no lock and no catalog access.
 *
 * What changes a Fetch's answer other than its partitions' data is in
 * the catalog, and every catalog change of mqlog bumps the catalog
 * generation: a topic dropped, altered or grown, a leader elected or an
 * in-sync replica set changed (the cluster worker records them), the log
 * start moved by retention or mq_delete_records, a privilege granted or
 * revoked.  A generation that moved re-runs every watched request once.
 * On a hot standby replay moves the logs and nobody counts, so there a
 * watched request is re-run on every wake-up as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "port/atomics.h"
#include "utils/memutils.h"

#include "log/partition.h"
#include "kafka/internal.h"

typedef struct WatchedTopic
{
	uint32		slot;			/* its change slot (MqPartitionChangeSlot) */
	uint64		changes;		/* the slot's counter, read before any stamp */
	int			first;			/* its partitions: parts[first .. first+n) */
	int			n;
} WatchedTopic;

typedef struct WatchedPartition
{
	MqPartition *part;
	uint64		changes;		/* its counter when it was read */
} WatchedPartition;

struct MqKafkaWatch
{
	uint64		catalog;		/* the catalog generation when the run began */
	int			ntopics;
	int			maxtopics;
	WatchedTopic *topics;
	int			nparts;
	int			maxparts;
	WatchedPartition *parts;
};

/*
 * A run of a handler begins: forget what the last run watched, and watch
 * this one if it may park (a run that cannot, such as a Fetch without
 * max_wait_ms or its last run, would only spend memory on its stamps).
 * Without a memory context of the listener's (req->park_cxt) nothing is
 * watched and a parked request is re-run on every wake-up.
 */
void
MqKafkaWatchBegin(MqKafkaRequest *req, bool may_park)
{
	MqKafkaWatch *w;

	req->watch = NULL;
	if (req->park_cxt == NULL)
		return;
	MemoryContextReset(req->park_cxt);
	if (!may_park)
		return;
	w = MemoryContextAllocZero(req->park_cxt, sizeof(MqKafkaWatch));
	w->catalog = MqlogCatalogGeneration();
	req->watch = w;
}

/*
 * The request is about to read part's offsets: stamp it.  Called for
 * every partition whose offsets the answer holds, before they are read.
 */
void
MqKafkaWatchPartition(MqKafkaRequest *req, MqPartition *part)
{
	MqKafkaWatch *w = req->watch;
	uint32		slot;
	WatchedTopic *t;

	if (w == NULL)
		return;
	slot = MqPartitionChangeSlot(part);
	t = w->ntopics > 0 ? &w->topics[w->ntopics - 1] : NULL;
	if (t == NULL || t->slot != slot)
	{
		if (w->ntopics == w->maxtopics)
		{
			w->maxtopics = Max(4, w->maxtopics * 2);
			w->topics = w->topics == NULL ?
				MemoryContextAlloc(req->park_cxt, sizeof(WatchedTopic) * w->maxtopics) :
				repalloc(w->topics, sizeof(WatchedTopic) * w->maxtopics);
		}
		t = &w->topics[w->ntopics++];
		t->slot = slot;
		t->changes = MqChangeSlotCount(slot);
		pg_read_barrier();		/* the slot's count before the partitions' */
		t->first = w->nparts;
		t->n = 0;
	}
	if (w->nparts == w->maxparts)
	{
		w->maxparts = Max(16, w->maxparts * 2);
		w->parts = w->parts == NULL ?
			MemoryContextAlloc(req->park_cxt, sizeof(WatchedPartition) * w->maxparts) :
			repalloc(w->parts, sizeof(WatchedPartition) * w->maxparts);
	}
	w->parts[w->nparts].part = part;
	w->parts[w->nparts].changes = MqPartitionChanges(part);
	w->nparts++;
	t->n++;
}

/*
 * May a re-run of the request answer differently from its last run?  The
 * listener asks outside any transaction.  A topic slot that moved with
 * none of the request's partitions is remembered at its new count, so
 * the next wake-up does not pass over the same partitions again.
 */
bool
MqKafkaWatchMoved(MqKafkaWatch *w)
{
	if (w == NULL || RecoveryInProgress() || MqlogCatalogGeneration() != w->catalog)
		return true;
	for (int i = 0; i < w->ntopics; i++)
	{
		WatchedTopic *t = &w->topics[i];
		uint64		now = MqChangeSlotCount(t->slot);

		if (now == t->changes)
			continue;
		pg_read_barrier();		/* as MqKafkaWatchPartition read them */
		for (int p = t->first; p < t->first + t->n; p++)
			if (MqPartitionChanges(w->parts[p].part) != w->parts[p].changes)
				return true;
		t->changes = now;
	}
	return false;
}

/* how many partitions the request watches: what a re-run of it costs */
int
MqKafkaWatchSize(const MqKafkaWatch *w)
{
	return w == NULL ? 1 : Max(w->nparts, 1);
}
