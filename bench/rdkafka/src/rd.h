/*
 * bench/rdkafka/src/rd.h: what librdkafka's example rdkafka_performance.c
 * takes from librdkafka's internal headers (src/rd.h, src/rdtime.h),
 * written here for the benchmark so that the example builds against
 * Debian's installed library (librdkafka-dev ships the example's source,
 * not those headers).  Our own minimal versions, not copies: a
 * microsecond monotonic clock, min/max, snprintf and the C library
 * headers the example expects rd.h to have included.
 *
 * The example includes it as "../src/rd.h" and as "rd.h": the Makefile's
 * -I bench/rdkafka/src makes both names find this file.
 */
#ifndef MQBENCH_RD_SHIM_H
#define MQBENCH_RD_SHIM_H

/* before any C library header: the example wants strndup() */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <getopt.h>
#include <sys/time.h>

/* microseconds, as librdkafka's rd_ts_t */
typedef int64_t rd_ts_t;

/* the monotonic clock in microseconds: the example times its runs with it */
static inline rd_ts_t
rd_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (rd_ts_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#define RD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RD_MAX(a, b) ((a) > (b) ? (a) : (b))

/* on POSIX, librdkafka's rd_snprintf is snprintf */
#define rd_snprintf(...) snprintf(__VA_ARGS__)

#endif							/* MQBENCH_RD_SHIM_H */
