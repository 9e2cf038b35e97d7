/*-------------------------------------------------------------------------
 *
 * mqlog.h
 *		The server-wide settings and the load state of mqlog (mqlog.c).
 *		Every module may include it; it includes nothing of mqlog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_H
#define MQLOG_H

#include "postgres.h"

extern int	mqlog_max_partitions;
extern int	mqlog_max_inflight;
extern bool mqlog_preloaded;
extern bool mqlog_roll_ahead;

#endif							/* MQLOG_H */
