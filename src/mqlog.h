/*-------------------------------------------------------------------------
 *
 * mqlog.h
 *		Whether mqlog was loaded at server start (mqlog.c).  Every module
 *		may include it; it includes nothing of mqlog.
 *
 * The settings are not here: each module defines its own and declares
 * them in its header (log/partition_shmem.h, log/am.h, log/replica.h,
 * cluster/metadata.h, cluster/etcd.h, acl/acl.h, groups/groups.h,
 * workers/workers.h, kafka/kafka_internal.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_H
#define MQLOG_H

#include "postgres.h"

extern bool mqlog_preloaded;

#endif							/* MQLOG_H */
