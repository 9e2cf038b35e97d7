/*-------------------------------------------------------------------------
 *
 * topic.c
 *		Backend-local cache of topic metadata (id, partitions, the settings
 *		the hot path needs, the segment chains), read from the catalog.
 *
 * Produce and fetch look topics up by name on every call, so the catalog
 * is read through SPI only when the shared catalog generation moves (any
 * topic DDL bumps it, see partition_signal.c); otherwise a lookup is one
 * hash probe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "storage/proc.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"

#include "base/spi.h"
#include "store/batch.h"
#include "log/partition_signal.h"
#include "log/partition_roll.h"
#include "log/topic.h"
#include "cluster/metadata.h"

typedef struct TopicEntry
{
	char		name[256];		/* hash key */
	MqTopic    *topic;			/* NULL: known not to exist */
} TopicEntry;

/*
 * An append to a partition whose first segment the maintenance worker has
 * yet to create waits up to MQ_CREATE_WAIT_MS, looking every
 * MQ_CREATE_POLL_MS (see MqTopicPartitionPending).
 */
#define MQ_CREATE_WAIT_MS	30000
#define MQ_CREATE_POLL_MS	50

static MemoryContext topic_cxt = NULL;
static HTAB *topic_hash = NULL;
static uint64 topic_generation = 0;
static bool topic_in_recovery = false;	/* cache was filled during recovery */
static LocalTransactionId topic_lxid = InvalidLocalTransactionId;

static void
reset_cache(void)
{
	HASHCTL		ctl;

	/*
	 * Callers may still hold MqTopic pointers from the old cache during this
	 * transaction, so the old context lives until the transaction ends.
	 */
	if (topic_cxt != NULL)
	{
		if (IsTransactionState())
			MemoryContextSetParent(topic_cxt, TopTransactionContext);
		else
			MemoryContextDelete(topic_cxt);
	}
	topic_cxt = AllocSetContextCreate(CacheMemoryContext, "mqlog topic cache",
									  ALLOCSET_DEFAULT_SIZES);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(((TopicEntry *) 0)->name);
	ctl.entrysize = sizeof(TopicEntry);
	ctl.hcxt = topic_cxt;
	topic_hash = hash_create("mqlog topics", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * A prepared segment sorts first (its base offset is MQ_SPARE_BASE).  If the
 * partition has rolled into it and the worker has not recorded that yet, it
 * is the active segment, the last of the chain, and the one before it is
 * sealed; otherwise it waits in topic->spares.
 */
static void
place_spare(MqTopic *t, int p)
{
	MqSegmentRef *segs = t->segments[p];
	int			n = t->nsegments[p];
	MqSegmentRef spare;
	int64		base;

	if (n == 0 || segs[0].base_offset != MQ_SPARE_BASE)
		return;
	spare = segs[0];
	memmove(&segs[0], &segs[1], sizeof(MqSegmentRef) * (n - 1));
	t->nsegments[p] = --n;
	base = MqPartitionSpareBase(MqTopicPartition(t, p), spare.relid);
	if (base < 0 || n == 0)
	{
		t->spares[p] = spare.relid;
		return;
	}
	segs[n - 1].sealed = true;
	spare.base_offset = base;
	spare.sealed = false;
	segs[n] = spare;
	t->nsegments[p] = n + 1;
}

/* a text[] of mqlog.replica_state as C strings (a null array: none; a null element: "") */
static char **
text_array(Datum d, bool isnull, int *n)
{
	Datum	   *elems;
	bool	   *enulls;
	char	  **result;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &enulls, n);
	result = palloc0(sizeof(char *) * Max(*n, 1));
	for (int k = 0; k < *n; k++)
		result[k] = enulls[k] ? pstrdup("") : TextDatumGetCString(elems[k]);
	return result;
}

static MqTopic *
load_topic(const char *where, Datum arg, Oid argtype)
{
	MqTopic    *t = NULL;
	char		query[1024];
	int			ret;
	MqSpi		spi;
	int64		catchups;

	snprintf(query, sizeof(query),
			 "SELECT t.topic_id, t.name, t.partitions,"
			 " (c OPERATOR(pg_catalog.->>) 'max.message.bytes')::pg_catalog.int8,"
			 " (c OPERATOR(pg_catalog.->>) 'message.timestamp.type') OPERATOR(pg_catalog.=) 'LogAppendTime',"
			 " (c OPERATOR(pg_catalog.->>) 'cleanup.policy') OPERATOR(pg_catalog.~~) '%%compact%%',"
			 " (c OPERATOR(pg_catalog.->>) 'delete.retention.ms')::pg_catalog.int8,"
			 " t.owner,"
			 " c OPERATOR(pg_catalog.->>) 'compression.type',"
			 " (c OPERATOR(pg_catalog.->>) 'segment.bytes')::pg_catalog.int8,"
			 " (c OPERATOR(pg_catalog.->>) 'segment.ms')::pg_catalog.int8,"
			 " t.replication_factor,"
			 " (c OPERATOR(pg_catalog.->>) 'min.insync.replicas')::pg_catalog.int4,"
			 " (c OPERATOR(pg_catalog.->>) 'unclean.leader.election.enable')::pg_catalog.bool,"
			 " t.xmin"
			 " FROM mqlog.topic t, LATERAL mqlog.effective_config(t.config) c"
			 " WHERE t.%s OPERATOR(pg_catalog.=) $1",
			 where);
	/*
	 * Read the catalog as it is now, not as the statement's or transaction's
	 * snapshot saw it: a producer must find the segment a roll made active
	 * a moment ago, also in a REPEATABLE READ transaction.  (A fresh
	 * snapshot still sees this transaction's own earlier changes.)  The
	 * catalog is readable by the extension owner only.
	 */
	catchups = MqClusterSyncCatchups();
	MqSpiBegin(&spi, true);
	PushActiveSnapshot(GetLatestSnapshot());
	ret = SPI_execute_with_args(query, 1, &argtype, &arg, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "mqlog: topic lookup failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(topic_cxt);
		Datum		segarg;
		Oid			segtype = INT4OID;
		int		   *fill;

		t = palloc0(sizeof(MqTopic));
		t->catalog_relid = MqTopicCatalogRelid();
		t->topic_id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		t->name = pstrdup(TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull)));
		t->partitions = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
		t->max_message_bytes = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		t->log_append_time = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
		t->compact = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		t->delete_retention_ms = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
		t->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 8, &isnull));
		if (isnull)
			t->owner = InvalidOid;
		{
			Datum		d = SPI_getbinval(tup, desc, 9, &isnull);

			t->compression = isnull ? MQ_CODEC_PRODUCER :
				MqCodecFromName(TextDatumGetCString(d));
			if (t->compression < MQ_CODEC_PRODUCER)
				t->compression = MQ_CODEC_PRODUCER;
		}
		t->segment_bytes = DatumGetInt64(SPI_getbinval(tup, desc, 10, &isnull));
		t->segment_ms = DatumGetInt64(SPI_getbinval(tup, desc, 11, &isnull));
		t->replication_factor = DatumGetInt32(SPI_getbinval(tup, desc, 12, &isnull));
		t->min_insync_replicas = DatumGetInt32(SPI_getbinval(tup, desc, 13, &isnull));
		if (isnull)
			t->min_insync_replicas = 1;
		t->unclean_election = DatumGetBool(SPI_getbinval(tup, desc, 14, &isnull)) && !isnull;
		t->sync_catchups = catchups;
		t->written_here = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(tup, desc, 15, &isnull)));
		t->nsegments = palloc0(sizeof(int) * t->partitions);
		t->segments = palloc0(sizeof(MqSegmentRef *) * t->partitions);
		t->parts = palloc0(sizeof(MqPartition *) * t->partitions);
		t->spares = palloc0(sizeof(Oid) * t->partitions);
		t->log_starts = palloc(sizeof(int64) * t->partitions);
		for (int p = 0; p < t->partitions; p++)
			t->log_starts[p] = -1;
		MemoryContextSwitchTo(old);

		segarg = Int32GetDatum(t->topic_id);
		ret = SPI_execute_with_args("SELECT a.grantee, a.privs FROM mqlog.topic_acl a"
									" WHERE a.topic_id OPERATOR(pg_catalog.=) $1",
									1, &segtype, &segarg, NULL, true, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "mqlog: topic privilege lookup failed: %s", SPI_result_code_string(ret));
		old = MemoryContextSwitchTo(topic_cxt);
		t->acl = palloc0(sizeof(MqTopicAclItem) * Max(SPI_processed, 1));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			t->acl[i].grantee = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
			t->acl[i].privs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		}
		t->nacl = SPI_processed;
		MemoryContextSwitchTo(old);

		ret = SPI_execute_with_args("SELECT s.partition, s.base_offset, s.relid, s.sealed FROM mqlog.segment s"
									" WHERE s.topic_id OPERATOR(pg_catalog.=) $1 ORDER BY s.partition, s.base_offset",
									1, &segtype, &segarg, NULL, true, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "mqlog: segment lookup failed: %s", SPI_result_code_string(ret));
		old = MemoryContextSwitchTo(topic_cxt);
		/* two passes: count each partition's segments, then fill them in */
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			int			p = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

			if (p >= 0 && p < t->partitions)
				t->nsegments[p]++;
		}
		fill = palloc0(sizeof(int) * t->partitions);
		for (int p = 0; p < t->partitions; p++)
			if (t->nsegments[p] > 0)
				t->segments[p] = palloc(sizeof(MqSegmentRef) * t->nsegments[p]);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	st = SPI_tuptable->vals[i];
			TupleDesc	sd = SPI_tuptable->tupdesc;
			int			p = DatumGetInt32(SPI_getbinval(st, sd, 1, &isnull));
			MqSegmentRef *ref;

			if (p < 0 || p >= t->partitions)
				continue;
			ref = &t->segments[p][fill[p]++];
			ref->base_offset = DatumGetInt64(SPI_getbinval(st, sd, 2, &isnull));
			ref->relid = DatumGetObjectId(SPI_getbinval(st, sd, 3, &isnull));
			ref->sealed = DatumGetBool(SPI_getbinval(st, sd, 4, &isnull));
		}
		pfree(fill);
		for (int p = 0; p < t->partitions; p++)
			place_spare(t, p);
		MemoryContextSwitchTo(old);

		/* log start offsets that mq_delete_records moved */
		ret = SPI_execute_with_args("SELECT l.\"partition\", l.log_start_offset FROM mqlog.log_start l"
									" WHERE l.topic_id OPERATOR(pg_catalog.=) $1",
									1, &segtype, &segarg, NULL, true, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "mqlog: log start lookup failed: %s", SPI_result_code_string(ret));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			int			p = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

			if (p >= 0 && p < t->partitions)
				t->log_starts[p] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		}

		/* a replicated topic: its identity, who leads each partition, and who is in sync */
		if (t->replication_factor > 1)
		{
			ret = SPI_execute_with_args("SELECT r.uuid FROM mqlog.replicated_topic r"
										" WHERE r.topic_id OPERATOR(pg_catalog.=) $1",
										1, &segtype, &segarg, NULL, true, 1);
			if (ret != SPI_OK_SELECT)
				elog(ERROR, "mqlog: replicated topic lookup failed: %s", SPI_result_code_string(ret));
			if (SPI_processed == 1)
				t->uuid = MemoryContextStrdup(topic_cxt,
											  SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
			ret = SPI_execute_with_args("SELECT r.partition, r.leader, r.leader_epoch, r.isr,"
										"       r.high_watermark, r.replicas"
										"  FROM mqlog.replica_state r"
										" WHERE r.topic_id OPERATOR(pg_catalog.=) $1",
										1, &segtype, &segarg, NULL, true, 0);
			if (ret != SPI_OK_SELECT)
				elog(ERROR, "mqlog: replica lookup failed: %s", SPI_result_code_string(ret));
			old = MemoryContextSwitchTo(topic_cxt);
			t->replicas = palloc0(sizeof(MqReplicaInfo) * t->partitions);
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				HeapTuple	rt = SPI_tuptable->vals[i];
				TupleDesc	rd = SPI_tuptable->tupdesc;
				int			p = DatumGetInt32(SPI_getbinval(rt, rd, 1, &isnull));
				MqReplicaInfo *ri;
				Datum		d;

				if (p < 0 || p >= t->partitions)
					continue;
				ri = &t->replicas[p];
				d = SPI_getbinval(rt, rd, 2, &isnull);
				ri->leader = isnull ? NULL : TextDatumGetCString(d);
				ri->leader_epoch = DatumGetInt32(SPI_getbinval(rt, rd, 3, &isnull));
				ri->isr = text_array(SPI_getbinval(rt, rd, 4, &isnull), isnull, &ri->nisr);
				ri->hw_checkpoint = DatumGetInt64(SPI_getbinval(rt, rd, 5, &isnull));
				ri->replicas = text_array(SPI_getbinval(rt, rd, 6, &isnull), isnull,
										  &ri->nreplicas);
			}
			MemoryContextSwitchTo(old);
		}
	}
	PopActiveSnapshot();
	MqSpiEnd(&spi);
	return t;
}

/*
 * The shared generation counter moves only with DDL run on this server.  On
 * a hot standby the catalog changes by replay, which nobody counts, so there
 * the cache lives for one transaction; and a cache filled during recovery is
 * dropped once the server is promoted.
 */
static void
check_generation(void)
{
	uint64		gen = MqlogCatalogGeneration();
	bool		in_recovery = RecoveryInProgress();

	if (topic_hash == NULL || gen != topic_generation ||
		in_recovery != topic_in_recovery ||
		(in_recovery && topic_lxid != MyProc->lxid))
	{
		reset_cache();
		topic_generation = gen;
		topic_in_recovery = in_recovery;
		topic_lxid = MyProc->lxid;
	}
}

/*
 * The names of all topics in name order, or of those matching pattern (a
 * POSIX regular expression, as PostgreSQL's ~) when it is not NULL; read
 * as the extension owner, returned in the caller's memory context.
 */
List *
MqTopicNames(const char *pattern)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	List	   *names = NIL;
	MqSpi		spi;
	int			rc;

	MqSpiBegin(&spi, true);
	if (pattern)
	{
		values[0] = CStringGetTextDatum(pattern);
		rc = SPI_execute_with_args("SELECT t.name FROM mqlog.topic t"
								   " WHERE t.name OPERATOR(pg_catalog.~) $1 ORDER BY 1",
								   1, types, values, NULL, true, 0);
	}
	else
		rc = SPI_execute("SELECT t.name FROM mqlog.topic t ORDER BY 1", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "mqlog: listing topics failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		MemoryContext spi_cxt = MemoryContextSwitchTo(caller);

		/* the list outlives SPI's memory too */
		names = lappend(names, pstrdup(name));
		MemoryContextSwitchTo(spi_cxt);
	}
	MqSpiEnd(&spi);
	MemoryContextSwitchTo(caller);
	return names;
}

MqTopic *
MqTopicLookup(const char *name, bool missing_ok)
{
	TopicEntry *entry;
	bool		found;

	check_generation();
	if (strlen(name) >= sizeof(((TopicEntry *) 0)->name))
		entry = NULL;
	else
	{
		entry = hash_search(topic_hash, name, HASH_ENTER, &found);
		if (!found)
		{
			entry->topic = NULL;
			PG_TRY();
			{
				entry->topic = load_topic("name", CStringGetTextDatum(name), TEXTOID);
			}
			PG_CATCH();
			{
				hash_search(topic_hash, name, HASH_REMOVE, NULL);
				PG_RE_THROW();
			}
			PG_END_TRY();
		}
	}
	if ((entry == NULL || entry->topic == NULL) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("topic \"%s\" does not exist", name),
				 errhint("Create it with mq_create_topic(), or list topics in mqlog.topics.")));
	return entry ? entry->topic : NULL;
}

/* A topic by id, from the cache or the catalog; NULL if there is none. */
static MqTopic *
lookup_by_id(int32 topic_id)
{
	HASH_SEQ_STATUS seq;
	TopicEntry *entry;
	MqTopic    *t;

	check_generation();
	hash_seq_init(&seq, topic_hash);
	while ((entry = hash_seq_search(&seq)) != NULL)
	{
		if (entry->topic && entry->topic->topic_id == topic_id)
		{
			hash_seq_term(&seq);
			return entry->topic;
		}
	}
	t = load_topic("topic_id", Int32GetDatum(topic_id), INT4OID);
	if (t != NULL)
	{
		entry = hash_search(topic_hash, t->name, HASH_ENTER, NULL);
		entry->topic = t;
	}
	return t;
}

/* the topic, or NULL if none has this id (any longer) */
MqTopic *
MqTopicFindById(int32 topic_id)
{
	return lookup_by_id(topic_id);
}

MqTopic *
MqTopicLookupById(int32 topic_id)
{
	MqTopic    *t = lookup_by_id(topic_id);

	if (t == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("topic with id %d does not exist", topic_id)));
	return t;
}

/* does this node lead the partition (always, for a single-node topic)? */
bool
MqTopicLeadsHere(MqTopic *topic, int32 partition)
{
	const char *self = MqClusterNodeName();

	if (topic->replicas == NULL)
		return true;
	return topic->replicas[partition].leader != NULL && self != NULL &&
		strcmp(topic->replicas[partition].leader, self) == 0;
}

/*
 * Why this node, which believes it leads the partition, may not act as its
 * leader now (its lease lapsed, or it has not read etcd since it
 * registered: lease.c), another node having perhaps been elected
 * meanwhile; NULL if it may (or the topic is a single node's).
 */
const char *
MqTopicLeaderFence(MqTopic *topic, int32 partition)
{
	if (topic->replicas == NULL)
		return NULL;
	return MqClusterLeaderFence((const char *const *) topic->replicas[partition].isr,
								topic->replicas[partition].nisr,
								topic->unclean_election);
}

/*
 * A topic this node leads, and may act on by the fence, but read before
 * this node's sync last caught up with etcd after a registration (which
 * lifted the fence): what this copy says of the leader may predate an
 * election, so it is read again, and the fresh copy returned (NULL: the
 * copy is not that old).  140_failover_faults saw a node that had been
 * frozen take a produce as the old leader, its topic read a moment before
 * the sync round that named the new one.
 */
static MqTopic *
reread_if_stale(MqTopic *topic, int32 partition)
{
	MqTopic    *fresh;

	if (topic->replicas == NULL || topic->sync_catchups == MqClusterSyncCatchups() ||
		MqTopicLeaderFence(topic, partition) != NULL)
		return NULL;
	fresh = MqTopicRefresh(topic->name);
	return fresh->sync_catchups != topic->sync_catchups ? fresh : NULL;
}

/*
 * Does this node lead the partition and may it act on that now?  The
 * Kafka listener's Fetch and ListOffsets ask this (its Metadata asks the
 * fence alone): a leader cut off from etcd serves no reads, for its log
 * may already be behind the new leader's, and a client that took its log
 * end for the partition's would reset its position (librdkafka 2.0.2
 * does, on OFFSET_OUT_OF_RANGE from the broker it takes for the leader).
 */
bool
MqTopicLeadsHereNow(MqTopic *topic, int32 partition)
{
	return MqTopicLedHereNow(topic, partition) != NULL;
}

/*
 * The same, returning the copy of the topic to go on with (one read again,
 * see reread_if_stale, whose leader epoch may be newer), or NULL if this
 * node does not lead the partition now
 */
MqTopic *
MqTopicLedHereNow(MqTopic *topic, int32 partition)
{
	MqTopic    *fresh;

	if (!MqTopicLeadsHere(topic, partition))
		return NULL;
	if ((fresh = reread_if_stale(topic, partition)) != NULL)
		topic = fresh;
	return MqTopicLeadsHere(topic, partition) && MqTopicLeaderFence(topic, partition) == NULL ?
		topic : NULL;
}

/*
 * Produce only where the partition's leader is (Kafka's
 * NOT_LEADER_OR_FOLLOWER): a follower's log is written by its apply worker
 * alone.  Returns the copy of the topic to append with: topic, or one read
 * again (reread_if_stale), whose leader epoch the batch must carry.
 */
MqTopic *
MqTopicCheckLeader(MqTopic *topic, int32 partition)
{
	const char *leader;
	const char *fenced;

	if (MqTopicLeadsHere(topic, partition))
	{
		MqTopic    *fresh = reread_if_stale(topic, partition);

		if (fresh != NULL)
			return MqTopicCheckLeader(fresh, partition);
		/* a leader that may have been replaced meanwhile stops (lease.c) */
		if ((fenced = MqTopicLeaderFence(topic, partition)) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_MQ_NOT_LEADER),
					 errmsg("node \"%s\" cannot act as the leader of partition %d of topic \"%s\" now",
							MqClusterNodeName(), partition, topic->name),
					 errdetail("%s", fenced),
					 errhint("Retry in a moment: once this node renews its lease it leads again, and if another node was elected, mqlog.partitions names it.")));
		return topic;
	}
	leader = topic->replicas[partition].leader;
	if (leader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_MQ_NOT_LEADER),
				 errmsg("partition %d of topic \"%s\" has no known leader on this node",
						partition, topic->name),
				 errhint("The cluster worker has not yet copied the partition's metadata from etcd; retry.")));
	/* not its conninfo: that may hold a password (mqlog.nodes shows it to admins) */
	ereport(ERROR,
			(errcode(ERRCODE_MQ_NOT_LEADER),
			 errmsg("node \"%s\" is not the leader of partition %d of topic \"%s\"",
					MqClusterNodeName(), partition, topic->name),
			 errdetail("The leader is node \"%s\".", leader),
			 errhint("Produce on node \"%s\"; mqlog.nodes says how to reach it.", leader)));
}

void
MqCheckPartition(MqTopic *topic, int32 partition)
{
	if (partition < 0 || partition >= topic->partitions)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("partition %d of topic \"%s\" does not exist", partition, topic->name),
				 errhint("Topic \"%s\" has partitions 0 to %d.", topic->name, topic->partitions - 1)));
}

MqPartition *
MqTopicPartition(MqTopic *topic, int32 partition)
{
	if (topic->parts[partition] == NULL)
		topic->parts[partition] = MqPartitionGet(topic->catalog_relid, topic->topic_id, partition);
	return topic->parts[partition];
}

const MqSegmentRef *
MqTopicActiveSegment(MqTopic *topic, int32 partition)
{
	if (topic->nsegments[partition] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("partition %d of topic \"%s\" has no segment yet", partition, topic->name),
				 errdetail("The maintenance worker creates the first segments of a topic's partitions beyond the first batch.")));
	return &topic->segments[partition][topic->nsegments[partition] - 1];
}

/*
 * Partitions whose first segment is made after their topic.  The
 * transaction of mq_create_topic or mq_add_partitions creates the first
 * segments of a batch of partitions (mqlog._drop_batch(); each new relation holds a lock to
 * the end of the transaction, and the shared lock table holds a few
 * thousand); the maintenance worker creates the others once it has
 * committed, a batch per transaction (mqlog._create_pending_segments).
 * Until then the partition has no segment: it reads as empty (log start
 * and high watermark 0), and an append waits for it.
 */
bool
MqTopicPartitionPending(MqTopic *topic, int32 partition)
{
	return topic->nsegments[partition] == 0;
}

/*
 * Wait until a pending partition has its first segment, asking for a pass
 * each time round; returns the topic's refreshed cache entry.  Neither a
 * partition lock nor a segment lock is held here, so the worker is never
 * kept out.  The transaction that created or grew the topic cannot wait:
 * the worker does not see the partition before it commits.
 */
MqTopic *
MqTopicAwaitPartition(MqTopic *topic, int32 partition)
{
	TimestampTz start = GetCurrentTimestamp();
	char	   *name = pstrdup(topic->name);

	while (MqTopicPartitionPending(topic, partition))
	{
		if (topic->written_here)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of topic \"%s\" has no segment yet", partition, name),
					 errdetail("This transaction created, grew or altered the topic; the maintenance worker creates the first segments of its partitions beyond the first batch once it commits."),
					 errhint("Produce to this partition after the transaction commits.")));
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), MQ_CREATE_WAIT_MS))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of topic \"%s\" has no segment yet", partition, name),
					 errdetail("Waited %d ms for the maintenance worker to create the first segments of the topic's partitions.",
							   MQ_CREATE_WAIT_MS),
					 errhint("Retry; mqlog.partitions shows a segment_count of 0 for the partitions still being created, and the server log why the worker may not have run.")));
		MqRequestMaintenance();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 MQ_CREATE_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		topic = MqTopicLookup(name, false);
	}
	pfree(name);
	return topic;
}

/* The topic a segment relation belongs to, or 0 if the catalog lists it nowhere. */
int32
MqTopicIdOfSegment(Oid relid)
{
	MqSpi		spi;
	Oid			argtype = OIDOID;
	Datum		arg = ObjectIdGetDatum(relid);
	int32		result = 0;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT s.topic_id FROM mqlog.segment s WHERE s.relid OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: segment lookup failed");
	if (SPI_processed == 1)
	{
		bool		isnull;

		result = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	return result;
}

/* For views: a topic's name, or its id if it was dropped meanwhile. */
const char *
MqTopicNameOrId(int32 topic_id)
{
	MqTopic    *t = lookup_by_id(topic_id);

	return t ? t->name : psprintf("%d", topic_id);
}

/* Forget every cached topic and look this one up again. */
MqTopic *
MqTopicRefresh(const char *name)
{
	topic_generation = 0;
	return MqTopicLookup(name, false);
}

/*
 * mqlog.topic's relation: with the database, it names this incarnation of
 * the extension's topics in shared memory (see MqPartitionKey).
 */
Oid
MqTopicCatalogRelid(void)
{
	return get_relname_relid("topic", get_namespace_oid("mqlog", false));
}

/* The log start offset: the base offset of the oldest segment. */
int64
MqLogStartOffset(MqTopic *topic, int32 partition)
{
	int64		start = 0;

	if (topic->nsegments[partition] > 0)
		start = topic->segments[partition][0].base_offset;
	/* records below mq_delete_records' start are hidden, as in Kafka */
	return Max(start, topic->log_starts[partition]);
}
