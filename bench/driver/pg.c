/*
 * pg.c
 *	  The PostgreSQL systems' client: mqlog, the heap-table log, the SKIP
 *	  LOCKED queue, PgQ, and the floor (the same parameters received and
 *	  parsed by the server, a durable commit, nothing stored), over libpq.
 *
 * Every statement is prepared once.  Records travel as binary bytea[]
 * arrays (text[] for PgQ, whose events are text) and single values as
 * binary bytea; results come back in binary, and the client reads every
 * row's value length, so what a consumer is counted for was delivered.
 *
 * Pipeline mode, in two ways.  Produce: up to --pipeline calls in flight,
 * each followed by its own Sync, so that each call is one autocommitted
 * transaction (the default, 1, waits for each commit before the next
 * call).  Consume: the statements of one transaction that do not wait
 * for an earlier one's result go out in one round trip; a Sync inside an
 * explicit BEGIN does not end the transaction, so a consumer whose commit
 * needs the last offset it read (the heap log, mq_fetch) takes two round
 * trips, and mq_poll + mq_commit(group), which needs none, takes one.
 */
#include "mqbench.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OID_BYTEA	17
#define OID_TEXT	25

/* The parameters of one produce call, built before the clock starts. */
typedef struct PgCall
{
	int			n;
	const char *val[4];
	int			len[4];
	int			fmt[4];
	long		records;
	long long	bytes;
} PgCall;

/* What a consumer's result sets held. */
typedef struct PgRows
{
	int			want_cols;		/* look at results of this many columns */
	long		rows;
	long long	bytes;			/* value lengths (column 3) */
	long long	last;			/* column 0 of the last row (int8) */
	int			have_last;
} PgRows;

static int
is(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

int
PgKnows(const char *system, const char *workload)
{
	if (is(workload, "consume_fetch"))
		return is(system, "mqlog");
	if (is(workload, "consume"))
		return is(system, "mqlog") || is(system, "heap_log") || is(system, "skip_locked") ||
			is(system, "pgq") || is(system, "floor");
	if (is(workload, "produce_batch") || is(workload, "produce_single"))
		return is(system, "mqlog") || is(system, "heap_log") || is(system, "skip_locked") ||
			is(system, "pgq") || is(system, "floor") ||
			(is(system, "wal_floor") && is(workload, "produce_batch"));
	return 0;
}

static long long
be64(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;
	unsigned long long v = 0;
	int			i;

	for (i = 0; i < 8; i++)
		v = (v << 8) | u[i];
	return (long long) v;
}

static void
put32(char *p, uint32_t v)
{
	p[0] = (char) (v >> 24);
	p[1] = (char) (v >> 16);
	p[2] = (char) (v >> 8);
	p[3] = (char) v;
}

/*
 * One batch of values (or keys) as a one-dimensional array in
 * PostgreSQL's binary format: dimensions, null flag, element type, length
 * and lower bound, then each element's length and bytes.
 */
static char *
binary_array(char **elem, int *elen, int n, uint32_t elemtype, int *len)
{
	size_t		size = 20;
	char	   *buf;
	char	   *p;
	int			i;

	for (i = 0; i < n; i++)
		size += 4 + elen[i];
	buf = malloc(size);
	if (buf == NULL)
		return NULL;
	put32(buf, 1);
	put32(buf + 4, 0);
	put32(buf + 8, elemtype);
	put32(buf + 12, (uint32_t) n);
	put32(buf + 16, 1);
	p = buf + 20;
	for (i = 0; i < n; i++)
	{
		put32(p, (uint32_t) elen[i]);
		memcpy(p + 4, elem[i], elen[i]);
		p += 4 + elen[i];
	}
	*len = (int) size;
	return buf;
}

static int
fail_result(BenchClient *c, const char *what, const PGresult *r, PGconn *conn)
{
	BenchFail(c, "%s: %s", what, r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
	return -1;
}

/* A statement outside the pipeline, for set-up: fails unless it worked. */
static int
setup_exec(BenchClient *c, PGconn *conn, const char *sql, int n, const char *const *vals)
{
	PGresult   *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(r);
	int			rc = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = fail_result(c, sql, r, conn);
	PQclear(r);
	return rc;
}

static int
prepare(BenchClient *c, PGconn *conn, const char *name, const char *sql, int nparams)
{
	PGresult   *r = PQprepare(conn, name, sql, nparams, NULL);
	int			rc = 0;

	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = fail_result(c, sql, r, conn);
	PQclear(r);
	return rc;
}

/* A statement of the pipeline: binary results always. */
static int
send_prepared(BenchClient *c, PGconn *conn, const char *name, int n,
			  const char *const *val, const int *len, const int *fmt)
{
	if (!PQsendQueryPrepared(conn, name, n, val, len, fmt, 1))
		return fail_result(c, name, NULL, conn);
	return 0;
}

static int
sync(BenchClient *c, PGconn *conn)
{
	if (!PQpipelineSync(conn) || PQflush(conn) < 0)
		return fail_result(c, "sync", NULL, conn);
	return 0;
}

/*
 * Read every result up to the next Sync.  Result sets of rows->want_cols
 * columns are counted into rows; the first error is kept.
 */
static int
read_to_sync(BenchClient *c, PGconn *conn, PgRows *rows)
{
	int			failed = 0;

	for (;;)
	{
		PGresult   *r = PQgetResult(conn);
		ExecStatusType st;

		if (r == NULL)
		{
			if (PQstatus(conn) == CONNECTION_BAD)
				return fail_result(c, "connection lost", NULL, conn);
			continue;			/* the end of one statement's results */
		}
		st = PQresultStatus(r);
		if (st == PGRES_PIPELINE_SYNC)
		{
			PQclear(r);
			return failed ? -1 : 0;
		}
		if (st == PGRES_TUPLES_OK && rows && PQnfields(r) == rows->want_cols)
		{
			int			n = PQntuples(r);
			int			i;

			rows->rows += n;
			if (rows->want_cols >= 4)
				for (i = 0; i < n; i++)
					rows->bytes += PQgetlength(r, i, 3);
			if (n > 0 && !PQgetisnull(r, n - 1, 0) && PQgetlength(r, n - 1, 0) == 8)
			{
				rows->last = be64(PQgetvalue(r, n - 1, 0));
				rows->have_last = 1;
			}
		}
		else if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK)
		{
			if (!failed)
				fail_result(c, "statement", st == PGRES_PIPELINE_ABORTED ? NULL : r, conn);
			failed = 1;
		}
		PQclear(r);
	}
}

static PGconn *
pg_connect(BenchClient *c)
{
	PGconn	   *conn = PQconnectdb(c->opt->conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fail_result(c, "connect", NULL, conn);
		PQfinish(conn);
		return NULL;
	}
	if (setup_exec(c, conn, "SET statement_timeout = '300s'", 0, NULL) < 0)
	{
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* ---------------------------------------------------------------- produce */

/*
 * Each system's produce statements: %s is the quoted table.  The systems
 * that take the target's name as a parameter (mqlog's topic, PgQ's queue)
 * take it first; then the values and the keys (batched: arrays).
 */
/*
 * What makes the floor's commit durable: a transaction flushes its commit
 * record only if it wrote WAL before it (RecordTransactionCommit's
 * wrote_xlog), and an xid alone (txid_current()) writes none, so such a
 * commit is asynchronous whatever synchronous_commit says.  A
 * transactional logical message is a small WAL record (about 60 bytes)
 * that stores nothing and takes an xid; with it the commit waits for its
 * flush, as every system's produce does.
 */
#define FLOOR_DURABLE "pg_logical_emit_message(true, 'mqbench', '') IS NOT NULL"

static const struct
{
	const char *system;
	int			named;
	const char *batch;
	const char *single;
}			produce_stmts[] =
{
	{"mqlog", 1,
		"SELECT count(*) FROM mq_produce_batch($1::text, $2::bytea[], $3::bytea[])",
	"SELECT \"partition\", \"offset\" FROM mq_produce($1::text, $2::bytea, $3::bytea)"},
	{"heap_log", 0,
		"INSERT INTO %s (key, value) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS u(v, k)",
	"INSERT INTO %s (key, value) VALUES ($2::bytea, $1::bytea)"},
	{"skip_locked", 0,
		"INSERT INTO %s (key, message) SELECT k, v FROM unnest($1::bytea[], $2::bytea[]) AS u(v, k)",
	"INSERT INTO %s (key, message) VALUES ($2::bytea, $1::bytea)"},
	{"pgq", 1,
		"SELECT count(pgq.insert_event($1::text, 'ev', v, k, NULL, NULL, NULL))"
		" FROM unnest($2::text[], $3::text[]) AS u(v, k)",
	"SELECT pgq.insert_event($1::text, 'ev', $2::text, $3::text, NULL, NULL, NULL)"},
	{"floor", 0,
		"SELECT " FLOOR_DURABLE ", cardinality($1::bytea[]) + cardinality($2::bytea[])",
	"SELECT " FLOOR_DURABLE ", octet_length($1::bytea) + octet_length($2::bytea)"},

	/*
	 * The WAL floor: the arrays parsed, and their bytes (the binary send
	 * form: each value and key with a 4-byte length) written once to the
	 * WAL as one transactional logical message, flushed by the commit.
	 * What a log that stores nothing but its WAL would cost.
	 */
	{"wal_floor", 0,
		"SELECT pg_logical_emit_message(true, 'mqbench', array_send($1::bytea[]) || array_send($2::bytea[]))",
	NULL},
};

/* mqlog's batched produce to one partition, the client's own */
#define MQLOG_BATCH_TO_PARTITION \
	"SELECT count(*) FROM mq_produce_batch($1::text, $2::bytea[], $3::bytea[], \"partition\" => $4::int)"

/*
 * The produce statement of the run's system and workload, and its
 * parameter count (0: there is none); *named says whether the first
 * parameter is the target's name.
 */
static int
produce_sql(const BenchOptions *o, PGconn *conn, char *sql, size_t size, int *named)
{
	int			batch = is(o->workload, "produce_batch");
	int			to_partition = batch && is(o->system, "mqlog") && o->partitions > 0;
	char	   *ident;
	size_t		i;

	for (i = 0; i < sizeof(produce_stmts) / sizeof(produce_stmts[0]); i++)
	{
		if (!is(produce_stmts[i].system, o->system))
			continue;
		ident = PQescapeIdentifier(conn, o->target, strlen(o->target));
		if (ident == NULL)
			return 0;
		snprintf(sql, size, to_partition ? MQLOG_BATCH_TO_PARTITION :
				 batch ? produce_stmts[i].batch : produce_stmts[i].single, ident);
		PQfreemem(ident);
		*named = produce_stmts[i].named;
		return 2 + *named + to_partition;
	}
	return 0;
}

/*
 * The calls of one client: one per batch of its set, with the target's
 * name first where the statement takes it and mqlog's partition last.
 */
static PgCall *
produce_calls(BenchClient *c, const BenchSet *set, int named, char **arrays, char *partition)
{
	const BenchOptions *o = c->opt;
	int			batch = is(o->workload, "produce_batch");
	uint32_t	elemtype = is(o->system, "pgq") ? OID_TEXT : OID_BYTEA;
	PgCall	   *calls = calloc(set->nbatch, sizeof(PgCall));
	int			b;

	if (calls == NULL)
		return NULL;
	for (b = 0; b < set->nbatch; b++)
	{
		PgCall	   *k = &calls[b];
		int			first = b * set->batch;
		int			i;

		if (named)
		{
			k->val[k->n] = o->target;
			k->len[k->n] = (int) strlen(o->target);
			k->fmt[k->n++] = 0;
		}
		if (batch)
		{
			arrays[2 * b] = binary_array(set->value + first, set->value_len + first, set->batch,
										 elemtype, &k->len[k->n]);
			k->val[k->n] = arrays[2 * b];
			k->fmt[k->n++] = 1;
			arrays[2 * b + 1] = binary_array(set->key + first, set->key_len + first, set->batch,
											 elemtype, &k->len[k->n]);
			k->val[k->n] = arrays[2 * b + 1];
			k->fmt[k->n++] = 1;
			if (!arrays[2 * b] || !arrays[2 * b + 1])
			{
				free(calls);
				return NULL;
			}
		}
		else
		{
			k->val[k->n] = set->value[first];
			k->len[k->n] = set->value_len[first];
			k->fmt[k->n++] = 1;
			k->val[k->n] = set->key[first];
			k->len[k->n] = set->key_len[first];
			k->fmt[k->n++] = 1;
		}
		if (is(o->system, "mqlog") && batch && o->partitions > 0)
		{
			k->val[k->n] = partition;
			k->len[k->n] = (int) strlen(partition);
			k->fmt[k->n++] = 0;
		}
		k->records = set->batch;
		for (i = 0; i < set->batch; i++)
			k->bytes += set->value_len[first + i];
	}
	return calls;
}

/*
 * Autocommitted produce calls, cycling through `calls`, up to
 * opt->pipeline in flight: at least `todo` of them, and until
 * opt->seconds have passed.
 */
static int
produce_stream(BenchClient *c, PGconn *conn, const PgCall *calls, int ncalls, long todo)
{
	int			depth = c->opt->pipeline;
	double	   *sent_at = calloc(depth, sizeof(double));
	double		deadline;
	long		sent = 0;
	long		done = 0;
	int			rc = 0;

	if (sent_at == NULL)
	{
		BenchFail(c, "out of memory");
		BenchReady(c);
		return -1;
	}
	BenchReady(c);
	deadline = c->t_start + c->opt->seconds;
	while (rc == 0)
	{
		while (sent - done < depth && (sent < todo || BenchNow() < deadline))
		{
			const PgCall *k = &calls[sent % ncalls];
			PgCall		spread;
			char		partition[16];

			/* the partition is the last parameter; libpq copies it at once */
			if (c->opt->spread && c->opt->partitions > 0)
			{
				spread = *k;
				snprintf(partition, sizeof(partition), "%ld",
						 (c->id + sent * c->opt->clients) % c->opt->partitions);
				spread.val[spread.n - 1] = partition;
				spread.len[spread.n - 1] = (int) strlen(partition);
				k = &spread;
			}
			if (send_prepared(c, conn, "produce", k->n, k->val, k->len, k->fmt) < 0 ||
				sync(c, conn) < 0)
			{
				rc = -1;
				break;
			}
			sent_at[sent % depth] = BenchNow();
			sent++;
		}
		if (rc < 0 || done == sent)
			break;
		rc = read_to_sync(c, conn, NULL);
		if (rc == 0)
		{
			const PgCall *k = &calls[done % ncalls];

			BenchCall(c, sent_at[done % depth], BenchNow(), k->records, k->bytes);
			done++;
		}
	}
	free(sent_at);
	return rc;
}

/*
 * One producer: its records built, its calls encoded and its statement
 * prepared before the barrier, so that the clock sees only the calls.
 */
static int
run_produce(BenchClient *c, PGconn *conn)
{
	const BenchOptions *o = c->opt;
	char		sql[1024];
	char		partition[16];
	char	  **arrays = NULL;
	PgCall	   *calls = NULL;
	BenchSet	set;
	char		err[256];
	int			named;
	int			nparams = produce_sql(o, conn, sql, sizeof(sql), &named);
	int			nbatch;
	int			rc = -1;
	int			b;

	nbatch = BenchDistinct(c);
	snprintf(partition, sizeof(partition), "%d", o->partitions > 0 ? c->id % o->partitions : 0);
	memset(&set, 0, sizeof(set));
	if (nparams == 0)
		BenchFail(c, "no produce statement for %s", o->system);
	else if (BenchSetMake(o, c->id, nbatch, &set, err, sizeof(err)) < 0)
		BenchFail(c, "%s", err);
	else if (prepare(c, conn, "produce", sql, nparams) == 0 &&
			 (arrays = calloc(2 * (size_t) set.nbatch, sizeof(char *))) != NULL &&
			 (calls = produce_calls(c, &set, named, arrays, partition)) != NULL &&
			 PQenterPipelineMode(conn))
		rc = 0;
	else
		BenchFail(c, "set-up of the produce calls failed: %s", PQerrorMessage(conn));
	if (rc == 0)
		rc = produce_stream(c, conn, calls, set.nbatch, c->calls_todo);
	else
		BenchReady(c);
	if (arrays)
		for (b = 0; b < 2 * set.nbatch; b++)
			free(arrays[b]);
	free(arrays);
	free(calls);
	BenchSetFree(&set);
	return rc;
}

/* ---------------------------------------------------------------- consume */

/*
 * A consumer's transaction whose ack does not need what the read returned
 * (its first nack parameters are the read's): begin, read, ack and commit
 * pipelined in one round trip.  Rows it got, or -1.
 */
static long
one_trip(BenchClient *c, PGconn *conn, PgRows *rows, int nread, const char **v, int nack)
{
	if (send_prepared(c, conn, "begin", 0, NULL, NULL, NULL) < 0 ||
		send_prepared(c, conn, "read", nread, v, NULL, NULL) < 0 ||
		send_prepared(c, conn, "ack", nack, nack ? v : NULL, NULL, NULL) < 0 ||
		send_prepared(c, conn, "commit", 0, NULL, NULL, NULL) < 0 ||
		sync(c, conn) < 0 || read_to_sync(c, conn, rows) < 0)
		return -1;
	return rows->rows;
}

/* One transaction of each consumer: rows it got, or -1. */
static long
consume_once(BenchClient *c, PGconn *conn, long long *position, PgRows *rows)
{
	const BenchOptions *o = c->opt;
	char		batch[16];
	char		pos[24];
	const char *v[4];
	PgRows		id = {.want_cols = 1};

	snprintf(batch, sizeof(batch), "%d", o->batch);
	snprintf(pos, sizeof(pos), "%lld", *position);
	memset(rows, 0, sizeof(*rows));
	rows->want_cols = 4;
	if (is(o->system, "floor"))
	{
		/* the same rows every time, and a durable ack */
		v[0] = batch;
		return one_trip(c, conn, rows, 1, v, 0);
	}
	if (is(o->system, "mqlog") && is(o->workload, "consume"))
	{
		/* mq_commit(group) commits what this session polled */
		v[0] = o->group;
		v[1] = o->target;
		v[2] = batch;
		return one_trip(c, conn, rows, 3, v, 1);
	}
	if (is(o->system, "skip_locked"))
	{
		/* one DELETE ... RETURNING, autocommitted: pgmq's pop */
		if (send_prepared(c, conn, "read", 0, NULL, NULL, NULL) < 0 ||
			sync(c, conn) < 0 || read_to_sync(c, conn, rows) < 0)
			return -1;
		return rows->rows;
	}
	if (send_prepared(c, conn, "begin", 0, NULL, NULL, NULL) < 0)
		return -1;
	if (is(o->system, "pgq"))
	{
		/* the batch id first, then its events and the batch's end */
		v[0] = o->target;
		if (send_prepared(c, conn, "next", 1, v, NULL, NULL) < 0 ||
			sync(c, conn) < 0 || read_to_sync(c, conn, &id) < 0)
			return -1;
		if (id.have_last)
		{
			snprintf(pos, sizeof(pos), "%lld", id.last);
			v[0] = pos;
			if (send_prepared(c, conn, "read", 1, v, NULL, NULL) < 0 ||
				send_prepared(c, conn, "ack", 1, v, NULL, NULL) < 0)
				return -1;
		}
	}
	else
	{
		/* the heap log and mq_fetch: read, then commit the last position */
		int			fetch = is(o->system, "mqlog");

		v[0] = fetch ? o->target : pos;
		v[1] = pos;
		v[2] = batch;
		if (send_prepared(c, conn, "read", fetch ? 3 : 1, v, NULL, NULL) < 0 ||
			sync(c, conn) < 0 || read_to_sync(c, conn, rows) < 0)
			return -1;
		if (rows->rows > 0 && rows->have_last)
		{
			*position = rows->last + (fetch ? 1 : 0);
			snprintf(pos, sizeof(pos), "%lld", *position);
			v[0] = fetch ? o->group : pos;
			v[1] = o->target;
			v[2] = pos;
			if (send_prepared(c, conn, "ack", fetch ? 3 : 2, v, NULL, NULL) < 0)
				return -1;
		}
	}
	if (send_prepared(c, conn, "commit", 0, NULL, NULL, NULL) < 0 ||
		sync(c, conn) < 0 || read_to_sync(c, conn, is(o->system, "pgq") ? rows : NULL) < 0)
		return -1;
	return rows->rows;
}

/*
 * The consumer's statements, and its session-bound set-up outside the
 * clock: an mq_poll consumer joins its group in a transaction that it
 * rolls back (which rewinds its position, so nothing is skipped); an
 * mq_fetch consumer joins to own the partition it commits, and starts at
 * the log start offset.
 */
static int
consume_setup(BenchClient *c, PGconn *conn, long long *position)
{
	const BenchOptions *o = c->opt;
	char	   *ident = PQescapeIdentifier(conn, o->target, strlen(o->target));
	char		sql[4][512];
	int			nparams[4] = {0, 0, 0, 0};
	const char *v[2] = {o->group, o->target};
	int			fetch = is(o->workload, "consume_fetch");
	int			rc = 0;
	int			i;

	if (ident == NULL)
		return fail_result(c, "identifier", NULL, conn);
	snprintf(sql[0], sizeof(sql[0]), "BEGIN");
	snprintf(sql[3], sizeof(sql[3]), "COMMIT");
	sql[1][0] = sql[2][0] = '\0';
	if (is(o->system, "mqlog") && !fetch)
	{
		snprintf(sql[1], sizeof(sql[1]),
				 "SELECT \"offset\", ts, key, value FROM mq_poll($1::text, $2::text, $3::int, '1s'::interval)");
		snprintf(sql[2], sizeof(sql[2]), "SELECT mq_commit($1::text)");
		nparams[1] = 3;
		nparams[2] = 1;
		rc = setup_exec(c, conn, "BEGIN", 0, NULL);
		if (rc == 0)
			rc = setup_exec(c, conn, "SELECT count(*) FROM mq_poll($1::text, $2::text, 1, '1s'::interval)", 2, v);
		if (rc == 0)
			rc = setup_exec(c, conn, "ROLLBACK", 0, NULL);
	}
	else if (is(o->system, "mqlog"))
	{
		PGresult   *r;

		snprintf(sql[1], sizeof(sql[1]),
				 "SELECT \"offset\", ts, key, value FROM mq_fetch($1::text, 0, $2::bigint, $3::int)");
		snprintf(sql[2], sizeof(sql[2]), "SELECT mq_commit($1::text, $2::text, 0, $3::bigint)");
		nparams[1] = nparams[2] = 3;
		rc = setup_exec(c, conn, "SELECT count(*) FROM mq_poll($1::text, $2::text, 1, '1s'::interval)", 2, v);
		r = PQexecParams(conn, "SELECT mq_earliest_offset($1::text, 0)", 1, NULL, v + 1, NULL, NULL, 0);
		if (rc == 0 && (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1))
			rc = fail_result(c, "mq_earliest_offset", r, conn);
		else if (rc == 0)
			*position = atoll(PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	else if (is(o->system, "floor"))
	{
		/*
		 * The consume floor: a table of exactly one batch of the heap log's
		 * rows (bench.py copies them), read whole every time, and a
		 * durable commit of a small WAL record for the ack: the heap log's
		 * read with nothing to search for (a reference, not a bound: it
		 * pays a heap scan and the heap's short bytea headers).
		 */
		snprintf(sql[1], sizeof(sql[1]), "SELECT id, ts, key, value FROM %s LIMIT $1::int", ident);
		snprintf(sql[2], sizeof(sql[2]), "SELECT " FLOOR_DURABLE);
		nparams[1] = 1;
	}
	else if (is(o->system, "heap_log"))
	{
		snprintf(sql[1], sizeof(sql[1]),
				 "SELECT id, ts, key, value FROM %s WHERE id > $1::bigint ORDER BY id LIMIT %d", ident, o->batch);
		snprintf(sql[2], sizeof(sql[2]),
				 "UPDATE heap_offsets SET last_id = $1::bigint WHERE consumer = $2::text");
		nparams[1] = 1;
		nparams[2] = 2;
	}
	else if (is(o->system, "skip_locked"))
		snprintf(sql[1], sizeof(sql[1]),
				 "DELETE FROM %s WHERE msg_id IN (SELECT msg_id FROM %s WHERE vt <= now()"
				 " ORDER BY msg_id LIMIT %d FOR UPDATE SKIP LOCKED)"
				 " RETURNING msg_id, enqueued_at, key, message", ident, ident, o->batch);
	else if (is(o->system, "pgq"))
	{
		snprintf(sql[1], sizeof(sql[1]),
				 "SELECT ev_id, ev_time, ev_extra1, ev_data FROM pgq.get_batch_events($1::bigint)");
		snprintf(sql[2], sizeof(sql[2]), "SELECT pgq.finish_batch($1::bigint)");
		nparams[1] = nparams[2] = 1;
		if (prepare(c, conn, "next", "SELECT pgq.next_batch($1::text, 'c')", 1) < 0)
			rc = -1;
	}
	PQfreemem(ident);
	for (i = 0; i < 4 && rc == 0; i++)
	{
		static const char *const names[4] = {"begin", "read", "ack", "commit"};

		if (sql[i][0])
			rc = prepare(c, conn, names[i], sql[i], nparams[i]);
	}
	if (rc == 0 && !PQenterPipelineMode(conn))
		rc = fail_result(c, "pipeline mode", NULL, conn);
	return rc;
}

/*
 * Consume until every client together has the records asked for; a
 * client that finds nothing four times in a row stops (main then reports
 * the shortfall).
 */
static int
run_consume(BenchClient *c, PGconn *conn)
{
	long long	position = 0;
	int			empty = 0;
	int			rc = consume_setup(c, conn, &position);

	BenchReady(c);
	while (rc == 0 && BenchConsumed(0) < c->opt->records)
	{
		double		t0 = BenchNow();
		PgRows		rows;
		long		n = consume_once(c, conn, &position, &rows);

		if (n < 0)
			rc = -1;
		else if (n == 0 && ++empty > 3)
			break;
		else if (n > 0)
		{
			empty = 0;
			BenchConsumed(n);
		}
		if (n >= 0)
			BenchCall(c, t0, BenchNow(), n, rows.bytes);
	}
	return rc;
}

/* One client thread of a PostgreSQL system: connect, then its workload. */
int
PgRun(BenchClient *c)
{
	PGconn	   *conn = pg_connect(c);
	int			rc;

	if (conn == NULL)
	{
		BenchReady(c);
		return -1;
	}
	if (strncmp(c->opt->workload, "consume", 7) == 0)
		rc = run_consume(c, conn);
	else
		rc = run_produce(c, conn);
	PQfinish(conn);
	return rc;
}
