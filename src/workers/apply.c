/*-------------------------------------------------------------------------
 *
 * apply.c
 *		The follower's apply workers: one per other node of the cluster,
 *		streaming that node's log by logical decoding and writing here,
 *		batch for batch at the leader's offsets, the partitions this node
 *		follows from it, and its groups' committed offsets.
 *
 * The stream.  The worker connects to the leader twice with libpq: once
 * with replication=database, to create this node's slot there
 * ("mqlog_<node>") and run START_REPLICATION with mqlog's output plugin in
 * replica mode (PG15's walreceiver API hard-codes pgoutput's options and
 * cannot ask for it), and once as an ordinary session, for the copy and
 * the LSO marks of sql/replica_leader.c.  The replica stream
 * (log/output_plugin.c) carries every append of the leader at once, in WAL
 * order, which is offset order per partition, aborted ones included ('A');
 * a commit marker per batch when its transaction commits ('C'); LSO marks
 * ('L'); and the committed offsets of groups on replicated topics, at
 * commit ('O'), which are written into mqlog.committed_offset here.
 *
 * Pending batches.  A batch is written here only once its fate is known:
 * committed when its marker arrives, aborted when an LSO the leader logged
 * after it (in a later append's header, or in a mark) passes it without a
 * marker.  Every commit record precedes the LSO move that its commit
 * callback makes, so a marker always arrives before an LSO that covers its
 * batch.  Batches are written in offset order with their fate in mqlog's
 * prefix (log/replica.c), so commits that come out of offset order and
 * aborted transactions leave the follower with exactly the leader's log.
 * A batch that waits long for its fate (an idle partition after an abort)
 * gets a mark asked of the leader.
 *
 * Gaps.  What the stream did not carry (a partition followed before the
 * slot existed or before this node followed it, a transaction that began
 * before the slot's consistent point) shows as a pending batch above the
 * local log end offset; the worker then copies the decided batches from the
 * leader by offset (mqlog._replica_batches) until the gap is closed.  The
 * same copy brings every followed partition up to date when the worker
 * starts.
 *
 * Progress.  A replication origin ("mqlog_from_<leader>_<sysid>") records, with
 * each apply transaction's commit, the stream position from which nothing
 * pending can be lost: the LSN of the oldest pending append, or of the last
 * message when nothing is pending.  The worker starts the stream there and
 * reports it to the leader as flushed, so the slot keeps what a restart
 * needs.  A batch the stream sends again below the local log end offset
 * is skipped by its offset; one written again by a copy or after a crash
 * of the apply transaction must be byte-identical to the one here
 * (log/replica.c): a restart at any point neither loses nor duplicates.
 *
 * The loop follows contrib/pg_prewarm/autoprewarm.c and
 * replication/logical/worker.c: WaitLatchOrSocket on the stream's socket,
 * SIGTERM, SIGHUP, postmaster death.  An error ends the worker; the cluster
 * sync worker starts it again (apply_launcher.c, where its slot in shared
 * memory is).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/origin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/spi.h"
#include "cluster/metadata.h"
#include "store/batch.h"
#include "store/segment.h"
#include "store/wal.h"
#include "log/epochs.h"
#include "log/partition.h"
#include "log/replica.h"
#include "log/topic.h"
#include "workers/workers.h"

PGDLLEXPORT void mqlog_apply_main(Datum main_arg);

/* ------------------------------------------------------------------------
 * The worker's state
 * ------------------------------------------------------------------------ */

/* a batch the stream has carried whose fate, or turn, has not come */
typedef struct Pending
{
	int64		base;
	int64		next;			/* base + records */
	XLogRecPtr	lsn;			/* of its first append message */
	uint32		length;			/* stored length (prefix included) */
	StringInfoData bytes;		/* stored bytes, as they arrive */
	bool		committed;
	bool		aborted;
} Pending;

typedef struct PartKey
{
	int32		leader_topic_id;
	int32		partition;
} PartKey;

/* a partition this node follows from the leader */
typedef struct Part
{
	PartKey		key;
	char		topic[NAMEDATALEN];
	char		uuid[64];		/* mqlog.replicated_topic: the topic's identity */
	bool		followed;		/* seen in the last refresh */
	int32		leader_epoch;	/* of the leadership followed */
	bool		fresh;			/* not yet truncated to this leader's log:
								 * nothing is written, copied or reported for
								 * it until it is */
	int64		leo;			/* the local log end offset */
	List	   *pending;		/* Pending *, in offset order */
	TimestampTz waiting_since;	/* when the head began to wait */
	TimestampTz last_ask;		/* last copy or mark asked of the leader */
	int64		leader_lso;		/* the leader's, at the last progress report */
	TimestampTz behind_since;	/* below it with nothing pending, since */
} Part;

static struct Part *find_part(int32 topic_id, int32 partition);
static void drop_pending(struct Part *p);
static int64 get_be64(const char *p);
static MemoryContext apply_cxt;
static List *offsets_pending = NIL;	/* StringInfo: 'O' messages to write */
static HTAB *parts;				/* Part by key */
static List *part_list;			/* the same, to walk across transactions */
static char leader[MQ_NODE_NAME_LEN];
static PGconn *ctl;				/* ordinary session on the leader */
static PGconn *repl;			/* the stream */
static RepOriginId origin;
static XLogRecPtr last_lsn = InvalidXLogRecPtr;	/* of the last message */
static XLogRecPtr last_wal_end = InvalidXLogRecPtr; /* the leader's sent end */
static XLogRecPtr saved_lsn = InvalidXLogRecPtr;	/* the origin's progress */
static TimestampTz last_feedback = 0;
static TimestampTz last_report = 0;	/* of progress to the leader */
static bool report_due = false; /* something was written since the last
								 * report was sent */
static bool report_behind = false;	/* the last answer's high watermark
									 * was below what this node holds */
static bool report_inflight = false;	/* sent, its answer not yet read */
static WaitEventSet *wait_set;	/* the latch, the stream and ctl */


/* report progress at least this often, written or not */
#define MQ_APPLY_REPORT_MS	500
/*
 * How long the leader holds a report whose high watermark is below the
 * log end offsets it reports, waiting for the high watermark to move
 * (mqlog._replica_progress's wait_ms): the answer then brings it as soon
 * as the last in-sync replica's report moves it, with no report again.
 */
#define MQ_APPLY_REPORT_WAIT_MS	100
/* ... and a report that came back behind all the same goes again after this */
#define MQ_APPLY_REPORT_BEHIND_MS	10

/* ask the leader about a head that waits this long */
#define MQ_APPLY_ASK_MS		200
/* ... and copy when behind the leader's LSO this long with nothing pending
 * (the stream may simply not have brought it yet) */
#define MQ_APPLY_BEHIND_MS	1000
/* a mark (a WAL record on the leader) is asked again at most this often:
 * a transaction left open there keeps the head waiting */
#define MQ_APPLY_MARK_MS	1000

static void
leader_error(PGconn *conn, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("mqlog apply from leader \"%s\": %s failed", leader, what),
			 errdetail("%s", pchomp(PQerrorMessage(conn)))));
}

/* what failed on ctl (res, which this frees), and the leader's message */
static void
pg_attribute_noreturn()
ctl_failed(PGresult *res, const char *what)
{
	char	   *msg = pchomp(PQresultErrorMessage(res));

	PQclear(res);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("mqlog apply from leader \"%s\": %s failed", leader, what),
			 errdetail("%s", msg)));
}

static void poll_report(bool wait);

static PGresult *
ctl_exec(const char *sql, int nparams, const char *const *params, bool binary)
{
	PGresult   *res;

	poll_report(true);			/* one query at a time on ctl */
	res = PQexecParams(ctl, sql, nparams, NULL, params, NULL, NULL, binary ? 1 : 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
		ctl_failed(res, "a query on the leader");
	return res;
}

/*
 * Slot names allow [a-z0-9_] only.  A node name that needs changing to fit
 * gets a hash of the name as well, so that "N1" and "n1", or "a-b" and
 * "a_b", never share a slot.
 */
static char *
slot_name(void)
{
	const char *name = MqClusterNodeName();
	char	   *s = psprintf("mqlog_%s", name);
	bool		changed = false;

	for (char *c = s; *c; c++)
	{
		char		l = pg_tolower((unsigned char) *c);

		if (!((l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '_'))
			l = '_';
		changed |= (l != *c);
		*c = l;
	}
	if (changed)
		s = psprintf("%s_%08x", s, hash_bytes((const unsigned char *) name, strlen(name)));
	return s;
}

/* ------------------------------------------------------------------------
 * What this node follows
 * ------------------------------------------------------------------------ */

/*
 * Read mqlog.replica_state for the partitions that this node follows from
 * the leader, and the leader's topic ids of their topics.  Partitions no
 * longer followed are forgotten; new ones start at the local log end.
 */
static int
refresh_followed(void)
{
	ListCell   *plc;
	Part	   *p;
	int			nfollowed = 0;
	PGresult   *ids = NULL;

	foreach(plc, part_list)
		((Part *) lfirst(plc))->followed = false;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	{
		Datum		args[2] = {CStringGetTextDatum(leader),
		CStringGetTextDatum(MqClusterNodeName())};
		Oid			types[2] = {TEXTOID, TEXTOID};

		/* topics are matched by uuid: a dropped and recreated one is another */
		if (SPI_execute_with_args("SELECT t.name, r.\"partition\", rt.uuid, r.leader_epoch"
								  "  FROM mqlog.replica_state r JOIN mqlog.topic t USING (topic_id)"
								  "  JOIN mqlog.replicated_topic rt USING (topic_id)"
								  " WHERE r.leader OPERATOR(pg_catalog.=) $1"
								  "   AND $2 OPERATOR(pg_catalog.=) ANY (r.replicas)"
								  " ORDER BY 1, 2",
								  2, types, args, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "mqlog: reading mqlog.replica_state failed");
	}
	if (SPI_processed > 0)
		ids = ctl_exec("SELECT rt.uuid, t.topic_id FROM mqlog.topic t"
					   "  JOIN mqlog.replicated_topic rt USING (topic_id)", 0, NULL, false);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		int32		partition = atoi(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2));
		char	   *uuid = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);
		int32		epoch = atoi(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4));
		PartKey		key;
		bool		found;
		int			row = -1;

		for (int r = 0; uuid != NULL && r < PQntuples(ids); r++)
			if (strcmp(PQgetvalue(ids, r, 0), uuid) == 0)
				row = r;
		if (row < 0)
			continue;			/* not on the leader (yet, or any more) */
		key.leader_topic_id = atoi(PQgetvalue(ids, row, 1));
		key.partition = partition;
		p = hash_search(parts, &key, HASH_ENTER, &found);
		if (!found || strcmp(p->uuid, uuid) != 0 || strcmp(p->topic, name) != 0)
		{
			MqTopic    *t = MqTopicLookup(name, false);
			int64		lso;

			if (found)
				drop_pending(p);
			memset(((char *) p) + sizeof(PartKey), 0, sizeof(Part) - sizeof(PartKey));
			strlcpy(p->topic, name, NAMEDATALEN);
			strlcpy(p->uuid, uuid, sizeof(p->uuid));
			MqPartitionLogEnd(t, partition, &lso, &p->leo);
			p->pending = NIL;
			p->fresh = true;
			if (!found)
			{
				MemoryContext old = MemoryContextSwitchTo(apply_cxt);

				part_list = lappend(part_list, p);
				MemoryContextSwitchTo(old);
			}
		}
		/*
		 * A new leadership of the same leader (elections in between, or
		 * missed while this node's copy lagged): what this log holds of the
		 * old one may not be the leader's any more, so truncate again before
		 * writing or reporting anything (KIP-101).
		 */
		if (p->leader_epoch != epoch)
		{
			if (found && !p->fresh)
				drop_pending(p);
			p->leader_epoch = epoch;
			p->fresh = true;
		}
		p->followed = true;
		nfollowed++;
	}
	if (ids)
		PQclear(ids);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();

	foreach(plc, part_list)
	{
		p = lfirst(plc);
		if (!p->followed)
		{
			drop_pending(p);
			part_list = foreach_delete_current(part_list, plc);
			hash_search(parts, &p->key, HASH_REMOVE, NULL);
		}
	}
	return nfollowed;
}

/* ------------------------------------------------------------------------
 * Writing batches here
 * ------------------------------------------------------------------------ */

static void
free_pending(Pending *b)
{
	pfree(b->bytes.data);
	pfree(b);
}

static void
drop_pending(struct Part *p)
{
	ListCell   *lc;

	foreach(lc, p->pending)
		free_pending(lfirst(lc));
	list_free(p->pending);
	p->pending = NIL;
}

/*
 * The stream position from which a restart loses nothing pending: the
 * oldest pending append's, else the last message's.
 */
static XLogRecPtr
restart_point(void)
{
	ListCell   *plc;
	Part	   *p;
	bool		any = offsets_pending != NIL;
	XLogRecPtr	lsn = last_lsn;

	foreach(plc, part_list)
		if ((p = lfirst(plc))->pending != NIL)
		{
			lsn = Min(lsn, ((Pending *) linitial(p->pending))->lsn);
			any = true;
		}

	/*
	 * Nothing pending: everything the leader sent was written, so the
	 * stream's end is done with (a walsender at shutdown waits until its
	 * receiver confirms that).
	 */
	return any ? lsn : Max(last_lsn, last_wal_end);
}

static void
begin_apply(void)
{
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
}

static void
end_apply(XLogRecPtr progress)
{
	PopActiveSnapshot();
	replorigin_session_origin_lsn = progress;
	replorigin_session_origin_timestamp = GetCurrentTimestamp();
	CommitTransactionCommand();
	if (progress > saved_lsn)
		saved_lsn = progress;
	replorigin_session_origin_lsn = InvalidXLogRecPtr;
}

/*
 * One decided batch at p's log end (inside an apply transaction).  False,
 * writing nothing, when this node no longer follows p from this leader:
 * the topic was dropped here, or another node leads it now (a failover
 * this node's copy of the metadata already knows of), so this leader's
 * stream is stale for it.  The next refresh forgets p.
 */
static bool
write_batch(Part *p, const char *kafka, Size len, bool committed)
{
	MqTopic    *t = MqTopicLookup(p->topic, true);
	const char *now_leader;
	int64		next;

	if (t == NULL || t->replicas == NULL)
		return false;
	now_leader = t->replicas[p->key.partition].leader;
	if (now_leader == NULL || strcmp(now_leader, leader) != 0)
		return false;
	(void) MqLogAppendReplica(&t, p->key.partition, kafka, len, committed, &next);
	p->leo = Max(p->leo, next);
	return true;
}

/*
 * Make p's log end at new_end (mqlog._move_log_end): truncated to it, or
 * started again there, in the current apply transaction (the caller's,
 * begun for this alone: the partition moves to its new segment when it
 * commits).  False when the partition was busy: the caller tries again.
 */
static bool
move_log_end(MqTopic *t, Part *p, int64 new_end)
{
	Oid			types[3] = {INT4OID, INT4OID, INT8OID};
	Datum		values[3] = {Int32GetDatum(t->topic_id), Int32GetDatum(p->key.partition),
	Int64GetDatum(new_end)};
	bool		isnull;
	bool		done;

	SPI_connect();
	if (SPI_execute_with_args("SELECT mqlog._move_log_end($1, $2, $3)",
							  3, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog apply: mqlog._move_log_end failed");
	done = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return done;
}

/*
 * p's log ends below the leader's log start offset: start it again at
 * start.  False when the partition was busy: the next copy tries again.
 */
static bool
restart_log(Part *p, int64 start)
{
	MqTopic    *t;
	bool		done = false;
	int64		old_leo = p->leo;

	begin_apply();
	t = MqTopicLookup(p->topic, true);
	if (t != NULL)
		done = move_log_end(t, p, start);
	end_apply(InvalidXLogRecPtr);
	if (!done)
		return false;
	p->leo = start;
	ereport(LOG,
			(errmsg("mqlog apply from leader \"%s\": partition %d of topic \"%s\" started its log again at offset " INT64_FORMAT,
					leader, p->key.partition, p->topic, start),
			 errdetail("Its log ended at offset " INT64_FORMAT ", below the leader's log start offset: the leader no longer has offsets " INT64_FORMAT " to " INT64_FORMAT ".",
					   old_leo, old_leo, start - 1)));
	return true;
}

/*
 * Before following p from this leader: drop what this log holds beyond
 * the leader's, Kafka's way (KIP-101/279).  This log's last epoch E is
 * asked of the leader, which answers the largest epoch at most E it holds
 * and where that epoch ends there; the log is cut at the lower of that end
 * and this log's own end of the same epoch.  Once more after a cut, since
 * the last epoch here has changed.  False when the partition was busy.
 */
static bool
truncate_to_leader(Part *p)
{
	for (int round = 0; round < 8; round++)
	{
		MqTopic    *t;
		int32		mine,
					theirs;
		int64		target;
		char		tid[16],
					part[16],
					ep[16];
		const char *params[3] = {tid, part, ep};
		PGresult   *res;
		bool		done = false;
		int64		old_leo = p->leo;

		begin_apply();
		t = MqTopicLookup(p->topic, true);
		mine = t ? MqLogLastEpoch(t, p->key.partition) : -1;
		if (mine < 0)
		{
			end_apply(InvalidXLogRecPtr);
			return true;		/* nothing here to diverge */
		}
		snprintf(tid, sizeof(tid), "%d", p->key.leader_topic_id);
		snprintf(part, sizeof(part), "%d", p->key.partition);
		snprintf(ep, sizeof(ep), "%d", mine);
		res = ctl_exec("SELECT leader_epoch, end_offset"
					   "  FROM mqlog._replica_epoch_end($1::int, $2::int, $3::int)",
					   3, params, false);
		theirs = atoi(PQgetvalue(res, 0, 0));
		target = strtoi64(PQgetvalue(res, 0, 1), NULL, 10);
		PQclear(res);
		if (theirs != mine && theirs >= 0)
		{
			int32		found;

			target = Min(target, MqLogEpochEnd(t, p->key.partition, theirs, &found));
		}
		if (target >= p->leo)
		{
			end_apply(InvalidXLogRecPtr);
			return true;
		}
		done = move_log_end(t, p, target);
		end_apply(InvalidXLogRecPtr);
		if (!done)
			return false;
		p->leo = target;
		drop_pending(p);
		ereport(LOG,
				(errmsg("mqlog apply from leader \"%s\": truncated partition %d of topic \"%s\" to offset " INT64_FORMAT,
						leader, p->key.partition, p->topic, target),
				 errdetail("Offsets " INT64_FORMAT " to " INT64_FORMAT " were not in the leader's log: this log's last leader epoch was %d, and the leader's log ends epoch %d at offset " INT64_FORMAT ".",
						   target, old_leo - 1, mine, theirs, target)));
	}
	return true;
}

/*
 * Copy from the leader the decided batches after p's log end, so that a
 * gap closes; pending batches the copy overtook are dropped.
 */
static void
copy_from_leader(Part *p)
{
	for (;;)
	{
		char		tid[16],
					part[16],
					from[32];
		const char *params[3] = {tid, part, from};
		PGresult   *res;
		int			n;

		snprintf(tid, sizeof(tid), "%d", p->key.leader_topic_id);
		snprintf(part, sizeof(part), "%d", p->key.partition);
		snprintf(from, sizeof(from), INT64_FORMAT, p->leo);
		res = ctl_exec("SELECT base_offset, committed, batch"
					   "  FROM mqlog._replica_batches($1::int, $2::int, $3::bigint)",
					   3, params, true);
		n = PQntuples(res);
		if (n == 1 && PQgetisnull(res, 0, 2))
		{
			/* the leader's log starts above p's log end */
			int64		start = get_be64(PQgetvalue(res, 0, 0));

			PQclear(res);
			if (!restart_log(p, start))
				return;
			continue;
		}
		if (n > 0)
		{
			bool		stale = false;

			begin_apply();
			for (int i = 0; i < n && !stale; i++)
				stale = !write_batch(p, PQgetvalue(res, i, 2), PQgetlength(res, i, 2),
									 *PQgetvalue(res, i, 1) != 0);
			end_apply(InvalidXLogRecPtr);
			if (stale)
			{
				PQclear(res);
				drop_pending(p);
				return;
			}
		}
		PQclear(res);
		while (p->pending != NIL && ((Pending *) linitial(p->pending))->next <= p->leo)
		{
			free_pending(linitial(p->pending));
			p->pending = list_delete_first(p->pending);
		}
		if (n == 0)
			break;
	}
}

/*
 * Progress reports.  The follower tells the leader every followed
 * partition's log end offset (mqlog._replica_progress) right after each
 * apply transaction commits (its batches are then durable here), and at
 * least every MQ_APPLY_REPORT_MS; the leader's answer brings the high
 * watermarks for this node's readers.  A report is sent without waiting
 * for its answer: the stream goes on being applied meanwhile, and at most
 * one report is on its way, so that under load one report carries many
 * apply transactions.  The leader holds a report whose high watermark is
 * below the log end offsets it carries until the high watermark moves (up
 * to MQ_APPLY_REPORT_WAIT_MS): the follower that reports first learns the
 * new high watermark when the last in-sync replica's report moves it, not
 * at a report of its own later.
 */
static void take_report(PGresult *res);

#define MQ_REPORT_SQL "SELECT topic_id, \"partition\", high_watermark, last_stable_offset" \
	"  FROM mqlog._replica_progress($1, $2::int[], $3::int[], $4::bigint[], $5::int[]," \
	"                               $6::boolean, $7::bigint, $8::int)"

static void
send_report(void)
{
	StringInfoData tids,
				nums,
				leos,
				epochs;
	const char *params[8];
	char	   *ago;
	ListCell   *plc;

	report_due = false;
	report_behind = false;
	last_report = GetCurrentTimestamp();
	if (part_list == NIL)
		return;
	initStringInfo(&tids);
	initStringInfo(&nums);
	initStringInfo(&leos);
	initStringInfo(&epochs);
	foreach(plc, part_list)
	{
		Part	   *p = lfirst(plc);
		const char *sep = tids.len == 0 ? "{" : ",";

		/*
		 * Not yet truncated to this leader's log: its log end may count
		 * records the leader does not hold, and a high watermark taken for
		 * it would let readers, and commits waiting here from an earlier
		 * leadership, pass them.
		 */
		if (p->fresh)
			continue;
		appendStringInfo(&tids, "%s%d", sep, p->key.leader_topic_id);
		appendStringInfo(&nums, "%s%d", sep, p->key.partition);
		appendStringInfo(&leos, "%s" INT64_FORMAT, sep, p->leo);
		appendStringInfo(&epochs, "%s%d", sep, p->leader_epoch);
	}
	if (tids.len > 0)
	{
		appendStringInfoChar(&tids, '}');
		appendStringInfoChar(&nums, '}');
		appendStringInfoChar(&leos, '}');
		appendStringInfoChar(&epochs, '}');
		params[0] = MqClusterNodeName();
		params[1] = tids.data;
		params[2] = nums.data;
		params[3] = leos.data;
		params[4] = epochs.data;
		params[5] = MqClusterEtcdReached() ? "true" : "false";
		params[6] = ago = psprintf(INT64_FORMAT, MqClusterEtcdReachedAgo());
		params[7] = CppAsString2(MQ_APPLY_REPORT_WAIT_MS);
		/* libpq copies the parameters into its buffer: they may go now */
		if (!PQsendQueryParams(ctl, MQ_REPORT_SQL, 8, NULL, params, NULL, NULL, 0))
			leader_error(ctl, "sending a progress report");
		report_inflight = true;
		pfree(ago);
	}
	pfree(tids.data);
	pfree(nums.data);
	pfree(leos.data);
	pfree(epochs.data);
}

/*
 * Read the answer of the report on its way, if it has come (or, with
 * wait, once it comes: before ctl is used for anything else).
 */
static void
poll_report(bool wait)
{
	PGresult   *res;

	if (!report_inflight)
		return;
	if (!wait)
	{
		if (PQconsumeInput(ctl) == 0)
			leader_error(ctl, "reading a progress report's answer");
		if (PQisBusy(ctl))
			return;
	}
	report_inflight = false;
	while ((res = PQgetResult(ctl)) != NULL)
	{
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			ctl_failed(res, "a progress report");
		take_report(res);
		PQclear(res);
	}
}

/* the high watermarks (and the leader's LSOs) a report's answer brings */
static void
take_report(PGresult *res)
{
	bool		behind = false;
	bool		own = !IsTransactionState();	/* ctl_exec may be in one */

	if (own)
	{
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	for (int i = 0; i < PQntuples(res); i++)
	{
		Part	   *p = find_part(atoi(PQgetvalue(res, i, 0)), atoi(PQgetvalue(res, i, 1)));
		int64		hw = strtoi64(PQgetvalue(res, i, 2), NULL, 10);
		MqTopic    *t;

		if (p == NULL)
			continue;
		/* decided there, and nothing here on its way: the stream missed it */
		p->leader_lso = strtoi64(PQgetvalue(res, i, 3), NULL, 10);
		if ((t = MqTopicLookup(p->topic, true)) == NULL)
			continue;
		(void) MqPartitionAdvanceHighWatermark(MqTopicPartition(t, p->key.partition),
											   Min(hw, p->leo));
		if (hw < p->leo)
			behind = true;
	}
	if (own)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
	}

	/*
	 * The leader held the report as long as it holds one, and the high
	 * watermark has still not reached what this node holds (an in-sync
	 * replica is slow or away, until the leader drops it from the ISR, or
	 * another partition of the report caught up first): report again, and
	 * be held again.
	 */
	report_behind = behind;
}

/* ask the leader to log p's LSO into the stream */
static void
ask_mark(Part *p)
{
	char		tid[16],
				part[16];
	const char *params[2] = {tid, part};

	snprintf(tid, sizeof(tid), "%d", p->key.leader_topic_id);
	snprintf(part, sizeof(part), "%d", p->key.partition);
	PQclear(ctl_exec("SELECT mqlog._replica_mark($1::int, $2::int)", 2, params, false));
}

static bool
head_ready(Part *p)
{
	Pending    *b;

	if (p->pending == NIL || p->fresh)
		return false;
	b = linitial(p->pending);
	return b->base == p->leo && b->bytes.len == (int) b->length && (b->committed || b->aborted);
}

/*
 * Committed offsets the other node's groups wrote (inside an apply
 * transaction): into this node's mqlog.committed_offset, for the topic of
 * that uuid here, so that the group can go on here if that node is lost.
 * Not one stamped below the row's (groups/offsets.c): an old coordinator
 * sending, after a restart, commits the group's new coordinator has since
 * replaced.
 */
static void
write_offsets(void)
{
	ListCell   *lc;

	SPI_connect();
	foreach(lc, offsets_pending)
	{
		StringInfo	m = lfirst(lc);
		MqOffsetMark mark;
		char	   *group;
		Datum		args[6];
		char		nulls[6] = {' ', ' ', ' ', ' ', 'n', ' '};
		Oid			types[6] = {TEXTOID, TEXTOID, INT4OID, INT8OID, TEXTOID, INT8OID};
		Size		end;
		int			ret;

		memcpy(&mark, m->data, sizeof(mark));
		end = sizeof(mark) + mark.group_len;
		if (mark.group_len < 0 || end > (Size) m->len)
			continue;
		group = pnstrdup(m->data + sizeof(mark), mark.group_len);
		mark.uuid[sizeof(mark.uuid) - 1] = '\0';
		args[0] = CStringGetTextDatum(group);
		args[1] = CStringGetTextDatum(mark.uuid);
		args[2] = Int32GetDatum(mark.partition);
		args[3] = Int64GetDatum(mark.offset);
		args[5] = Int64GetDatum(mark.etcd_revision);
		/* after the group: a Kafka commit's metadata string (offsets.c) */
		if (end < (Size) m->len)
		{
			args[4] = PointerGetDatum(cstring_to_text_with_len(m->data + end, m->len - end));
			nulls[4] = ' ';
		}
		if (mark.offset < 0)
			ret = SPI_execute_with_args("DELETE FROM mqlog.committed_offset c"
										" USING mqlog.replicated_topic rt"
										" WHERE c.group_id OPERATOR(pg_catalog.=) $1"
										"   AND rt.uuid OPERATOR(pg_catalog.=) $2"
										"   AND c.topic_id OPERATOR(pg_catalog.=) rt.topic_id"
										"   AND c.\"partition\" OPERATOR(pg_catalog.=) $3"
										"   AND c.etcd_revision OPERATOR(pg_catalog.<=) $6",
										6, types, args, nulls, false, 0);
		else
			ret = SPI_execute_with_args("INSERT INTO mqlog.committed_offset"
										"       (group_id, topic_id, \"partition\", committed_offset, metadata,"
										"        etcd_revision)"
										" SELECT $1, rt.topic_id, $3, $4, $5, $6 FROM mqlog.replicated_topic rt"
										"  WHERE rt.uuid OPERATOR(pg_catalog.=) $2"
										" ON CONFLICT (group_id, topic_id, \"partition\")"
										" DO UPDATE SET committed_offset = excluded.committed_offset,"
										"               committed_at = pg_catalog.now(),"
										"               metadata = excluded.metadata,"
										"               etcd_revision = excluded.etcd_revision"
										" WHERE committed_offset.etcd_revision OPERATOR(pg_catalog.<=) excluded.etcd_revision",
										6, types, args, nulls, false, 0);
		if (ret != SPI_OK_INSERT && ret != SPI_OK_DELETE)
			elog(ERROR, "mqlog apply: writing a replicated committed offset failed");
		pfree(m->data);
		pfree(m);
	}
	SPI_finish();
	list_free(offsets_pending);
	offsets_pending = NIL;
}

/* write every pending batch whose turn and fate have come, in one transaction */
static void
write_ready(void)
{
	ListCell   *plc;
	Part	   *p;
	bool		any = false;

	foreach(plc, part_list)
	{
		p = lfirst(plc);
		while (head_ready(p))
		{
			Pending    *b = linitial(p->pending);

			if (!any)
				begin_apply();
			any = true;
			if (!write_batch(p, b->bytes.data + MQ_PREFIX_SIZE, b->length - MQ_PREFIX_SIZE, b->committed))
			{
				drop_pending(p);
				break;
			}
			free_pending(b);
			p->pending = list_delete_first(p->pending);
			p->waiting_since = 0;
		}
	}
	if (offsets_pending != NIL)
	{
		if (!any)
			begin_apply();
		any = true;
		write_offsets();
	}
	if (any)
	{
		end_apply(restart_point());
		report_due = true;
	}
}

/*
 * Write what is ready; then, for heads that have waited too long, ask the
 * leader: a copy for a gap below the head, a mark for a fate.
 */
static void
apply_ready(void)
{
	ListCell   *plc;
	Part	   *p;
	List	   *copies = NIL;
	List	   *marks = NIL;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();

	write_ready();
	foreach(plc, part_list)
	{
		p = lfirst(plc);
		if (p->fresh)
			continue;			/* truncated first (the refresh retries it) */
		if (p->pending == NIL)
		{
			/*
			 * Nothing on its way, yet the leader has decided more: an append
			 * the stream carried before this node followed the partition.
			 */
			if (p->leo >= p->leader_lso)
				p->behind_since = 0;
			else if (p->behind_since == 0)
				p->behind_since = now;
			else if (TimestampDifferenceExceeds(p->behind_since, now, MQ_APPLY_BEHIND_MS) &&
					 TimestampDifferenceExceeds(p->last_ask, now, MQ_APPLY_ASK_MS))
				copies = lappend(copies, p);
			continue;
		}
		if (p->waiting_since == 0)
			p->waiting_since = now;
		if (!TimestampDifferenceExceeds(p->last_ask, now, MQ_APPLY_ASK_MS))
			continue;
		if (((Pending *) linitial(p->pending))->base > p->leo)
			copies = lappend(copies, p);
		else if (TimestampDifferenceExceeds(p->waiting_since, now, MQ_APPLY_ASK_MS) &&
				 TimestampDifferenceExceeds(p->last_ask, now, MQ_APPLY_MARK_MS))
			marks = lappend(marks, p);
	}
	foreach(lc, copies)
	{
		p = lfirst(lc);
		p->last_ask = now;
		copy_from_leader(p);
	}
	foreach(lc, marks)
	{
		p = lfirst(lc);
		p->last_ask = now;
		ask_mark(p);
	}
	if (copies != NIL)
		write_ready();
	list_free(copies);
	list_free(marks);
}

/* ------------------------------------------------------------------------
 * The stream's messages
 * ------------------------------------------------------------------------ */

/* batches of p below lso that have no commit marker are aborted */
static void
resolve_below(Part *p, int64 lso)
{
	ListCell   *lc;

	foreach(lc, p->pending)
	{
		Pending    *b = lfirst(lc);

		if (b->base >= lso)
			break;
		if (!b->committed)
			b->aborted = true;
	}
}

static struct Part *
find_part(int32 topic_id, int32 partition)
{
	PartKey		key;

	key.leader_topic_id = topic_id;
	key.partition = partition;
	return hash_search(parts, &key, HASH_FIND, NULL);
}

static void
on_append(XLogRecPtr lsn, const char *data, Size len)
{
	xl_mqlog_append xl;
	Part	   *p;
	Pending    *b = NULL;
	MemoryContext old;

	memcpy(&xl, data, SizeOfMqlogAppend);
	if (len != SizeOfMqlogAppend + xl.chunk_length || xl.format != MQ_SEGMENT_FORMAT)
		elog(ERROR, "mqlog apply from leader \"%s\": malformed append message at %X/%X",
			 leader, LSN_FORMAT_ARGS(lsn));
	p = find_part(xl.topic_id, xl.partition);
	if (p == NULL)
		return;
	old = MemoryContextSwitchTo(apply_cxt);
	if (xl.chunk_start == 0)
	{
		Pending    *last = p->pending ? llast(p->pending) : NULL;

		/* sent again after a restart: already here, or already pending */
		if (xl.base_offset < p->leo || (last && xl.base_offset < last->next))
		{
			MemoryContextSwitchTo(old);
			resolve_below(p, xl.lso);
			return;
		}
		b = palloc0(sizeof(Pending));
		b->base = xl.base_offset;
		b->next = xl.base_offset;	/* until the header arrives */
		b->lsn = lsn;
		b->length = xl.batch_length;
		initStringInfo(&b->bytes);
		p->pending = lappend(p->pending, b);
	}
	else if (p->pending != NIL)
		b = llast(p->pending);
	if (b && b->base == xl.base_offset && b->bytes.len == (int) xl.chunk_start)
	{
		appendBinaryStringInfo(&b->bytes, data + SizeOfMqlogAppend, xl.chunk_length);
		if (b->bytes.len >= MQ_BATCH_HEADER_SIZE && b->next == b->base)
		{
			MqBatchHeader hdr;

			if (!MqBatchParseHeader(b->bytes.data, b->bytes.len, &hdr))
				elog(ERROR, "mqlog apply from leader \"%s\": malformed batch at offset " INT64_FORMAT,
					 leader, b->base);
			b->next = MqBatchNextOffset(&hdr);
		}
	}
	MemoryContextSwitchTo(old);
	resolve_below(p, xl.lso);
}

static void
on_commit(const char *data, Size len)
{
	xl_mqlog_append xl;
	Part	   *p;
	ListCell   *lc;

	memcpy(&xl, data, SizeOfMqlogAppend);
	p = find_part(xl.topic_id, xl.partition);
	if (p == NULL)
		return;
	foreach(lc, p->pending)
	{
		Pending    *b = lfirst(lc);

		if (b->base == xl.base_offset)
			b->committed = true;
	}
}

static void
on_lso(const char *data, Size len)
{
	MqLsoMark	mark;
	Part	   *p;

	memcpy(&mark, data, sizeof(mark));
	p = find_part(mark.topic_id, mark.partition);
	if (p != NULL)
		resolve_below(p, mark.lso);
}

static int64
get_be64(const char *p)
{
	uint64		v;

	memcpy(&v, p, 8);
	return (int64) pg_ntoh64(v);
}

static void
put_be64(char *p, int64 v)
{
	uint64		n = pg_hton64((uint64) v);

	memcpy(p, &n, 8);
}

static void
send_feedback(bool force)
{
	TimestampTz now = GetCurrentTimestamp();
	char		msg[1 + 8 * 4 + 1];
	XLogRecPtr	done = saved_lsn;

	if (!force && !TimestampDifferenceExceeds(last_feedback, now, 1000))
		return;
	msg[0] = 'r';
	put_be64(msg + 1, done);
	put_be64(msg + 9, done);
	put_be64(msg + 17, done);
	put_be64(msg + 25, now);
	msg[33] = 0;
	if (PQputCopyData(repl, msg, sizeof(msg)) <= 0 || PQflush(repl) != 0)
		leader_error(repl, "sending feedback");
	last_feedback = now;
}

/*
 * With nothing pending, the restart point moves with the stream even when
 * nothing is written.  Move the origin's progress in memory (a checkpoint
 * saves it) and report it, so that the leader's slot lets go of WAL that
 * an idle follower no longer needs.  Losing it in a crash only means
 * reading again: nothing was pending before it.
 */
static void
advance_idle(void)
{
	XLogRecPtr	lsn = restart_point();

	if (lsn <= saved_lsn)
		return;
	replorigin_session_advance(lsn, InvalidXLogRecPtr);
	saved_lsn = lsn;
}

static void
on_copy_data(const char *buf, int len)
{
	if (buf[0] == 'w' && len >= 25)
	{
		XLogRecPtr	lsn = (XLogRecPtr) get_be64(buf + 1);
		const char *data = buf + 25;
		Size		dlen = len - 25;

		last_wal_end = Max(last_wal_end, (XLogRecPtr) get_be64(buf + 9));

		if (dlen < 1)
			return;
		switch (data[0])
		{
			case 'A':
				on_append(lsn, data + 1, dlen - 1);
				break;
			case 'C':
				if (dlen - 1 >= SizeOfMqlogAppend)
					on_commit(data + 1, dlen - 1);
				break;
			case 'L':
				if (dlen - 1 == sizeof(MqLsoMark))
					on_lso(data + 1, dlen - 1);
				break;
			case 'O':
				if (dlen - 1 >= sizeof(MqOffsetMark))
				{
					MemoryContext old = MemoryContextSwitchTo(apply_cxt);
					StringInfo	m = makeStringInfo();

					appendBinaryStringInfo(m, data + 1, dlen - 1);
					offsets_pending = lappend(offsets_pending, m);
					MemoryContextSwitchTo(old);
				}
				break;
		}
		last_lsn = Max(last_lsn, lsn);
	}
	else if (buf[0] == 'k' && len >= 18)
	{
		last_wal_end = Max(last_wal_end, (XLogRecPtr) get_be64(buf + 1));
		if (buf[17])
		{
			advance_idle();
			send_feedback(true);
		}
	}
}

/* ------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------ */

static PGconn *
connect_leader(const char *conninfo, bool replication)
{
	/* the node's conninfo, then the cluster database over its dbname */
	/*
	 * Bounded waits on a leader that stops answering: TCP keepalives and a
	 * statement timeout, so that the worker (and a shutdown waiting for
	 * it) never hangs on a silent leader.
	 */
	const char *keys[] = {"dbname", "dbname", "replication", "fallback_application_name",
		"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout", "options", NULL};
	const char *vals[] = {conninfo, mqlog_cluster_database, replication ? "database" : NULL,
		"mqlog apply", "10", "1", "10", "5", "3", "30000",
	replication ? NULL : "-c statement_timeout=60000", NULL};
	PGconn	   *conn = PQconnectdbParams(keys, vals, 1);

	if (PQstatus(conn) != CONNECTION_OK)
		leader_error(conn, "connecting");
	return conn;
}

static void
close_conns(int code, Datum arg)
{
	if (repl)
		PQfinish(repl);
	if (ctl)
		PQfinish(ctl);
	repl = ctl = NULL;
}

void
mqlog_apply_main(Datum main_arg)
{
	char	   *conninfo;
	char	   *slot;
	char	   *origin_name;
	char	   *cmd;
	PGresult   *res;
	HASHCTL		hctl;
	TimestampTz last_refresh;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	MqApplyAttach(DatumGetInt32(main_arg), leader);
	before_shmem_exit(close_conns, 0);

	BackgroundWorkerInitializeConnection(mqlog_cluster_database, NULL, 0);
	SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
	/* progress is reported as flushed once committed: commits must be durable */
	SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	apply_cxt = AllocSetContextCreate(TopMemoryContext, "mqlog apply", ALLOCSET_DEFAULT_SIZES);
	memset(&hctl, 0, sizeof(hctl));
	hctl.keysize = sizeof(PartKey);
	hctl.entrysize = sizeof(Part);
	hctl.hcxt = apply_cxt;
	parts = hash_create("mqlog apply partitions", 256, &hctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	conninfo = MqClusterNodeConninfo(leader);
	if (conninfo == NULL)
	{
		ereport(LOG, (errmsg("mqlog apply: leader \"%s\" is not a known node; stopping", leader)));
		proc_exit(0);
	}
	conninfo = MemoryContextStrdup(apply_cxt, conninfo);
	ctl = connect_leader(conninfo, false);
	(void) refresh_followed();

	/*
	 * The replication origin that remembers how far the stream was applied.
	 * Its name has the leader's system identifier: a leader rebuilt under
	 * the same name has other LSNs, and its stream starts afresh.
	 */
	res = ctl_exec("SELECT system_identifier FROM pg_catalog.pg_control_system()", 0, NULL, false);
	origin_name = psprintf("mqlog_from_%s_%s", leader, PQgetvalue(res, 0, 0));
	PQclear(res);
	StartTransactionCommand();
	origin = replorigin_by_name(origin_name, true);
	if (origin == InvalidRepOriginId)
		origin = replorigin_create(origin_name);
	CommitTransactionCommand();
	replorigin_session_setup(origin);
	replorigin_session_origin = origin;
	saved_lsn = replorigin_session_get_progress(false);

	/* this node's slot on the leader */
	repl = connect_leader(conninfo, true);
	slot = slot_name();
	{
		const char *params[1] = {slot};

		res = ctl_exec("SELECT wal_status FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
					   1, params, false);

		/*
		 * Gone past max_slot_wal_keep_size: the slot can stream no more.
		 * Make a new one, and copy what it will not carry.
		 */
		if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "lost") == 0)
		{
			ereport(LOG,
					(errmsg("mqlog apply: replication slot \"%s\" on leader \"%s\" lost WAL this node needed; catching up by copy",
							slot, leader)));
			PQclear(ctl_exec("SELECT pg_catalog.pg_drop_replication_slot($1)", 1, params, false));
			PQclear(res);
			res = ctl_exec("SELECT wal_status FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
						   1, params, false);
			saved_lsn = InvalidXLogRecPtr;
		}
	}
	if (PQntuples(res) == 0)
	{
		PGresult   *cr;

		cmd = psprintf("CREATE_REPLICATION_SLOT \"%s\" LOGICAL mqlog (SNAPSHOT 'nothing')", slot);
		cr = PQexec(repl, cmd);
		if (PQresultStatus(cr) != PGRES_TUPLES_OK)
			leader_error(repl, "creating the replication slot");
		PQclear(cr);
		ereport(LOG, (errmsg("mqlog apply: created replication slot \"%s\" on leader \"%s\"", slot, leader)));
	}
	PQclear(res);

	/* what the slot's stream will not carry: copy it */
	{
		ListCell   *plc;
		Part	   *p;

		foreach(plc, part_list)
		{
			p = lfirst(plc);
			p->fresh = !truncate_to_leader(p);
			if (!p->fresh)
				copy_from_leader(p);
		}
	}

	last_lsn = saved_lsn;
	cmd = psprintf("START_REPLICATION SLOT \"%s\" LOGICAL %X/%X (\"replica\" 'true')",
				   slot, LSN_FORMAT_ARGS(saved_lsn));
	res = PQexec(repl, cmd);
	if (PQresultStatus(res) != PGRES_COPY_BOTH)
		leader_error(repl, "starting the stream");
	PQclear(res);
	ereport(LOG, (errmsg("mqlog apply: following leader \"%s\" from %X/%X",
						 leader, LSN_FORMAT_ARGS(saved_lsn))));

	last_refresh = GetCurrentTimestamp();
	/* woken by the latch, the stream, or a report's answer */
	wait_set = CreateWaitEventSet(TopMemoryContext, 4);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wait_set, WL_SOCKET_READABLE, PQsocket(repl), NULL, NULL);
	AddWaitEventToSet(wait_set, WL_SOCKET_READABLE, PQsocket(ctl), NULL, NULL);

	for (;;)
	{
		WaitEvent	event;
		char	   *buf;
		int			len;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (PQconsumeInput(repl) == 0)
			leader_error(repl, "reading the stream");
		while ((len = PQgetCopyData(repl, &buf, 1)) > 0)
		{
			on_copy_data(buf, len);
			PQfreemem(buf);
			CHECK_FOR_INTERRUPTS();
		}
		if (len == -1)
		{
			ereport(LOG, (errmsg("mqlog apply: leader \"%s\" ended the stream", leader)));
			proc_exit(1);
		}
		if (len == -2)
			leader_error(repl, "reading the stream");

		poll_report(false);
		apply_ready();
		advance_idle();
		send_feedback(false);

		/* between reports: ctl is free, and a refresh does not wait for one */
		if (!report_inflight &&
			TimestampDifferenceExceeds(last_refresh, GetCurrentTimestamp(), 1000))
		{
			last_refresh = GetCurrentTimestamp();
			(void) refresh_followed();
			if (MqClusterNodeConninfo(leader) == NULL)
			{
				ereport(LOG, (errmsg("mqlog apply: node \"%s\" is no longer in the cluster; stopping", leader)));
				proc_exit(0);
			}
			/* partitions followed since: bring them up first */
			{
				ListCell   *plc;
				Part	   *p;

				foreach(plc, part_list)
					if ((p = lfirst(plc))->fresh)
					{
						p->fresh = !truncate_to_leader(p);
						if (!p->fresh)
							copy_from_leader(p);
					}
			}
		}
		if (!report_inflight &&
			(report_due ||
			 (report_behind && TimestampDifferenceExceeds(last_report, GetCurrentTimestamp(),
														  MQ_APPLY_REPORT_BEHIND_MS)) ||
			 TimestampDifferenceExceeds(last_report, GetCurrentTimestamp(), MQ_APPLY_REPORT_MS)))
			send_report();

		if (WaitEventSetWait(wait_set, report_behind ? MQ_APPLY_REPORT_BEHIND_MS : 100,
							 &event, 1, PG_WAIT_EXTENSION) == 1 &&
			(event.events & WL_LATCH_SET))
			ResetLatch(MyLatch);
	}
}
