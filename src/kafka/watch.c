/*-------------------------------------------------------------------------
 *
 * watch.c
 *		What a parked Fetch waits for: the partitions it read, so that the
 *		listener re-runs it only once one of them may have something new
 *		for it, its max_wait_ms is up or the catalog changed.
 *
 * A Fetch that parks has read, for each partition it names, the log end,
 * last stable offset and high watermark under a stamp of the partition's
 * change counter taken just before (log/partition_signal.c says when a
 * counter moves).  While none of those counters moved, a re-run would read the
 * same offsets and the same (too few) bytes, and answer nothing new: the
 * listener leaves the request parked.  The counters are grouped by topic
 * slot, and the slot's counter is read before its partitions': a wake-up
 * that moved no slot of the request (a commit to another topic) costs one
 * comparison per topic the request names, and one that moved a slot
 * costs one pass over that topic's partitions, atomic reads only, with no
 * transaction, no lock and no catalog access.  A re-run of a parked Fetch
 * whose catalog generation held is a probe: it re-reads only the
 * partitions whose counters moved, counting for the others the bytes
 * they had, and reads every partition again only if that makes an answer
 * (min_bytes reached, an error): so a Fetch of many partitions that stays
 * parked while records trickle into a few of them costs those few per
 * wake-up, plus a pass over its stamps.
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
#include "kafka/kafka_internal.h"

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
	int64		bytes;			/* the bytes the read found there */
} WatchedPartition;

struct MqKafkaWatch
{
	uint64		catalog;		/* the catalog generation when it was made */
	bool		probing;		/* this run re-reads only what moved */
	int			cursor;			/* a probe: the next partition in order */
	int			pending;		/* a probe: the partition being re-read */
	int			last;			/* the partition stamped last, or -1 */
	int			ntopics;
	int			maxtopics;
	WatchedTopic *topics;
	int			nparts;
	int			maxparts;
	WatchedPartition *parts;
};

/*
 * A run of a handler begins.  A run of a parked request whose watch still
 * holds (the same catalog generation, the same nparts partitions) and that
 * may park again is a probe: true, and the handler re-reads only the
 * partitions MqKafkaWatchUnmoved says moved, so that a Fetch of many
 * partitions costs, while it stays parked, what moved and not what it
 * names.  Otherwise the last run's watch is forgotten, and this run is
 * watched if it may park (a run that cannot, such as a Fetch without
 * max_wait_ms or its last run, would only spend memory on its stamps).
 * Without a memory context of the listener's (req->park_cxt) nothing is
 * watched and a parked request is re-run in full on every wake-up.
 */
bool
MqKafkaWatchBegin(MqKafkaRequest *req, bool may_park, bool may_probe, int nparts)
{
	MqKafkaWatch *w = req->watch;

	if (w != NULL && may_park && may_probe && w->nparts == nparts &&
		!RecoveryInProgress() && MqlogCatalogGeneration() == w->catalog)
	{
		/*
		 * The slots' counts now, before any partition is compared: a move
		 * after its comparison moves its slot past these.
		 */
		for (int i = 0; i < w->ntopics; i++)
			w->topics[i].changes = MqChangeSlotCount(w->topics[i].slot);
		pg_read_barrier();
		w->probing = true;
		w->cursor = 0;
		w->last = -1;
		return true;
	}
	req->watch = NULL;
	if (req->park_cxt == NULL)
		return false;
	MemoryContextReset(req->park_cxt);
	if (!may_park)
		return false;
	w = MemoryContextAllocZero(req->park_cxt, sizeof(MqKafkaWatch));
	w->catalog = MqlogCatalogGeneration();
	w->last = -1;
	req->watch = w;
	return false;
}

/*
 * The handler comes to its next partition, in the order of the request.
 * In a probe: true, with the bytes the last read found there, if nothing
 * moved it since; false if it is to be read again (and stamped again by
 * MqKafkaWatchPartition).  Outside a probe: false, read it.
 */
bool
MqKafkaWatchUnmoved(MqKafkaRequest *req, int64 *bytes)
{
	MqKafkaWatch *w = req->watch;
	WatchedPartition *wp;

	if (w == NULL)
		return false;
	w->last = -1;
	if (!w->probing)
		return false;
	Assert(w->cursor < w->nparts);
	wp = &w->parts[w->cursor++];
	if (wp->part == NULL || MqPartitionChanges(wp->part) == wp->changes)
	{
		*bytes = wp->bytes;
		return true;
	}
	w->pending = w->cursor - 1;
	return false;
}

/*
 * The request is about to read part's offsets: stamp it.  Called for
 * every partition whose offsets the answer holds, before they are read;
 * part NULL for one without shared state yet (it waits for the catalog
 * to change).
 */
void
MqKafkaWatchPartition(MqKafkaRequest *req, MqPartition *part)
{
	MqKafkaWatch *w = req->watch;
	uint32		slot;
	WatchedTopic *t;

	if (w == NULL)
		return;
	if (w->probing)
	{
		w->parts[w->pending].part = part;
		w->parts[w->pending].changes = part ? MqPartitionChanges(part) : 0;
		w->last = w->pending;
		return;
	}
	t = w->ntopics > 0 ? &w->topics[w->ntopics - 1] : NULL;
	/* without shared state: in the group before it, or one of slot 0 */
	slot = part ? MqPartitionChangeSlot(part) : t ? t->slot : 0;
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
	w->parts[w->nparts].changes = part ? MqPartitionChanges(part) : 0;
	w->parts[w->nparts].bytes = 0;
	w->last = w->nparts++;
	t->n++;
}

/* the bytes the read of the partition stamped last found */
void
MqKafkaWatchBytes(MqKafkaRequest *req, int64 bytes)
{
	MqKafkaWatch *w = req->watch;

	if (w != NULL && w->last >= 0)
		w->parts[w->last].bytes = bytes;
}

/*
 * May a run of the request answer differently from its last run?  The
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
			if (w->parts[p].part != NULL &&
				MqPartitionChanges(w->parts[p].part) != w->parts[p].changes)
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
