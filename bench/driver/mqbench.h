/*
 * mqbench.h
 *	  The benchmark driver's shared declarations: what one run is asked to
 *	  do, what each client thread reports back, the records a client sends,
 *	  and the entry points of the PostgreSQL and Redis clients.
 *
 * One run is one system, one workload, one value size and a number of
 * client threads, each with a connection of its own.  bench/bench.py sets
 * the structures up (topics, tables, queues, streams) and measures WAL and
 * disk around the run; the driver only does the timed client work and
 * prints one JSON line.
 */
#ifndef MQBENCH_H
#define MQBENCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* What the command line asked for; read-only once the clients start. */
typedef struct BenchOptions
{
	const char *system;			/* mqlog, heap_log, skip_locked, pgq, floor,
								 * wal_floor, redis */
	const char *workload;		/* produce_batch, produce_single, consume,
								 * consume_fetch */
	const char *conninfo;		/* libpq connection string */
	const char *redis_host;
	int			redis_port;
	const char *target;			/* topic, table, queue or stream */
	const char *group;			/* consumer group (mqlog, Redis) */
	int			value_bytes;
	long		records;		/* consume: in all clients; produce: at
								 * least that many */
	int			batch;			/* records per call */
	int			clients;
	double		seconds;		/* produce: and for at least that long */
	int			pipeline;		/* produce calls in flight per client */
	int			partitions;		/* mqlog: client i produces to partition
								 * i % partitions (0: any) */
	int			spread;			/* ... or each call to the next partition:
								 * call k of client i to (i + k * clients)
								 * % partitions */
	const char *values_file;	/* records to send instead of random ones */
	uint64_t	seed;
} BenchOptions;

/* One client thread: its share of the work and what it measured. */
typedef struct BenchClient
{
	const BenchOptions *opt;
	int			id;
	long		calls_todo;		/* produce: this client's calls, at least */
	pthread_barrier_t *start;	/* every client connected and ready */

	long		records;		/* records produced or consumed */
	long		calls;
	long long	bytes;			/* value bytes sent or received */
	double		t_start;		/* when it left the barrier */
	double		t_last;			/* end of its last call that did work */
	double	   *lat;			/* seconds per call */
	long		nlat;
	long		latcap;
	char		error[512];
} BenchClient;

/*
 * The records one client sends: `nbatch` distinct batches of `batch`
 * records, cycled, so that generating them is outside the timed loop.
 */
typedef struct BenchSet
{
	int			nbatch;
	int			batch;
	char	  **value;			/* nbatch * batch of each */
	int		   *value_len;
	char	  **key;
	int		   *key_len;
	char	   *buf;			/* what value and key point into */
} BenchSet;

/* main.c */
extern double BenchNow(void);
extern void BenchFail(BenchClient *c, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern void BenchReady(BenchClient *c);
extern void BenchCall(BenchClient *c, double t0, double t1, long records,
					  long long bytes);
extern long BenchConsumed(long more);
extern int	BenchDistinct(const BenchClient *c);

/* values.c */
extern int	BenchSetMake(const BenchOptions *opt, int client, int nbatch,
						 BenchSet *set, char *err, size_t errlen);
extern void BenchSetFree(BenchSet *set);
extern uint64_t BenchRandom(uint64_t *state);
extern int	BenchKey(char *buf, uint64_t *state);

/* pg.c and redis.c: run one client thread's whole workload */
extern int	PgRun(BenchClient *c);
extern int	RedisRun(BenchClient *c);
extern int	PgKnows(const char *system, const char *workload);
extern int	RedisKnows(const char *workload);

#endif							/* MQBENCH_H */
