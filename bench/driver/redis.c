/*
 * redis.c
 *	  Redis Streams' client, over hiredis (Debian's libhiredis-dev): the
 *	  same records as the PostgreSQL systems, so that the ratios to Redis
 *	  are not a Python client's either.
 *
 * A batched produce is one round trip of `batch` pipelined
 * XADD stream * k key v value; a single-record produce one XADD per round
 * trip; a consumer reads XREADGROUP GROUP g c COUNT batch STREAMS stream >
 * and acknowledges what it got with one XACK.
 */
#include "mqbench.h"

#include <hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
RedisKnows(const char *workload)
{
	return strcmp(workload, "produce_batch") == 0 || strcmp(workload, "produce_single") == 0 ||
		strcmp(workload, "consume") == 0;
}

/* A reply that is there and not an error; otherwise the client fails. */
static int
check_reply(BenchClient *c, redisContext *ctx, redisReply *r, const char *what)
{
	if (r == NULL)
	{
		BenchFail(c, "%s: %s", what, ctx->errstr);
		return -1;
	}
	if (r->type == REDIS_REPLY_ERROR)
	{
		BenchFail(c, "%s: %s", what, r->str);
		freeReplyObject(r);
		return -1;
	}
	return 0;
}

/* `n` XADDs of the set's records from `first`, in one round trip. */
static int
xadd(BenchClient *c, redisContext *ctx, const BenchSet *set, int first, int n)
{
	const char *argv[7] = {"XADD", c->opt->target, "*", "k", NULL, "v", NULL};
	size_t		len[7] = {4, strlen(c->opt->target), 1, 1, 0, 1, 0};
	int			i;

	for (i = first; i < first + n; i++)
	{
		argv[4] = set->key[i];
		len[4] = set->key_len[i];
		argv[6] = set->value[i];
		len[6] = set->value_len[i];
		if (redisAppendCommandArgv(ctx, 7, argv, len) != REDIS_OK)
		{
			BenchFail(c, "XADD: %s", ctx->errstr);
			return -1;
		}
	}
	for (i = 0; i < n; i++)
	{
		void	   *r = NULL;

		if (redisGetReply(ctx, &r) != REDIS_OK || check_reply(c, ctx, r, "XADD") < 0)
			return -1;
		freeReplyObject(r);
	}
	return 0;
}

/* A Redis producer: batches of pipelined XADDs, or one per round trip. */
static int
run_produce(BenchClient *c, redisContext *ctx)
{
	const BenchOptions *o = c->opt;
	int			nbatch = BenchDistinct(c);
	BenchSet	set;
	char		err[256];
	double		deadline;
	long		call;
	int			rc = 0;

	if (BenchSetMake(o, c->id, nbatch, &set, err, sizeof(err)) < 0)
	{
		BenchFail(c, "%s", err);
		BenchReady(c);
		return -1;
	}
	BenchReady(c);
	deadline = c->t_start + o->seconds;
	for (call = 0; call < c->calls_todo || BenchNow() < deadline; call++)
	{
		int			first = (int) (call % set.nbatch) * set.batch;
		long long	bytes = 0;
		double		t0 = BenchNow();
		int			i;

		if (xadd(c, ctx, &set, first, set.batch) < 0)
		{
			rc = -1;
			break;
		}
		for (i = first; i < first + set.batch; i++)
			bytes += set.value_len[i];
		BenchCall(c, t0, BenchNow(), set.batch, bytes);
	}
	BenchSetFree(&set);
	return rc;
}

/*
 * XREADGROUP, then XACK of every id it returned; the reply is
 * [[stream, [[id, [k, key, v, value]], ...]]].
 */
static int
run_consume(BenchClient *c, redisContext *ctx)
{
	const BenchOptions *o = c->opt;
	const char **ack = calloc(o->batch + 3, sizeof(char *));
	size_t	   *acklen = calloc(o->batch + 3, sizeof(size_t));
	char		count[16];
	int			empty = 0;
	int			rc = 0;

	snprintf(count, sizeof(count), "%d", o->batch);
	BenchReady(c);
	if (ack == NULL || acklen == NULL)
	{
		BenchFail(c, "out of memory");
		rc = -1;
	}
	while (rc == 0 && BenchConsumed(0) < o->records)
	{
		const char *argv[10] = {"XREADGROUP", "GROUP", o->group, "c", "COUNT", count,
		"STREAMS", o->target, ">"};
		double		t0 = BenchNow();
		redisReply *r = redisCommandArgv(ctx, 9, argv, NULL);
		redisReply *entries = NULL;
		long long	bytes = 0;
		size_t		i;
		size_t		n = 0;

		if (check_reply(c, ctx, r, "XREADGROUP") < 0)
		{
			rc = -1;
			break;
		}
		if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
			r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2)
			entries = r->element[0]->element[1];
		if (entries && entries->type == REDIS_REPLY_ARRAY)
			n = entries->elements;
		ack[0] = "XACK";
		ack[1] = o->target;
		ack[2] = o->group;
		for (i = 0; i < n && i < (size_t) o->batch; i++)
		{
			redisReply *e = entries->element[i];
			redisReply *f = e->elements == 2 ? e->element[1] : NULL;

			ack[3 + i] = e->element[0]->str;
			acklen[3 + i] = e->element[0]->len;
			if (f && f->type == REDIS_REPLY_ARRAY && f->elements == 4)
				bytes += f->element[3]->len;
		}
		acklen[0] = 4;
		acklen[1] = strlen(o->target);
		acklen[2] = strlen(o->group);
		if (n > 0)
		{
			redisReply *a = redisCommandArgv(ctx, (int) (3 + i), ack, acklen);

			if (check_reply(c, ctx, a, "XACK") < 0)
				rc = -1;
			else
				freeReplyObject(a);
		}
		freeReplyObject(r);
		if (rc < 0)
			break;
		if (n == 0 && ++empty > 3)
			break;
		if (n > 0)
		{
			empty = 0;
			BenchConsumed((long) n);
		}
		BenchCall(c, t0, BenchNow(), (long) n, bytes);
	}
	free(ack);
	free(acklen);
	return rc;
}

/* One client thread of Redis: connect, then its workload. */
int
RedisRun(BenchClient *c)
{
	struct timeval tv = {10, 0};
	redisContext *ctx = redisConnectWithTimeout(c->opt->redis_host, c->opt->redis_port, tv);
	int			rc;

	if (ctx == NULL || ctx->err)
	{
		BenchFail(c, "redis connect %s:%d: %s", c->opt->redis_host, c->opt->redis_port,
				  ctx ? ctx->errstr : "out of memory");
		if (ctx)
			redisFree(ctx);
		BenchReady(c);
		return -1;
	}
	/*
	 * A reply that does not come within a minute fails the client (and so
	 * the row), rather than hanging the whole run on a stuck server.
	 */
	tv.tv_sec = 60;
	if (redisSetTimeout(ctx, tv) != REDIS_OK)
	{
		BenchFail(c, "redis timeout: %s", ctx->errstr);
		redisFree(ctx);
		BenchReady(c);
		return -1;
	}
	if (strcmp(c->opt->workload, "consume") == 0)
		rc = run_consume(c, ctx);
	else
		rc = run_produce(c, ctx);
	redisFree(ctx);
	return rc;
}
