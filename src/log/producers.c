/*-------------------------------------------------------------------------
 *
 * producers.c
 *		Idempotent producers: what the leader of a partition knows of each
 *		producer id writing to it, and the check every leader append of a
 *		batch with a producer id passes under the partition lock.
 *
 * The rules are Kafka's (ProducerStateEntry, ProducerAppendInfo), for a
 * batch of producer id P, epoch E and sequences [first, last]:
 *
 *	- a batch equal to one of the last five of P (same epoch, same first
 *	  and last sequence) is a retry: it is answered with the original's
 *	  base offset and not appended again;
 *	- an epoch older than P's is INVALID_PRODUCER_EPOCH;
 *	- a newer epoch must start at sequence 0; within P's epoch, first must
 *	  follow P's last sequence (wrapping at INT32_MAX), else
 *	  OUT_OF_ORDER_SEQUENCE_NUMBER;
 *	- a producer id nothing is known of (never seen, its batches older
 *	  than the window the partition was loaded from, or evicted) is taken
 *	  at any sequence, as Kafka 2.5 and later take it (KIP-360): the
 *	  broker no longer answers UNKNOWN_PRODUCER_ID to a Produce.
 *
 * State changes with the PostgreSQL transaction that appends, not with
 * the append: an entry keeps what committed transactions made of it
 * ("committed") and what its owner, the one transaction with appends of
 * P to the partition in flight, has made of it so far ("current").  The
 * check reads current, so a transaction's second batch follows its first;
 * another transaction's batch of P waits for the owner to end
 * (XactLockTableWait, so that the deadlock detector sees the wait), and
 * then finds the entry as the owner's end left it: committed = current at
 * commit, current = committed at abort.  A subtransaction that aborts
 * puts back what it changed (the changes list below).  A rolled-back
 * produce therefore never advances a producer's sequence.
 *
 * Entries live in one shared hash of mqlog.max_producer_states entries,
 * under one LWLock held for a lookup and a few copies.  When it is full
 * the least recently used entry not owned by a running transaction is
 * evicted: its producer's next batch is then that of an unknown producer.
 * A partition's producers count only once the partition's own entry
 * (producer id -1) says they were loaded from its log, at the leader
 * epoch the append is made under: a new leader epoch (this node led the
 * partition before, followed, and leads it again) loads them again from
 * the log, which is the truth every replica shares.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "lib/ilist.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "log/producers.h"
#include "log/topic.h"

typedef struct ProducerEntry
{
	MqProducerKey key;			/* hash key: must be first */
	dlist_node	lru;			/* in shared->lru, most recently used last */
	uint64		generation;		/* the load of the partition it belongs to */
	TransactionId owner;		/* the transaction with changes pending */
	int32		leader_epoch;	/* the partition's own entry: loaded at */
	TimestampTz loaded_at;		/* ... and when */
	MqProducerState committed;
	MqProducerState current;
} ProducerEntry;

typedef struct ProducersShared
{
	LWLock	   *lock;			/* protects the hash, the list and the entries */
	uint64		generation;		/* of the last load */
	dlist_head	lru;
} ProducersShared;

static ProducersShared *shared = NULL;
static HTAB *producer_hash = NULL;

/*
 * This backend's changes to entries it owns, in order, each with the state
 * it replaced, so that a subtransaction's abort can put it back.
 */
typedef struct LocalChange
{
	ProducerEntry *entry;
	TransactionId xid;
	SubTransactionId subid;
	MqProducerState saved;
} LocalChange;

static LocalChange *changes = NULL;
static int	nchanges = 0;
static int	maxchanges = 0;

static const MqProducerState unknown_state = {-1, 0};

static void too_many_producers(void) pg_attribute_noreturn();

/* ------------------------------------------------------------------------
 * Shared memory
 * ------------------------------------------------------------------------ */

Size
MqProducersShmemSize(void)
{
	return add_size(MAXALIGN(sizeof(ProducersShared)),
					hash_estimate_size(mqlog_max_producer_states, sizeof(ProducerEntry)));
}

/* Called with AddinShmemInitLock held. */
void
MqProducersShmemInit(void)
{
	bool		found;
	HASHCTL		info;

	shared = ShmemInitStruct("mqlog producer list", sizeof(ProducersShared), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("mqlog_producers"))->lock;
		shared->generation = 0;
		dlist_init(&shared->lru);
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(MqProducerKey);
	info.entrysize = sizeof(ProducerEntry);
	producer_hash = ShmemInitHash("mqlog producers", mqlog_max_producer_states,
								  mqlog_max_producer_states, &info, HASH_ELEM | HASH_BLOBS);
}

/* entries in use (mqlog.shared_memory) */
int64
MqProducersInUse(void)
{
	int64		n;

	LWLockAcquire(shared->lock, LW_SHARED);
	n = hash_get_num_entries(producer_hash);
	LWLockRelease(shared->lock);
	return n;
}

static inline void
touch(ProducerEntry *e)
{
	dlist_move_tail(&shared->lru, &e->lru);
}

/*
 * A new entry for key, evicting the least recently used one that no
 * running transaction owns when the hash is full; NULL if every entry is
 * owned.  Caller holds the lock exclusively.
 */
static ProducerEntry *
new_entry(const MqProducerKey *key)
{
	ProducerEntry *e;
	bool		found;

	if (hash_get_num_entries(producer_hash) >= mqlog_max_producer_states)
	{
		dlist_iter	it;
		ProducerEntry *victim = NULL;

		dlist_foreach(it, &shared->lru)
		{
			ProducerEntry *c = dlist_container(ProducerEntry, lru, it.cur);

			if (!TransactionIdIsValid(c->owner))
			{
				victim = c;
				break;
			}
		}
		if (victim == NULL)
			return NULL;
		dlist_delete(&victim->lru);
		hash_search(producer_hash, &victim->key, HASH_REMOVE, NULL);
	}
	e = hash_search(producer_hash, key, HASH_ENTER_NULL, &found);
	if (e == NULL)
		return NULL;
	Assert(!found);
	e->generation = 0;
	e->owner = InvalidTransactionId;
	e->leader_epoch = -1;
	e->committed = unknown_state;
	e->current = unknown_state;
	dlist_push_tail(&shared->lru, &e->lru);
	return e;
}

/* the partition's own entry (producer id -1); caller holds the lock */
static ProducerEntry *
find_marker(const MqProducerKey *key)
{
	MqProducerKey mkey = *key;

	mkey.producer_id = -1;
	return hash_search(producer_hash, &mkey, HASH_FIND, NULL);
}

static void
too_many_producers(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("too many idempotent producers in flight"),
			 errdetail("Every one of the mqlog.max_producer_states (%d) entries is held by a running transaction.",
					   mqlog_max_producer_states),
			 errhint("Raise mqlog.max_producer_states and restart the server.")));
}

/* ------------------------------------------------------------------------
 * The rules
 * ------------------------------------------------------------------------ */

/*
 * A batch appended: Kafka's ProducerStateEntry.addBatch.  A new epoch
 * forgets the old one's batches; the five newest are kept.  The loader
 * applies the log's batches with it too, unchecked, as Kafka loads a log.
 */
void
MqProducerStateAdd(MqProducerState *st, int16 epoch, int32 first_seq, int32 last_seq,
				   int64 first_offset, int64 last_offset)
{
	MqProducerBatch *b;

	if (st->epoch != epoch)
	{
		st->epoch = epoch;
		st->nbatches = 0;
	}
	if (st->nbatches == MQ_PRODUCER_BATCHES)
	{
		memmove(&st->batches[0], &st->batches[1], sizeof(MqProducerBatch) * (MQ_PRODUCER_BATCHES - 1));
		st->nbatches--;
	}
	b = &st->batches[st->nbatches++];
	b->first_seq = first_seq;
	b->last_seq = last_seq;
	b->first_offset = first_offset;
	b->last_offset = last_offset;
}

/* Kafka's ProducerAppendInfo.inSequence */
static bool
in_sequence(int32 last_seq, int32 next_seq)
{
	return (int64) next_seq == (int64) last_seq + 1 ||
		(next_seq == 0 && last_seq == PG_INT32_MAX);
}

/* the verdict on a batch of pa against what st knows of its producer */
static MqProducerVerdict
judge(const MqProducerState *st, MqProducerAppend *pa)
{
	int32		last_seq = MqProducerSeqAdd(pa->first_seq, pa->count - 1);

	if (st->epoch == pa->epoch)
		for (int i = 0; i < st->nbatches; i++)
			if (st->batches[i].first_seq == pa->first_seq && st->batches[i].last_seq == last_seq)
			{
				pa->dup_first = st->batches[i].first_offset;
				pa->dup_last = st->batches[i].last_offset;
				return MQ_PRODUCER_DUPLICATE;
			}
	if (st->epoch < 0)
		return MQ_PRODUCER_APPEND;	/* unknown: any sequence (KIP-360) */
	if (pa->epoch < st->epoch)
		return MQ_PRODUCER_OLD_EPOCH;
	if (pa->epoch != st->epoch)
		return pa->first_seq == 0 ? MQ_PRODUCER_APPEND : MQ_PRODUCER_OUT_OF_ORDER;
	if (!in_sequence(st->nbatches > 0 ? st->batches[st->nbatches - 1].last_seq : -1,
					 pa->first_seq))
		return MQ_PRODUCER_OUT_OF_ORDER;
	return MQ_PRODUCER_APPEND;
}

/*
 * The end of the transaction that owns e: its changes stay or go.  The
 * owner does it at its end; a later appender does it if it finds an owner
 * that has ended (between the owner's commit in the clog and its
 * callback, which then finds nothing left to do).
 */
static void
settle(ProducerEntry *e, bool commit)
{
	if (commit)
		e->committed = e->current;
	else
		e->current = e->committed;
	e->owner = InvalidTransactionId;
}

/* room for one more change, made before the lock is taken */
static void
reserve_change(void)
{
	if (nchanges < maxchanges)
		return;
	maxchanges = Max(16, maxchanges * 2);
	if (changes == NULL)
		changes = MemoryContextAlloc(TopMemoryContext, sizeof(LocalChange) * maxchanges);
	else
		changes = repalloc(changes, sizeof(LocalChange) * maxchanges);
}

/*
 * The check of a leader's append of a batch with a producer id, by the
 * appender holding the partition's lock, the batch to go at offset base.
 * On MQ_PRODUCER_APPEND the batch is recorded in its producer's current
 * state, owned by this transaction, before it is written: if the write
 * fails, the (sub)transaction's abort puts the state back.
 */
MqProducerVerdict
MqProducersCheck(MqProducerAppend *pa, int64 base)
{
	TransactionId me = GetTopTransactionId();
	ProducerEntry *marker;
	ProducerEntry *e;
	MqProducerVerdict v;

	reserve_change();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	marker = find_marker(&pa->key);
	if (marker == NULL || marker->leader_epoch != pa->leader_epoch)
	{
		LWLockRelease(shared->lock);
		return pa->verdict = MQ_PRODUCER_NOT_LOADED;
	}
	touch(marker);
	e = hash_search(producer_hash, &pa->key, HASH_FIND, NULL);
	if (e != NULL && TransactionIdIsValid(e->owner) && e->owner != me &&
		!TransactionIdIsInProgress(e->owner))
		settle(e, TransactionIdDidCommit(e->owner));
	if (e != NULL && TransactionIdIsValid(e->owner) && e->owner != me)
	{
		pa->wait_for = e->owner;
		LWLockRelease(shared->lock);
		return pa->verdict = MQ_PRODUCER_WAIT;
	}
	/* an entry of an earlier load the last one did not find: unknown now */
	if (e != NULL && e->generation != marker->generation && e->owner != me)
	{
		e->committed = e->current = unknown_state;
		e->generation = marker->generation;
	}
	pa->seen = e ? e->current : unknown_state;
	v = judge(&pa->seen, pa);

	/*
	 * A gap in a known producer's sequence, on a replicated partition whose
	 * producers this leadership loaded a moment ago: the batch before it
	 * may still be on its way here.  A client that met the failover with
	 * batches in flight to the old leader sends them again to the new one,
	 * in order; when another node advertised the new leader before this
	 * node knew it led, the first of them was answered
	 * NOT_LEADER_OR_FOLLOWER here and the next, pipelined behind it, came
	 * once it knew.  OUT_OF_ORDER_SEQUENCE_NUMBER there is fatal to
	 * librdkafka, which counts the batches lost with the old leader's
	 * connection as possibly written ("rewound sequence number",
	 * 167_kafka_faults); NOT_LEADER_OR_FOLLOWER has it send both again.
	 * Past MQ_PRODUCER_NEW_LEADER_MS a gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
	 */
	if (v == MQ_PRODUCER_OUT_OF_ORDER && pa->leader_epoch >= 0 &&
		pa->seen.nbatches > 0 && pa->epoch == pa->seen.epoch &&
		!TimestampDifferenceExceeds(marker->loaded_at, GetCurrentTimestamp(),
									MQ_PRODUCER_NEW_LEADER_MS))
		v = MQ_PRODUCER_GAP_NEW_LEADER;
	if (v == MQ_PRODUCER_APPEND && e == NULL)
	{
		e = new_entry(&pa->key);
		if (e == NULL)
			v = MQ_PRODUCER_FULL;
		else
			e->generation = marker->generation;
	}
	if (v == MQ_PRODUCER_APPEND)
	{
		SubTransactionId subid = GetCurrentSubTransactionId();

		/*
		 * What the entry was before this subtransaction changed it: once
		 * is enough, so a SQL loop of batches of one producer keeps one
		 * change, not one per batch.
		 */
		if (nchanges == 0 || changes[nchanges - 1].entry != e ||
			changes[nchanges - 1].subid != subid || changes[nchanges - 1].xid != me)
		{
			LocalChange *c = &changes[nchanges++];

			c->entry = e;
			c->xid = me;
			c->subid = subid;
			c->saved = e->current;
		}
		MqProducerStateAdd(&e->current, pa->epoch, pa->first_seq,
						   MqProducerSeqAdd(pa->first_seq, pa->count - 1),
						   base, base + pa->count - 1);
		e->owner = me;
	}
	if (e != NULL)
		touch(e);
	LWLockRelease(shared->lock);
	return pa->verdict = v;
}

/* The error for a refused batch; the caller has released its locks. */
void
MqProducersRefuse(const MqProducerAppend *pa, const char *topic)
{
	const MqProducerState *st = &pa->seen;
	int32		last = st->nbatches > 0 ? st->batches[st->nbatches - 1].last_seq : -1;

	switch (pa->verdict)
	{
		case MQ_PRODUCER_OLD_EPOCH:
			ereport(ERROR,
					(errcode(ERRCODE_MQ_INVALID_PRODUCER_EPOCH),
					 errmsg("producer " INT64_FORMAT " is fenced on partition %d of topic \"%s\"",
							pa->key.producer_id, pa->key.partition, topic),
					 errdetail("The batch has producer epoch %d; the producer is at epoch %d.",
							   pa->epoch, st->epoch)));
			break;
		case MQ_PRODUCER_OUT_OF_ORDER:
			ereport(ERROR,
					(errcode(ERRCODE_MQ_OUT_OF_ORDER_SEQUENCE),
					 errmsg("out of order sequence number for producer " INT64_FORMAT " on partition %d of topic \"%s\"",
							pa->key.producer_id, pa->key.partition, topic),
					 pa->epoch == st->epoch ?
					 errdetail("The batch starts at sequence %d of epoch %d; the next expected is %d.",
							   pa->first_seq, pa->epoch, MqProducerSeqAdd(last, 1)) :
					 errdetail("The batch starts epoch %d at sequence %d; a new epoch starts at 0.",
							   pa->epoch, pa->first_seq)));
			break;
		case MQ_PRODUCER_GAP_NEW_LEADER:
			ereport(ERROR,
					(errcode(ERRCODE_MQ_NOT_LEADER),
					 errmsg("producer " INT64_FORMAT " skips a sequence number on partition %d of topic \"%s\", whose leadership here has just begun",
							pa->key.producer_id, pa->key.partition, topic),
					 errdetail("The batch starts at sequence %d; the next expected is %d, which may still be on its way from a retry.",
							   pa->first_seq, MqProducerSeqAdd(last, 1)),
					 errhint("Send the batches again in order.")));
			break;
		case MQ_PRODUCER_FULL:
			too_many_producers();
			break;
		case MQ_PRODUCER_WAIT:
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("producer " INT64_FORMAT " is writing to partition %d of topic \"%s\" in another transaction",
							pa->key.producer_id, pa->key.partition, topic),
					 errdetail("Transaction %u has a batch of the producer on the partition that is not committed yet.",
							   pa->wait_for),
					 errhint("Retry once that transaction has ended.")));
			break;
		default:
			elog(ERROR, "mqlog: producer verdict %d is no refusal", (int) pa->verdict);
	}
	pg_unreachable();
}

/* ------------------------------------------------------------------------
 * Loading (producers_load.c reads the log, this installs what it found)
 * ------------------------------------------------------------------------ */

/* Are the partition's producers loaded, at this leader epoch? */
bool
MqProducersLoaded(const MqProducerKey *partition_key, int32 leader_epoch)
{
	ProducerEntry *marker;
	bool		loaded;

	LWLockAcquire(shared->lock, LW_SHARED);
	marker = find_marker(partition_key);
	loaded = marker != NULL && marker->leader_epoch == leader_epoch;
	LWLockRelease(shared->lock);
	return loaded;
}

/*
 * What the loader found of the partition's producers in its log, oldest
 * used first: they replace what an earlier load left, except an entry a
 * running transaction owns (its changes are newer than the log it read
 * stops at).  When the hash cannot hold them all, the oldest found are
 * evicted first, as later use would evict them.
 */
void
MqProducersInstall(const MqProducerKey *partition_key, int32 leader_epoch,
				   int n, const int64 *ids, const MqProducerState *states)
{
	MqProducerKey key = *partition_key;
	ProducerEntry *marker;
	uint64		gen;

	key.producer_id = -1;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	marker = find_marker(&key);
	if (marker == NULL)
		marker = new_entry(&key);
	if (marker == NULL)
	{
		LWLockRelease(shared->lock);
		too_many_producers();
	}
	gen = ++shared->generation;
	marker->generation = gen;
	marker->leader_epoch = leader_epoch;
	marker->loaded_at = GetCurrentTimestamp();
	touch(marker);
	for (int i = 0; i < n; i++)
	{
		ProducerEntry *e;

		key.producer_id = ids[i];
		e = hash_search(producer_hash, &key, HASH_FIND, NULL);
		if (e == NULL)
			e = new_entry(&key);
		if (e == NULL)
			break;
		if (!TransactionIdIsValid(e->owner))
			e->committed = e->current = states[i];
		e->generation = gen;
		touch(e);
	}
	/* the partition's own entry last: it is the most recently used */
	touch(marker);
	LWLockRelease(shared->lock);
}

/* ------------------------------------------------------------------------
 * Transaction ends
 * ------------------------------------------------------------------------ */

/*
 * The end of the top transaction: what it changed becomes every
 * producer's committed state, or is undone.  Runs before its xid lock is
 * released, so a transaction waiting for it finds the entry settled.
 */
static void
producers_xact_callback(XactEvent event, void *arg)
{
	bool		commit;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			commit = true;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			commit = false;
			break;
		default:
			return;
	}
	if (nchanges == 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nchanges; i++)
	{
		ProducerEntry *e = changes[i].entry;

		/* not if settled already, by an earlier change of the list or another */
		if (e->owner == changes[i].xid)
			settle(e, commit);
	}
	LWLockRelease(shared->lock);
	nchanges = 0;
}

/* an aborted subtransaction's changes are put back, newest first */
static void
producers_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	int			keep = 0;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = 0; i < nchanges; i++)
			if (changes[i].subid == mySubid)
				changes[i].subid = parentSubid;
		return;
	}
	if (event != SUBXACT_EVENT_ABORT_SUB || nchanges == 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = nchanges - 1; i >= 0; i--)
		if (changes[i].subid == mySubid && changes[i].entry->owner == changes[i].xid)
			changes[i].entry->current = changes[i].saved;
	for (int i = 0; i < nchanges; i++)
		if (changes[i].subid != mySubid)
			changes[keep++] = changes[i];
		else
		{
			bool		more = false;

			/* an entry no change is left of is this transaction's no more */
			for (int j = 0; j < nchanges && !more; j++)
				more = changes[j].subid != mySubid && changes[j].entry == changes[i].entry;
			if (!more && changes[i].entry->owner == changes[i].xid)
				settle(changes[i].entry, false);
		}
	LWLockRelease(shared->lock);
	nchanges = keep;
}

void
MqProducersInitCallbacks(void)
{
	RegisterXactCallback(producers_xact_callback, NULL);
	RegisterSubXactCallback(producers_subxact_callback, NULL);
}
