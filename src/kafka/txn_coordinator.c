/*-------------------------------------------------------------------------
 *
 * txn_coordinator.c
 *		The Kafka transaction coordinator (KIP-98, KIP-447) of a single
 *		node: each transactional.id's producer id, epoch and state, the
 *		partitions and groups of its open transaction and the offsets it
 *		committed, in the catalog tables mqlog.kafka_transaction,
 *		kafka_transaction_partition and kafka_transaction_offset; the end
 *		of a transaction (markers, offsets, aborted ranges); the abort of a
 *		transaction past its transaction.timeout.ms; the removal of ids
 *		unused for transactional.id.expiration.ms.  The APIs that drive
 *		it are api_init_producer_id.c, api_add_partitions_to_txn.c,
 *		api_add_offsets_to_txn.c, api_txn_offset_commit.c, api_end_txn.c
 *		and the transactional Produce (api_produce.c).
 *
 * The state is a catalog table, so it changes with the PostgreSQL
 * transaction of the request that changes it: an EndTxn writes the COMMIT
 * or ABORT marker into every partition of the transaction (a control
 * batch, MqLogAppendControl), moves or drops its offsets, records an
 * abort's ranges in mqlog.kafka_aborted_transaction and sets the state
 * CompleteCommit or CompleteAbort, all in one PostgreSQL transaction, so
 * that a crash leaves the Kafka transaction open (to be ended again by the
 * client's retry or the timeout) or ended everywhere, never half-ended.
 * Kafka's PrepareCommit and PrepareAbort are therefore never seen
 * committed: they are the inside of that PostgreSQL transaction.
 *
 * A transactional.id belongs to the role that first asked for it (its
 * owner column): another role is answered TRANSACTIONAL_ID_AUTHORIZATION_
 * FAILED, so that no role can fence another's producer.  The tables are
 * read and written as the extension owner (MqSpiBegin); what a request may
 * touch (the topics, the groups) is checked as the connection's role by
 * the API files before they call here.
 *
 * Bounds: a transaction has at most mqlog.max_inflight_partitions
 * partitions (its EndTxn writes a marker into each in one PostgreSQL
 * transaction, which may append to no more), MQK_TXN_MAX_GROUPS groups and
 * MQK_TXN_MAX_OFFSETS offsets; past them the request is refused.  A
 * timeout pass ends at most MQK_TXN_EXPIRE_BATCH transactions, an
 * expiration pass removes at most MQK_TXN_ID_EXPIRE_BATCH ids.
 *
 * Who ends a transaction past its timeout (and removes the expired ids):
 * two processes, whichever comes first.  The listener's once-a-second turn
 * (MqKafkaTxnTick) in the database it serves, and every regular pass of
 * the maintenance worker in each database (MqKafkaTxnMaintain, a step
 * mqlog.c hands workers/maintenance.c, every mqlog.maintenance_naptime),
 * so that with the listener off (mqlog.kafka_listen empty), not running,
 * or serving another database (a dump restored elsewhere brings open
 * transactions) no transaction holds its partitions' last stable offset
 * past its timeout for longer than a naptime.  Each picks its
 * transactions with FOR UPDATE SKIP LOCKED and ends them in the same
 * PostgreSQL transaction: a row the other holds is skipped, and a row the
 * other has ended meanwhile is read again at its lock (READ COMMITTED)
 * and no longer matches 'Ongoing' past its timeout, so each transaction is
 * aborted, its epoch bumped and its line logged exactly once.  A client's
 * request locks the same row first (load_row), so it waits for the abort
 * and then finds its producer fenced, as with the listener's own turn.
 *
 * On a cluster of mqlog nodes transactions are refused (MqKafkaTxnRefused):
 * this coordinator's state lives in one node's catalog, and a failover
 * would lose it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/extension.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "base/xact.h"
#include "cluster/metadata.h"
#include "log/append.h"
#include "log/partition.h"
#include "log/partition_shmem.h"
#include "log/topic.h"
#include "groups/groups.h"
#include "kafka/kafka.h"
#include "kafka/kafka_internal.h"

#define MQK_TXN_MAX_GROUPS		100
#define MQK_TXN_MAX_OFFSETS		1000
#define MQK_TXN_EXPIRE_BATCH	16
/* transactional ids removed at most per turn (transactional.id.expiration.ms) */
#define MQK_TXN_ID_EXPIRE_BATCH	100
/* the turn that looks for expired ids, and for open transactions anyway */
#define MQK_TXN_SWEEP_MS		60000
/* Kafka's transaction.max.timeout.ms default: 15 minutes */
#define MQK_TXN_MAX_TIMEOUT_MS	900000

/* one transactional.id's row */
typedef struct TxnRow
{
	bool		found;
	int64		producer_id;
	int16		epoch;
	char		state[16];
	Oid			owner;
	int32		timeout_ms;
	int			ngroups;
} TxnRow;

/* a partition of the transaction being ended, and its marker */
typedef struct TxnPart
{
	int32		topic_id;
	int32		partition;
	int64		first_offset;	/* -1: nothing written */
} TxnPart;

/*
 * Whether a transaction may be open: false once a turn found none, true
 * again when one becomes Ongoing (set_ongoing).  The listener is one
 * process that serves every transactional request, so while it is false
 * the once-a-second turn has nothing to look at and costs no transaction.
 */
static bool ongoing_maybe = true;

typedef struct TxnOffset
{
	char	   *group;
	int32		topic_id;
	int32		partition;
	int64		offset;
	char	   *metadata;
} TxnOffset;

/* a query (the caller is inside MqSpiBegin as the owner); ERROR if it fails */
static int
run(const char *sql, int nargs, Oid *types, Datum *values, bool read_only)
{
	int			ret = SPI_execute_with_args(sql, nargs, types, values, NULL, read_only, 0);

	if (ret < 0)
		elog(ERROR, "mqlog: transaction coordinator query failed (%d): %s", ret, sql);
	return ret;
}

static int64
col_int64(int row, int col, bool *isnull)
{
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull));
}

/* the row of txn_id, locked for this request's transaction */
static void
load_row(const char *txn_id, TxnRow *t)
{
	MqSpi		spi;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(txn_id)};

	memset(t, 0, sizeof(*t));
	MqSpiBegin(&spi, true);
	run("SELECT t.producer_id, t.producer_epoch, t.state, t.owner::pg_catalog.oid, t.timeout_ms,"
		" pg_catalog.cardinality(t.groups)"
		" FROM mqlog.kafka_transaction t WHERE t.transactional_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
		1, types, values, false);
	if (SPI_processed == 1)
	{
		bool		isnull;
		char	   *state;

		t->found = true;
		t->producer_id = col_int64(0, 1, &isnull);
		t->epoch = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
		strlcpy(t->state, state, sizeof(t->state));
		t->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
		t->timeout_ms = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
		t->ngroups = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull));
	}
	MqSpiEnd(&spi);
}

/* an update of txn_id's row: $1 is the id, then the arguments given */
static void
update_row(const char *sql, const char *txn_id, int nargs, Oid *types, Datum *values)
{
	MqSpi		spi;
	Oid			alltypes[8];
	Datum		allvalues[8];

	Assert(nargs < 8);
	alltypes[0] = TEXTOID;
	allvalues[0] = CStringGetTextDatum(txn_id);
	for (int i = 0; i < nargs; i++)
	{
		alltypes[i + 1] = types[i];
		allvalues[i + 1] = values[i];
	}
	MqSpiBegin(&spi, true);
	run(sql, nargs + 1, alltypes, allvalues, false);
	MqSpiEnd(&spi);
}

typedef struct TxnCall
{
	int16		(*fn) (void *arg);
	void	   *arg;
	int16		error;
} TxnCall;

static void
txn_call(void *arg)
{
	TxnCall    *c = arg;

	c->error = c->fn(c->arg);
}

/*
 * fn in a subtransaction of the request's (MqKafkaTry): its answer, or the
 * Kafka error of its ERROR, whose writes are then undone.
 */
int16
MqKafkaTxnRun(int16 (*fn) (void *arg), void *arg)
{
	TxnCall		c = {fn, arg, MQK_NONE};
	int16		error = MqKafkaTry(txn_call, &c, MQK_INVALID_REQUEST, NULL);

	return error != MQK_NONE ? error : c.error;
}

/* Is the Kafka transaction coordinator refused here (an mqlog cluster)? */
bool
MqKafkaTxnRefused(void)
{
	return MqClusterEnabled();
}

/*
 * The checks every request of a transaction passes (Kafka's
 * TransactionCoordinator): the id is known and this role's, the producer
 * id is the id's, the epoch its current one.  An older epoch is a fenced
 * producer: PRODUCER_FENCED if fenced_code (the request's version knows
 * it), else INVALID_PRODUCER_EPOCH, as Kafka answers the older versions.
 */
static int16
check(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code, TxnRow *t)
{
	if (txn_id == NULL || txn_id[0] == '\0')
		return MQK_INVALID_REQUEST;
	if (MqKafkaTxnRefused())
		return MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	load_row(txn_id, t);
	if (!t->found || t->producer_id != producer_id)
		return MQK_INVALID_PRODUCER_ID_MAPPING;
	if (t->owner != GetUserId() && !superuser())
		return MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (epoch < t->epoch)
		return fenced_code ? MQK_PRODUCER_FENCED : MQK_INVALID_PRODUCER_EPOCH;
	if (epoch != t->epoch)
		return MQK_INVALID_PRODUCER_EPOCH;
	return MQK_NONE;
}

/* Ongoing from now, unless it was already */
static void
set_ongoing(const char *txn_id)
{
	ongoing_maybe = true;
	update_row("UPDATE mqlog.kafka_transaction t SET state = 'Ongoing', updated_at = pg_catalog.now(),"
			   " started_at = CASE WHEN t.state OPERATOR(pg_catalog.=) 'Ongoing' THEN t.started_at ELSE pg_catalog.now() END"
			   " WHERE t.transactional_id OPERATOR(pg_catalog.=) $1",
			   txn_id, 0, NULL, NULL);
}

/*
 * End txn_id's open transaction: a marker of (producer_id, marker_epoch)
 * into each of its partitions, its offsets committed (commit) or dropped,
 * an abort's ranges recorded, its partitions and offsets forgotten and its
 * state Complete*.  The markers and offsets are written as the caller's
 * role (the topics and groups were checked when they were added); the
 * tables as the owner.
 */
static void
end_transaction(const char *txn_id, int64 producer_id, int16 marker_epoch, bool commit)
{
	MemoryContext caller = CurrentMemoryContext;
	MqSpi		spi;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(txn_id)};
	TxnPart    *parts;
	int			nparts;
	TxnOffset  *offsets = NULL;
	int			noffsets = 0;
	int64	   *markers;

	MqSpiBegin(&spi, true);
	run("SELECT p.topic_id, p.\"partition\", p.first_offset FROM mqlog.kafka_transaction_partition p"
		" WHERE p.transactional_id OPERATOR(pg_catalog.=) $1 ORDER BY p.topic_id, p.\"partition\"",
		1, types, values, true);
	nparts = (int) SPI_processed;
	parts = MemoryContextAlloc(caller, sizeof(TxnPart) * (nparts + 1));
	for (int i = 0; i < nparts; i++)
	{
		bool		isnull;

		parts[i].topic_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		parts[i].partition = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		parts[i].first_offset = col_int64(i, 3, &isnull);
		if (isnull)
			parts[i].first_offset = -1;
	}
	if (commit)
	{
		run("SELECT o.group_id, o.topic_id, o.\"partition\", o.committed_offset, o.metadata"
			" FROM mqlog.kafka_transaction_offset o WHERE o.transactional_id OPERATOR(pg_catalog.=) $1",
			1, types, values, true);
		noffsets = (int) SPI_processed;
		offsets = MemoryContextAlloc(caller, sizeof(TxnOffset) * (noffsets + 1));
		for (int i = 0; i < noffsets; i++)
		{
			bool		isnull;
			char	   *meta;

			offsets[i].group = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
			offsets[i].topic_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
			offsets[i].partition = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
			offsets[i].offset = col_int64(i, 4, &isnull);
			meta = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5);
			offsets[i].metadata = meta ? MemoryContextStrdup(caller, meta) : NULL;
		}
	}
	MqSpiEnd(&spi);

	/* the markers, as Kafka's coordinator sends them to each leader */
	markers = palloc(sizeof(int64) * (nparts + 1));
	for (int i = 0; i < nparts; i++)
	{
		MqTopic    *topic = MqTopicLookupById(parts[i].topic_id);

		markers[i] = -1;
		if (topic == NULL || parts[i].partition >= topic->partitions)
			continue;			/* dropped meanwhile */
		markers[i] = MqLogAppendControl(&topic, parts[i].partition, producer_id, marker_epoch,
										commit, 0);
	}
	for (int i = 0; i < noffsets; i++)
	{
		MqTopic    *topic = MqTopicLookupById(offsets[i].topic_id);

		if (topic != NULL && offsets[i].partition < topic->partitions)
			MqGroupCommitExternalMetadata(offsets[i].group, topic, offsets[i].partition,
										  offsets[i].offset, offsets[i].metadata);
	}

	MqSpiBegin(&spi, true);
	if (!commit)
		for (int i = 0; i < nparts; i++)
		{
			Oid			atypes[5] = {INT4OID, INT4OID, INT8OID, INT8OID, INT8OID};
			Datum		avalues[5];

			if (parts[i].first_offset < 0 || markers[i] < 0)
				continue;
			avalues[0] = Int32GetDatum(parts[i].topic_id);
			avalues[1] = Int32GetDatum(parts[i].partition);
			avalues[2] = Int64GetDatum(producer_id);
			avalues[3] = Int64GetDatum(parts[i].first_offset);
			avalues[4] = Int64GetDatum(markers[i]);
			run("INSERT INTO mqlog.kafka_aborted_transaction (topic_id, \"partition\", producer_id, first_offset, last_offset)"
				" VALUES ($1, $2, $3, $4, $5)", 5, atypes, avalues, false);
		}
	run("DELETE FROM mqlog.kafka_transaction_partition p WHERE p.transactional_id OPERATOR(pg_catalog.=) $1",
		1, types, values, false);
	run("DELETE FROM mqlog.kafka_transaction_offset o WHERE o.transactional_id OPERATOR(pg_catalog.=) $1",
		1, types, values, false);
	run(commit ?
		"UPDATE mqlog.kafka_transaction t SET state = 'CompleteCommit', started_at = NULL, groups = '{}',"
		" updated_at = pg_catalog.now()"
		" WHERE t.transactional_id OPERATOR(pg_catalog.=) $1" :
		"UPDATE mqlog.kafka_transaction t SET state = 'CompleteAbort', started_at = NULL, groups = '{}',"
		" updated_at = pg_catalog.now()"
		" WHERE t.transactional_id OPERATOR(pg_catalog.=) $1",
		1, types, values, false);
	MqSpiEnd(&spi);
}

/*
 * InitProducerId with a transactional id: the id's producer id and a new
 * epoch (a new id, epoch 0, for an id never seen or whose epoch is spent),
 * fencing the producer of the old epoch, whose open transaction is aborted
 * with the new epoch's markers, as Kafka's coordinator does.  v3+ may name
 * the producer id and epoch it had (KIP-360): any other than the current
 * ones is a fenced producer.
 */
int16
MqKafkaTxnInitProducer(const char *txn_id, int32 timeout_ms, int64 given_id, int16 given_epoch,
					   bool fenced_code, int64 (*new_id) (void), int64 *producer_id,
					   int16 *epoch)
{
	TxnRow		t;
	int64		id;
	int16		e;

	if (MqKafkaTxnRefused())
		return MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (timeout_ms <= 0 || timeout_ms > MQK_TXN_MAX_TIMEOUT_MS)
		return MQK_INVALID_TRANSACTION_TIMEOUT;
	load_row(txn_id, &t);
	if (!t.found)
	{
		Oid			types[4] = {INT8OID, INT4OID, OIDOID, INT2OID};
		Datum		values[4];

		id = new_id();
		e = 0;
		values[0] = Int64GetDatum(id);
		values[1] = Int32GetDatum(timeout_ms);
		values[2] = ObjectIdGetDatum(GetUserId());
		values[3] = Int16GetDatum(e);
		update_row("INSERT INTO mqlog.kafka_transaction (transactional_id, producer_id, producer_epoch, timeout_ms, owner)"
				   " VALUES ($1, $2, $5, $3, $4::pg_catalog.regrole)",
				   txn_id, 4, types, values);
		*producer_id = id;
		*epoch = e;
		return MQK_NONE;
	}
	if (t.owner != GetUserId() && !superuser())
		return MQK_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (given_id >= 0 && (given_id != t.producer_id || given_epoch != t.epoch))
		return fenced_code ? MQK_PRODUCER_FENCED : MQK_INVALID_PRODUCER_EPOCH;

	id = t.producer_id;
	e = t.epoch + 1;
	if (strcmp(t.state, "Ongoing") == 0)
		end_transaction(txn_id, id, e, false);
	/* Kafka's epoch stops short of Short.MaxValue: a new id then */
	if (e >= PG_INT16_MAX - 1)
	{
		id = new_id();
		e = 0;
	}
	{
		Oid			types[3] = {INT8OID, INT2OID, INT4OID};
		Datum		values[3] = {Int64GetDatum(id), Int16GetDatum(e), Int32GetDatum(timeout_ms)};

		update_row("UPDATE mqlog.kafka_transaction t SET producer_id = $2, producer_epoch = $3, timeout_ms = $4,"
				   " state = 'Empty', started_at = NULL, groups = '{}', updated_at = pg_catalog.now()"
				   " WHERE t.transactional_id OPERATOR(pg_catalog.=) $1",
				   txn_id, 3, types, values);
	}
	*producer_id = id;
	*epoch = e;
	return MQK_NONE;
}

/*
 * AddPartitionsToTxn's check, before any partition is looked at: the
 * producer's (each partition's room is MqKafkaTxnAddPartition's).
 */
int16
MqKafkaTxnCheck(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code)
{
	TxnRow		t;

	return check(txn_id, producer_id, epoch, fenced_code, &t);
}

/* one partition into txn_id's transaction, which becomes Ongoing */
int16
MqKafkaTxnAddPartition(const char *txn_id, MqTopic *topic, int32 partition)
{
	MqSpi		spi;
	Oid			types[3] = {TEXTOID, INT4OID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(txn_id), Int32GetDatum(topic->topic_id),
	Int32GetDatum(partition)};
	bool		isnull;
	int64		n;

	MqSpiBegin(&spi, true);
	run("SELECT pg_catalog.count(*) FROM mqlog.kafka_transaction_partition p"
		" WHERE p.transactional_id OPERATOR(pg_catalog.=) $1", 1, types, values, true);
	n = col_int64(0, 1, &isnull);
	if (n >= mqlog_max_inflight)
	{
		MqSpiEnd(&spi);
		ereport(LOG,
				(errmsg("Kafka transaction \"%s\" would span more than mqlog.max_inflight_partitions (%d) partitions: partition %d of topic \"%s\" is refused",
						txn_id, mqlog_max_inflight, partition, topic->name)));
		return MQK_INVALID_TXN_STATE;
	}
	run("INSERT INTO mqlog.kafka_transaction_partition (transactional_id, topic_id, \"partition\")"
		" VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3, types, values, false);
	MqSpiEnd(&spi);
	set_ongoing(txn_id);
	return MQK_NONE;
}

/* AddOffsetsToTxn: the group's offsets will be part of the transaction */
int16
MqKafkaTxnAddGroup(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code,
				   const char *group)
{
	TxnRow		t;
	int16		error = check(txn_id, producer_id, epoch, fenced_code, &t);
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	if (error != MQK_NONE)
		return error;
	if (t.ngroups >= MQK_TXN_MAX_GROUPS)
		return MQK_INVALID_TXN_STATE;
	values[0] = CStringGetTextDatum(group);
	update_row("UPDATE mqlog.kafka_transaction t SET groups = t.groups OPERATOR(pg_catalog.||) $2"
			   " WHERE t.transactional_id OPERATOR(pg_catalog.=) $1"
			   " AND NOT $2 OPERATOR(pg_catalog.=) ANY (t.groups)",
			   txn_id, 1, types, values);
	set_ongoing(txn_id);
	return MQK_NONE;
}

/*
 * TxnOffsetCommit's check: the producer's, and the group added to its
 * transaction (AddOffsetsToTxn) first.
 */
int16
MqKafkaTxnCheckGroup(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code,
					 const char *group)
{
	TxnRow		t;
	int16		error = check(txn_id, producer_id, epoch, fenced_code, &t);
	MqSpi		spi;
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];

	if (error != MQK_NONE)
		return error;
	values[0] = CStringGetTextDatum(txn_id);
	values[1] = CStringGetTextDatum(group);
	MqSpiBegin(&spi, true);
	run("SELECT 1 FROM mqlog.kafka_transaction t WHERE t.transactional_id OPERATOR(pg_catalog.=) $1"
		" AND t.state OPERATOR(pg_catalog.=) 'Ongoing' AND $2 OPERATOR(pg_catalog.=) ANY (t.groups)",
		2, types, values, true);
	if (SPI_processed == 0)
		error = MQK_INVALID_TXN_STATE;
	MqSpiEnd(&spi);
	return error;
}

/* TxnOffsetCommit: one partition's offset, pending until the transaction ends */
void
MqKafkaTxnStoreOffset(const char *txn_id, const char *group, MqTopic *topic, int32 partition,
					  int64 offset, const char *metadata)
{
	MqSpi		spi;
	Oid			types[6] = {TEXTOID, TEXTOID, INT4OID, INT4OID, INT8OID, TEXTOID};
	Datum		values[6];
	char		nulls[6] = "      ";
	bool		isnull;

	values[0] = CStringGetTextDatum(txn_id);
	values[1] = CStringGetTextDatum(group);
	values[2] = Int32GetDatum(topic->topic_id);
	values[3] = Int32GetDatum(partition);
	values[4] = Int64GetDatum(offset);
	values[5] = metadata ? CStringGetTextDatum(metadata) : (Datum) 0;
	if (metadata == NULL)
		nulls[5] = 'n';
	MqSpiBegin(&spi, true);
	run("SELECT pg_catalog.count(*) FROM mqlog.kafka_transaction_offset o"
		" WHERE o.transactional_id OPERATOR(pg_catalog.=) $1", 1, types, values, true);
	if (col_int64(0, 1, &isnull) >= MQK_TXN_MAX_OFFSETS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Kafka transaction \"%s\" holds %d offsets already", txn_id, MQK_TXN_MAX_OFFSETS)));
	if (SPI_execute_with_args("INSERT INTO mqlog.kafka_transaction_offset"
							  " (transactional_id, group_id, topic_id, \"partition\", committed_offset, metadata)"
							  " VALUES ($1, $2, $3, $4, $5, $6)"
							  " ON CONFLICT (transactional_id, group_id, topic_id, \"partition\")"
							  " DO UPDATE SET committed_offset = EXCLUDED.committed_offset, metadata = EXCLUDED.metadata",
							  6, types, values, nulls, false, 0) < 0)
		elog(ERROR, "mqlog: could not store a Kafka transaction's offset");
	MqSpiEnd(&spi);
}

/*
 * EndTxn: commit or abort the open transaction.  A retry of the end that
 * was done (CompleteCommit asked to commit again, CompleteAbort to abort)
 * is answered without error, as Kafka's; anything else but an Ongoing
 * transaction is INVALID_TXN_STATE.
 */
int16
MqKafkaTxnEnd(const char *txn_id, int64 producer_id, int16 epoch, bool fenced_code, bool commit)
{
	TxnRow		t;
	int16		error = check(txn_id, producer_id, epoch, fenced_code, &t);

	if (error != MQK_NONE)
		return error;
	if (strcmp(t.state, "Ongoing") == 0)
	{
		end_transaction(txn_id, producer_id, epoch, commit);
		return MQK_NONE;
	}
	if (strcmp(t.state, commit ? "CompleteCommit" : "CompleteAbort") == 0)
		return MQK_NONE;
	return MQK_INVALID_TXN_STATE;
}

/*
 * A transactional Produce of (producer_id, epoch) to a partition: admitted
 * if it is the id's current producer and the partition was added to its
 * Ongoing transaction; else INVALID_PRODUCER_EPOCH (an older epoch: a
 * fenced producer, which Kafka's Produce names so),
 * INVALID_PRODUCER_ID_MAPPING, or INVALID_TXN_STATE (a partition not
 * added, as a Kafka broker that verifies transactions answers).
 * *first: whether the transaction has written nothing to the partition
 * yet (MqKafkaTxnNoteWrite then records where it began).
 */
int16
MqKafkaTxnCheckProduce(const char *txn_id, int64 producer_id, int16 epoch, MqTopic *topic,
					   int32 partition, bool *first)
{
	TxnRow		t;
	int16		error = check(txn_id, producer_id, epoch, false, &t);
	MqSpi		spi;
	Oid			types[3] = {TEXTOID, INT4OID, INT4OID};
	Datum		values[3];

	if (error != MQK_NONE)
		return error;
	if (strcmp(t.state, "Ongoing") != 0)
		return MQK_INVALID_TXN_STATE;
	values[0] = CStringGetTextDatum(txn_id);
	values[1] = Int32GetDatum(topic->topic_id);
	values[2] = Int32GetDatum(partition);
	MqSpiBegin(&spi, true);
	run("SELECT p.first_offset IS NULL FROM mqlog.kafka_transaction_partition p"
		" WHERE p.transactional_id OPERATOR(pg_catalog.=) $1 AND p.topic_id OPERATOR(pg_catalog.=) $2"
		" AND p.\"partition\" OPERATOR(pg_catalog.=) $3", 3, types, values, true);
	if (SPI_processed == 0)
		error = MQK_INVALID_TXN_STATE;
	else
	{
		bool		isnull;

		*first = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	MqSpiEnd(&spi);
	return error;
}

/* the transaction's first batch on the partition is at offset */
void
MqKafkaTxnNoteWrite(const char *txn_id, MqTopic *topic, int32 partition, int64 offset)
{
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3] = {Int32GetDatum(topic->topic_id), Int32GetDatum(partition),
	Int64GetDatum(offset)};

	update_row("UPDATE mqlog.kafka_transaction_partition p SET first_offset = $4"
			   " WHERE p.transactional_id OPERATOR(pg_catalog.=) $1 AND p.topic_id OPERATOR(pg_catalog.=) $2"
			   " AND p.\"partition\" OPERATOR(pg_catalog.=) $3 AND p.first_offset IS NULL",
			   txn_id, 3, types, values);
}

/*
 * transaction.timeout.ms: the open transactions past it are aborted, with
 * the epoch bumped as Kafka's coordinator does, so that their producer is
 * fenced (its next request is answered PRODUCER_FENCED or
 * INVALID_PRODUCER_EPOCH).  At most MQK_TXN_EXPIRE_BATCH a call; returns
 * how many.  Runs in the caller's transaction, as the caller's role (the
 * listener's, or the maintenance worker's bootstrap superuser); a
 * transaction another process is ending is skipped (the banner).
 */
int
MqKafkaTxnExpire(void)
{
	MemoryContext caller = CurrentMemoryContext;
	MqSpi		spi;
	char	  **ids;
	int64	   *pids;
	int16	   *epochs;
	int			n;

	if (RecoveryInProgress() || MqKafkaTxnRefused())
		return 0;
	MqSpiBegin(&spi, true);
	run("SELECT t.transactional_id, t.producer_id, t.producer_epoch FROM mqlog.kafka_transaction t"
		" WHERE t.state OPERATOR(pg_catalog.=) 'Ongoing'"
		" AND t.started_at OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => t.timeout_ms / 1000.0)"
		" OPERATOR(pg_catalog.<) pg_catalog.now()"
		" ORDER BY t.started_at LIMIT " CppAsString2(MQK_TXN_EXPIRE_BATCH) " FOR UPDATE SKIP LOCKED",
		0, NULL, NULL, false);
	n = (int) SPI_processed;
	ids = MemoryContextAlloc(caller, sizeof(char *) * (n + 1));
	pids = MemoryContextAlloc(caller, sizeof(int64) * (n + 1));
	epochs = MemoryContextAlloc(caller, sizeof(int16) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		ids[i] = MemoryContextStrdup(caller, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		pids[i] = col_int64(i, 2, &isnull);
		epochs[i] = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
	}
	MqSpiEnd(&spi);
	for (int i = 0; i < n; i++)
	{
		int16		e = epochs[i] + 1;
		Oid			types[1] = {INT2OID};
		Datum		values[1] = {Int16GetDatum(e)};

		end_transaction(ids[i], pids[i], e, false);
		update_row("UPDATE mqlog.kafka_transaction t SET producer_epoch = $2"
				   " WHERE t.transactional_id OPERATOR(pg_catalog.=) $1", ids[i], 1, types, values);
		ereport(LOG,
				(errmsg("Kafka transaction \"%s\" of producer " INT64_FORMAT " passed its transaction.timeout.ms: aborted, epoch %d fenced",
						ids[i], pids[i], epochs[i])));
	}
	return n;
}

/*
 * transactional.id.expiration.ms: the ids with no transaction open
 * (Empty, CompleteCommit, CompleteAbort) that nothing changed for
 * mqlog.kafka_transactional_id_expiration are removed, at most
 * MQK_TXN_ID_EXPIRE_BATCH a call, oldest first (the updated_at index), as
 * Kafka's coordinator removes them.  Their producer's next request then
 * finds no id (INVALID_PRODUCER_ID_MAPPING), and an InitProducerId starts
 * the id anew with a new producer id.  A row a request holds is skipped:
 * it is being used.  Returns how many were removed.
 */
int
MqKafkaTxnExpireIds(void)
{
	MqSpi		spi;
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(mqlog_kafka_transactional_id_expiration)};
	int			n;

	if (RecoveryInProgress() || MqKafkaTxnRefused())
		return 0;
	MqSpiBegin(&spi, true);
	run("DELETE FROM mqlog.kafka_transaction t WHERE t.transactional_id OPERATOR(pg_catalog.=) ANY (ARRAY("
		"SELECT e.transactional_id FROM mqlog.kafka_transaction e"
		" WHERE e.updated_at OPERATOR(pg_catalog.<) (pg_catalog.now()"
		" OPERATOR(pg_catalog.-) pg_catalog.make_interval(secs => $1 / 1000.0))"
		" AND e.state OPERATOR(pg_catalog.<>) 'Ongoing'"
		" ORDER BY e.updated_at LIMIT " CppAsString2(MQK_TXN_ID_EXPIRE_BATCH) " FOR UPDATE SKIP LOCKED))"
		" AND t.state OPERATOR(pg_catalog.<>) 'Ongoing'",
		1, types, values, false);
	n = (int) SPI_processed;
	MqSpiEnd(&spi);
	if (n > 0)
		ereport(LOG,
				(errmsg("%d Kafka transactional ids unused for mqlog.kafka_transactional_id_expiration (%d ms) were removed",
						n, mqlog_kafka_transactional_id_expiration)));
	return n;
}

/* Is a Kafka transaction open?  (In the caller's transaction.) */
static bool
any_ongoing(void)
{
	MqSpi		spi;
	bool		found;

	MqSpiBegin(&spi, true);
	run("SELECT 1 FROM mqlog.kafka_transaction t WHERE t.state OPERATOR(pg_catalog.=) 'Ongoing' LIMIT 1",
		0, NULL, NULL, true);
	found = SPI_processed > 0;
	MqSpiEnd(&spi);
	return found;
}

/*
 * After a restart: the open transactions' holds on the last stable offset
 * of their partitions (shared memory, lost with it) are put back from the
 * table, so that readers again stop where each began.
 */
void
MqKafkaTxnRestoreHolds(void)
{
	MemoryContext caller = CurrentMemoryContext;
	MqSpi		spi;
	TxnPart    *parts;
	int64	   *pids;
	int			n;

	if (RecoveryInProgress() || MqKafkaTxnRefused())
		return;
	MqSpiBegin(&spi, true);
	run("SELECT p.topic_id, p.\"partition\", p.first_offset, t.producer_id"
		" FROM mqlog.kafka_transaction_partition p JOIN mqlog.kafka_transaction t USING (transactional_id)"
		" WHERE p.first_offset IS NOT NULL", 0, NULL, NULL, true);
	n = (int) SPI_processed;
	parts = MemoryContextAlloc(caller, sizeof(TxnPart) * (n + 1));
	pids = MemoryContextAlloc(caller, sizeof(int64) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		parts[i].topic_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		parts[i].partition = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		parts[i].first_offset = col_int64(i, 3, &isnull);
		pids[i] = col_int64(i, 4, &isnull);
	}
	MqSpiEnd(&spi);
	for (int i = 0; i < n; i++)
	{
		MqTopic    *topic = MqTopicLookupById(parts[i].topic_id);

		if (topic != NULL && parts[i].partition < topic->partitions)
			MqPartitionHoldKafkaTransaction(topic, parts[i].partition, pids[i], parts[i].first_offset);
	}
}

/* what a turn does (in its transaction); sweep: the ids' too */
static void
tick_work(void *arg)
{
	static bool restored = false;
	bool		sweep = *(bool *) arg;

	if (!OidIsValid(get_extension_oid("mqlog", true)))
	{
		ongoing_maybe = false;	/* nothing to look at before the next sweep */
		return;
	}
	if (!restored)
		MqKafkaTxnRestoreHolds();
	restored = true;
	(void) MqKafkaTxnExpire();
	if (sweep)
		(void) MqKafkaTxnExpireIds();
	ongoing_maybe = any_ongoing();
}

/*
 * The listener's turn, in a transaction of its own: the first time, the
 * holds of the transactions still open; then, once a second while a
 * transaction may be open (ongoing_maybe), the transactions past their
 * timeout; and every MQK_TXN_SWEEP_MS (or mqlog.kafka_transactional_id_
 * expiration if shorter) the expired transactional ids, and whether a
 * transaction is open after all (one a restore of a dump brought).  With
 * no transaction open, a turn costs a clock reading.  An ERROR is logged
 * and the turn given up until the next second.  (ongoing_maybe starts
 * true, so the first turn restores the holds.)
 */
void
MqKafkaTxnTick(void)
{
	static TimestampTz last = 0;
	static TimestampTz last_sweep = 0;
	TimestampTz now = GetCurrentTimestamp();
	bool		sweep;
	ErrorData  *e;

	if (!TimestampDifferenceExceeds(last, now, 1000))
		return;
	last = now;
	sweep = TimestampDifferenceExceeds(last_sweep, now,
									   Min(MQK_TXN_SWEEP_MS, mqlog_kafka_transactional_id_expiration));
	if (!sweep && !ongoing_maybe)
		return;
	if (sweep)
		last_sweep = now;
	if (!MqRunInTransaction(tick_work, &sweep, &e))
	{
		ereport(LOG,
				(errmsg("mqlog: the Kafka transaction coordinator's turn failed: %s", e->message)));
		FreeErrorData(e);
	}
}

/*
 * The maintenance worker's step (workers/maintenance.c, handed by
 * mqlog.c), in a transaction of its own each round, in every database at
 * every regular pass, whether or not the listener runs: the transactions
 * past their timeout, MQK_TXN_EXPIRE_BATCH a round, and in the first round
 * the expired ids, MQK_TXN_ID_EXPIRE_BATCH.  True while a round ended a
 * full batch of transactions (there may be more: the worker calls again,
 * at most 100 rounds a pass).  With the listener running it rarely finds
 * anything (the listener's turn comes every second); the two never end a
 * transaction twice (the banner).
 */
bool
MqKafkaTxnMaintain(int round)
{
	int			n;

	/* dropped since the pass looked (its tables with it): nothing to do */
	if (!OidIsValid(get_extension_oid("mqlog", true)))
		return false;
	if (round == 0)
		(void) MqKafkaTxnExpireIds();
	n = MqKafkaTxnExpire();
	return n >= MQK_TXN_EXPIRE_BATCH;
}
