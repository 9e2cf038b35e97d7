/*
 * main.c
 *	  mqbench, the benchmark's client: reads what to run from the command
 *	  line, starts one thread per client, each with its own connection,
 *	  releases them together, and prints one JSON line with the rate.
 *
 * The clock starts when every client has connected, prepared its
 * statements and built its records (a barrier), and stops at the end of
 * the last call that did work, so neither connecting nor an idle
 * consumer's last empty wait is counted.  bench/bench.py runs it, once per
 * system, workload, value size and client count; see doc/benchmarks.md.
 */
#include "mqbench.h"

#include <getopt.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long consumed;			/* records consumed by all clients */

static const char usage[] =
"usage: mqbench --system S --workload W --target NAME [options]\n"
"\n"
"  --system       mqlog, heap_log, skip_locked, pgq, floor (produce and consume), wal_floor (batched) or redis\n"
"  --workload     produce_batch, produce_single, consume or consume_fetch (mqlog)\n"
"  --target       the topic, table, queue or stream\n"
"  --conninfo     libpq connection string (PostgreSQL systems)\n"
"  --redis-host, --redis-port   where Redis listens (default 127.0.0.1:6379)\n"
"  --group        consumer group (mqlog; Redis, default g)\n"
"  --value-bytes  value size (default 100)\n"
"  --records      records to produce (at least) or consume, over all clients\n"
"  --batch        records per call (default 1000; consume 500)\n"
"  --clients      client threads, one connection each (default 1)\n"
"  --seconds      produce: go on calling until then too (default: produce_single 2, else 0)\n"
"  --pipeline     produce calls in flight per client (default 1)\n"
"  --partitions   mqlog produce: client i writes partition i %% N\n"
"  --spread       with --partitions: each call to the next partition instead,\n"
"                 client i's call k to (i + k * clients) %% N (the scale run)\n"
"  --values-file  send these records instead of random ones\n"
"  --seed         seed of the random records (default 1)\n"
"\n"
"Prints one JSON object: records_per_s, mb_per_s, call_p50_ms, call_p99_ms, ...\n";

double
BenchNow(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Keep the first error of a client; the run reports it and fails. */
void
BenchFail(BenchClient *c, const char *fmt,...)
{
	va_list		ap;
	size_t		n;

	if (c->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	n = strlen(c->error);
	while (n > 0 && (c->error[n - 1] == '\n' || c->error[n - 1] == ' '))
		c->error[--n] = '\0';
}

/*
 * The client is set up: wait for the others, then start its clock.  A
 * client that failed in its set-up still comes here, so that the others
 * are not left waiting.
 */
void
BenchReady(BenchClient *c)
{
	pthread_barrier_wait(c->start);
	c->t_start = BenchNow();
	c->t_last = c->t_start;
}

/* One call that took t0..t1 and moved `records` records. */
void
BenchCall(BenchClient *c, double t0, double t1, long records, long long bytes)
{
	if (c->nlat == c->latcap)
	{
		long		cap = c->latcap ? c->latcap * 2 : 4096;
		double	   *lat = realloc(c->lat, cap * sizeof(double));

		if (lat == NULL)
			return;
		c->lat = lat;
		c->latcap = cap;
	}
	c->lat[c->nlat++] = t1 - t0;
	c->calls++;
	if (records > 0)
	{
		c->records += records;
		c->bytes += bytes;
		c->t_last = t1;
	}
}

/* Add to the records consumed by every client; returns the new total. */
long
BenchConsumed(long more)
{
	return __atomic_add_fetch(&consumed, more, __ATOMIC_SEQ_CST);
}

/*
 * How many distinct batches a producer cycles through: eight (as
 * bench.py's Python client), fewer when it makes fewer calls, and a
 * thousand single records for single-record produce.
 */
int
BenchDistinct(const BenchClient *c)
{
	if (strcmp(c->opt->workload, "produce_single") == 0)
		return 1000;
	if (c->opt->seconds > 0 || c->calls_todo >= 8)
		return 8;
	return c->calls_todo > 0 ? (int) c->calls_todo : 1;
}

static void *
client_main(void *arg)
{
	BenchClient *c = arg;

	if (strcmp(c->opt->system, "redis") == 0)
		RedisRun(c);
	else
		PgRun(c);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile of sorted xs, interpolated as bench.py's pct(). */
static double
percentile(const double *xs, long n, double p)
{
	double		k;
	long		lo;
	long		hi;

	if (n == 0)
		return 0;
	k = (n - 1) * p / 100.0;
	lo = (long) k;
	hi = lo + 1 < n ? lo + 1 : n - 1;
	return xs[lo] + (xs[hi] - xs[lo]) * (k - lo);
}

static void
json_string(const char *s)
{
	putchar('"');
	for (; *s; s++)
	{
		unsigned char ch = (unsigned char) *s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void
print_error(const char *msg)
{
	printf("{\"driver\": \"mqbench\", \"error\": ");
	json_string(msg);
	printf("}\n");
}

/* Everything the clients measured, as one JSON object. */
static void
print_result(const BenchOptions *o, BenchClient *cl)
{
	long		records = 0;
	long		calls = 0;
	long		nlat = 0;
	long long	bytes = 0;
	double		t0 = cl[0].t_start;
	double		t1 = cl[0].t_last;
	double	   *lat;
	double		secs;
	int			i;

	for (i = 0; i < o->clients; i++)
	{
		records += cl[i].records;
		calls += cl[i].calls;
		bytes += cl[i].bytes;
		nlat += cl[i].nlat;
		if (cl[i].t_start < t0)
			t0 = cl[i].t_start;
		if (cl[i].t_last > t1)
			t1 = cl[i].t_last;
	}
	lat = malloc((nlat > 0 ? nlat : 1) * sizeof(double));
	nlat = 0;
	for (i = 0; i < o->clients; i++)
	{
		if (cl[i].nlat > 0)
			memcpy(lat + nlat, cl[i].lat, cl[i].nlat * sizeof(double));
		nlat += cl[i].nlat;
	}
	qsort(lat, nlat, sizeof(double), cmp_double);
	secs = t1 - t0;
	printf("{\"driver\": \"mqbench\", \"libpq_version\": %d, \"system\": ", PQlibVersion());
	json_string(o->system);
	printf(", \"workload\": ");
	json_string(o->workload);
	printf(", \"value_bytes\": %d, \"clients\": %d, \"batch\": %d, \"pipeline\": %d, \"partitions\": %d, \"spread\": %s",
		   o->value_bytes, o->clients, o->batch, o->pipeline, o->partitions > 0 ? o->partitions : 1,
		   o->spread ? "true" : "false");
	printf(", \"records\": %ld, \"calls\": %ld, \"seconds\": %.6f", records, calls, secs);
	printf(", \"records_per_s\": %.1f, \"mb_per_s\": %.3f, \"value_bytes_avg\": %.1f",
		   secs > 0 ? records / secs : 0.0, secs > 0 ? bytes / secs / 1e6 : 0.0,
		   records > 0 ? (double) bytes / records : 0.0);
	printf(", \"call_p50_ms\": %.4f, \"call_p99_ms\": %.4f, \"call_avg_ms\": %.4f",
		   percentile(lat, nlat, 50) * 1000, percentile(lat, nlat, 99) * 1000,
		   secs > 0 && calls > 0 ? secs * o->clients / calls * 1000 : 0.0);
	printf(", \"per_client_records\": [");
	for (i = 0; i < o->clients; i++)
		printf("%s%ld", i ? ", " : "", cl[i].records);
	printf("]}\n");
	free(lat);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"system", required_argument, NULL, 's'},
		{"workload", required_argument, NULL, 'w'},
		{"conninfo", required_argument, NULL, 'd'},
		{"redis-host", required_argument, NULL, 'H'},
		{"redis-port", required_argument, NULL, 'P'},
		{"target", required_argument, NULL, 't'},
		{"group", required_argument, NULL, 'g'},
		{"value-bytes", required_argument, NULL, 'v'},
		{"records", required_argument, NULL, 'n'},
		{"batch", required_argument, NULL, 'b'},
		{"clients", required_argument, NULL, 'c'},
		{"seconds", required_argument, NULL, 'T'},
		{"pipeline", required_argument, NULL, 'p'},
		{"partitions", required_argument, NULL, 'N'},
		{"spread", no_argument, NULL, 'R'},
		{"values-file", required_argument, NULL, 'f'},
		{"seed", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	BenchOptions o = {
		.conninfo = "", .redis_host = "127.0.0.1", .redis_port = 6379,
		.value_bytes = 100, .batch = 0, .clients = 1, .seconds = -1,
		.pipeline = 1, .seed = 1
	};
	BenchClient *cl;
	pthread_t  *th;
	pthread_barrier_t start;
	char		msg[600];
	long		calls;
	int			opt;
	int			i;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1)
	{
		switch (opt)
		{
			case 's': o.system = optarg; break;
			case 'w': o.workload = optarg; break;
			case 'd': o.conninfo = optarg; break;
			case 'H': o.redis_host = optarg; break;
			case 'P': o.redis_port = atoi(optarg); break;
			case 't': o.target = optarg; break;
			case 'g': o.group = optarg; break;
			case 'v': o.value_bytes = atoi(optarg); break;
			case 'n': o.records = atol(optarg); break;
			case 'b': o.batch = atoi(optarg); break;
			case 'c': o.clients = atoi(optarg); break;
			case 'T': o.seconds = atof(optarg); break;
			case 'p': o.pipeline = atoi(optarg); break;
			case 'N': o.partitions = atoi(optarg); break;
			case 'R': o.spread = 1; break;
			case 'f': o.values_file = optarg; break;
			case 'S': o.seed = strtoull(optarg, NULL, 10); break;
			case 'h': fputs(usage, stdout); return 0;
			default: fputs(usage, stderr); return 2;
		}
	}
	if (!o.system || !o.workload || !o.target)
	{
		fputs(usage, stderr);
		return 2;
	}
	if (o.batch <= 0)
		o.batch = strcmp(o.workload, "produce_single") == 0 ? 1 :
			strncmp(o.workload, "consume", 7) == 0 ? 500 : 1000;
	if (o.seconds < 0)
		o.seconds = strcmp(o.workload, "produce_single") == 0 ? 2 : 0;
	if (!o.group)
		o.group = strcmp(o.system, "redis") == 0 ? "g" : o.target;
	if (o.clients < 1 || o.clients > 256 || o.pipeline < 1 || o.value_bytes < 1 ||
		o.batch < 1 || o.partitions < 0 ||
		(o.seconds <= 0 && o.records < o.batch))
	{
		print_error("bad arguments: clients 1..256, pipeline >= 1, value-bytes >= 1, "
					"records >= batch or seconds > 0");
		return 2;
	}
	if (strcmp(o.system, "redis") == 0 ? !RedisKnows(o.workload) : !PgKnows(o.system, o.workload))
	{
		snprintf(msg, sizeof(msg), "no workload %s for system %s", o.workload, o.system);
		print_error(msg);
		return 2;
	}

	cl = calloc(o.clients, sizeof(BenchClient));
	th = calloc(o.clients, sizeof(pthread_t));
	pthread_barrier_init(&start, NULL, o.clients);
	calls = o.records / o.batch;
	for (i = 0; i < o.clients; i++)
	{
		cl[i].opt = &o;
		cl[i].id = i;
		cl[i].start = &start;
		cl[i].calls_todo = calls / o.clients + (i < calls % o.clients);
	}
	for (i = 0; i < o.clients; i++)
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	for (i = 0; i < o.clients; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < o.clients; i++)
	{
		if (cl[i].error[0])
		{
			snprintf(msg, sizeof(msg), "client %d: %s", i, cl[i].error);
			print_error(msg);
			return 1;
		}
	}
	if (strncmp(o.workload, "consume", 7) == 0 && BenchConsumed(0) < o.records)
	{
		snprintf(msg, sizeof(msg), "consumed %ld of %ld records", BenchConsumed(0), o.records);
		print_error(msg);
		return 1;
	}
	print_result(&o, cl);
	return 0;
}
