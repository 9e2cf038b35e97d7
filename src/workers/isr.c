/*-------------------------------------------------------------------------
 *
 * isr.c
 *		The leader's in-sync replica set, Kafka's rules: run every second by
 *		the cluster sync worker (cluster_sync.c) for each partition this node
 *		leads.
 *
 * A follower is in sync while it has caught up with the leader's log end
 * offset within the topic's replica.lag.time.max.ms (its "last caught-up
 * time", kept from the followers' reports by log/partition_offsets.c).  One that
 * falls behind longer, or has not reported for that long since this node
 * began to lead the partition, leaves the ISR; one that has caught up, with a log end
 * offset at or past the high watermark, joins it again.  The new ISR is
 * written to etcd first, with compare-and-swap on the partition key's
 * revision (so a concurrent leader change wins and this round changes
 * nothing), and only then to mqlog.replica_state, which the high
 * watermark and acks=all read: the leader never relies on an ISR that
 * etcd does not hold.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/int.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/xact.h"
#include "cluster/etcd.h"
#include "cluster/metadata.h"
#include "log/partition.h"
#include "log/topic.h"
#include "workers/workers.h"

/*
 * When this node began to lead each partition (at its epoch), as far as
 * this worker knows: a follower that has not reported yet counts as caught
 * up then, as Kafka starts a new leader's followers.
 */
typedef struct LeadKey
{
	int32		topic_id;
	int32		partition;
	int32		leader_epoch;
} LeadKey;

typedef struct LeadEntry
{
	LeadKey		key;
	TimestampTz since;
} LeadEntry;

static HTAB *leading = NULL;

static TimestampTz
leading_since(int32 topic_id, int32 partition, int32 epoch, TimestampTz now)
{
	LeadKey		key;
	LeadEntry  *e;
	bool		found;

	if (leading == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(LeadKey);
		ctl.entrysize = sizeof(LeadEntry);
		leading = hash_create("mqlog leading partitions", 256, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	memset(&key, 0, sizeof(key));
	key.topic_id = topic_id;
	key.partition = partition;
	key.leader_epoch = epoch;
	e = hash_search(leading, &key, HASH_ENTER, &found);
	if (!found)
		e->since = now;
	return e->since;
}

/*
 * Is since more than lag_ms before now?  replica.lag.time.max.ms goes up
 * to 2^63 - 1 and TimestampDifferenceExceeds takes an int: passed there,
 * 2^31 ms and more were cut to a negative count (or to a small one), and
 * every follower looked behind.  A lag whose microseconds no int64 holds
 * is never exceeded.
 */
static bool
lag_exceeded(TimestampTz since, TimestampTz now, int64 lag_ms)
{
	int64		lag_us;
	int64		diff;

	if (pg_mul_s64_overflow(lag_ms, 1000, &lag_us))
		return lag_ms < 0;
	if (pg_sub_s64_overflow(now, since, &diff))
		return now > since;
	return diff >= lag_us;
}

/*
 * The ISR this partition should have now: the leader, then each replica
 * in replica order that is caught up within lag_ms (and, to join, holds
 * everything below the high watermark).
 */
static List *
wanted_isr(MqTopic *topic, int32 partition, MqPartitionMeta *meta, int64 lag_ms,
		   TimestampTz now, TimestampTz started)
{
	MqPartition *part = MqTopicPartition(topic, partition);
	int64		lso,
				hw;
	List	   *isr = list_make1(meta->leader);
	ListCell   *lc;

	MqPartitionOffsets(topic, partition, &lso, &hw);
	foreach(lc, meta->replicas)
	{
		const char *node = lfirst(lc);
		MqFollowerProgress fp;
		bool		reported = MqPartitionFollowerProgress(part, node, &fp) &&
			fp.epoch == meta->leader_epoch;
		bool		now_in = MqClusterNameListed(meta->isr, node);
		bool		fresh;

		if (strcmp(node, meta->leader) == 0)
			continue;
		if (reported)
			fresh = !lag_exceeded(fp.caught_up, now, lag_ms);
		else
			fresh = now_in && !lag_exceeded(started, now, lag_ms);
		if (now_in ? fresh : (reported && fresh && fp.leo >= hw))
			isr = lappend(isr, (char *) node);
	}
	return isr;
}

static bool
same_names(List *a, List *b)
{
	ListCell   *lc;

	if (list_length(a) != list_length(b))
		return false;
	foreach(lc, a)
		if (!MqClusterNameListed(b, lfirst(lc)))
			return false;
	return true;
}

/* one partition: returns true if its ISR changed */
static bool
maintain_one(int32 topic_id, const char *name, int32 partition, int64 lag_ms, TimestampTz now)
{
	MqTopic    *topic = MqTopicLookup(name, true);
	char	   *key = MqClusterKey("partitions/%s/%d", name, partition);
	MqEtcdKv	kv;
	MqPartitionMeta *meta;
	List	   *isr;
	int64		rev;
	MqPartition *part;

	if (topic == NULL || partition >= topic->partitions || !MqTopicLeadsHere(topic, partition))
		return false;
	if (!MqEtcdGet(key, &kv, NULL))
		return false;
	meta = MqPartitionMetaParse(kv.value, partition, kv.mod_revision);
	if (meta->leader == NULL || strcmp(meta->leader, MqClusterNodeName()) != 0)
		return false;			/* etcd moved the leader: the sync catches up */
	isr = wanted_isr(topic, partition, meta, lag_ms, now,
					 leading_since(topic_id, partition, meta->leader_epoch, now));
	part = MqTopicPartition(topic, partition);
	if (same_names(isr, meta->isr))
	{
		/* what etcd says, for the high watermark */
		MqPartitionSetIsr(part, meta->leader_epoch, meta->isr);
		return false;
	}
	{
		char	   *from = MqClusterNamesText(meta->isr);
		List	   *was = meta->isr;
		List	   *both = list_copy(was);
		ListCell   *lc;

		/*
		 * The high watermark counts a joining replica before etcd lists it,
		 * and a leaving one until etcd no longer does: never fewer than etcd
		 * may list, whoever reads etcd meanwhile (the elector electing).
		 */
		foreach(lc, isr)
			if (!MqClusterNameListed(both, lfirst(lc)))
				both = lappend(both, lfirst(lc));
		MqPartitionSetIsr(part, meta->leader_epoch, both);
		meta->isr = isr;
		if (!MqEtcdPutIfModRevision(key, MqPartitionMetaJson(meta), kv.mod_revision, 0, &rev))
		{
			MqPartitionSetIsr(part, meta->leader_epoch, was);
			return false;		/* someone else wrote it first: next round */
		}
		MqPartitionSetIsr(part, meta->leader_epoch, isr);
		ereport(LOG,
				(errmsg("mqlog: in-sync replicas of partition %d of topic \"%s\" changed from %s to %s",
						partition, name, from, MqClusterNamesText(isr))));
	}
	meta->mod_revision = rev;
	MqClusterStoreLocal(topic_id, NULL, list_make1(meta));
	return true;
}

/*
 * Every partition this node leads, each in a transaction of its own, so
 * that one failure (etcd unreachable) costs one round of one partition.
 * Called in the cluster database, outside a transaction.
 */
typedef struct LedPartition
{
	int32		topic_id;
	char	   *name;
	int32		partition;
	int64		lag_ms;
} LedPartition;

typedef struct MaintainArg
{
	LedPartition *lp;
	TimestampTz now;
} MaintainArg;

static void
maintain_work(void *arg)
{
	MaintainArg *m = arg;

	(void) maintain_one(m->lp->topic_id, m->lp->name, m->lp->partition, m->lp->lag_ms, m->now);
}

/* one partition in a transaction of its own; an error is logged */
static void
maintain_guarded(LedPartition *lp, TimestampTz now)
{
	MaintainArg m = {lp, now};
	ErrorData  *e;

	if (!MqRunInTransaction(maintain_work, &m, &e))
	{
		ereport(LOG,
				(errmsg("mqlog: could not maintain the in-sync replicas of partition %d of topic \"%s\": %s",
						lp->partition, lp->name, e->message)));
		FreeErrorData(e);
	}
}

void
MqIsrRound(void)
{
	MemoryContext outer = CurrentMemoryContext;
	List	   *todo = NIL;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();

	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(MqClusterNodeName())};

		if (SPI_execute_with_args("SELECT t.topic_id, t.name, r.\"partition\","
								  "       (mqlog.effective_config(t.config)"
								  "          OPERATOR(pg_catalog.->>) 'replica.lag.time.max.ms')::pg_catalog.int8"
								  "  FROM mqlog.replica_state r JOIN mqlog.topic t USING (topic_id)"
								  " WHERE r.leader OPERATOR(pg_catalog.=) $1"
								  " ORDER BY 1, 3",
								  1, types, values, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog: reading the partitions this node leads failed");
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(outer);
		LedPartition *lp = palloc(sizeof(LedPartition));

		lp->topic_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		lp->name = SPI_getvalue(tup, desc, 2);	/* in outer, as palloc is */
		lp->partition = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
		lp->lag_ms = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		todo = lappend(todo, lp);
		MemoryContextSwitchTo(old);
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
	MemoryContextSwitchTo(outer);

	foreach(lc, todo)
		maintain_guarded(lfirst(lc), now);
	list_free_deep(todo);
}

/*
 * Checkpoint the high watermark of every replicated partition here into
 * mqlog.replica_state (Kafka's replication-offset-checkpoint), so that
 * after a restart readers go on from it instead of waiting for every
 * in-sync replica to report.  Called in the cluster database, outside a
 * transaction.
 */
static void
checkpoint_work(void *arg)
{
	if (SPI_execute("SELECT t.name, r.\"partition\", r.high_watermark"
					"  FROM mqlog.replica_state r JOIN mqlog.topic t USING (topic_id)",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: reading mqlog.replica_state failed");
	{
		SPITupleTable *rows = SPI_tuptable;
		uint64		n = SPI_processed;

		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;
			char	   *name = SPI_getvalue(rows->vals[i], rows->tupdesc, 1);
			int32		partition = DatumGetInt32(SPI_getbinval(rows->vals[i], rows->tupdesc, 2, &isnull));
			int64		saved = DatumGetInt64(SPI_getbinval(rows->vals[i], rows->tupdesc, 3, &isnull));
			MqTopic    *topic = MqTopicLookup(name, true);
			int64		lso,
						hw;
			Oid			types[3] = {TEXTOID, INT4OID, INT8OID};
			Datum		values[3];

			if (topic == NULL || partition >= topic->partitions)
				continue;
			MqPartitionOffsets(topic, partition, &lso, &hw);
			if (hw <= saved)
				continue;
			values[0] = CStringGetTextDatum(name);
			values[1] = Int32GetDatum(partition);
			values[2] = Int64GetDatum(hw);
			if (SPI_execute_with_args("UPDATE mqlog.replica_state r SET high_watermark = $3"
									  "  FROM mqlog.topic t"
									  " WHERE t.topic_id OPERATOR(pg_catalog.=) r.topic_id"
									  "   AND t.name OPERATOR(pg_catalog.=) $1"
									  "   AND r.\"partition\" OPERATOR(pg_catalog.=) $2"
									  "   AND r.high_watermark OPERATOR(pg_catalog.<) $3",
									  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "mqlog: checkpointing a high watermark failed");
		}
	}
}

void
MqCheckpointHighWatermarks(void)
{
	ErrorData  *e;

	/* in a transaction of its own: a failure here holds up nothing else */
	if (!MqRunInTransaction(checkpoint_work, NULL, &e))
	{
		ereport(LOG,
				(errmsg("mqlog: could not checkpoint the high watermarks: %s", e->message)));
		FreeErrorData(e);
	}
}
