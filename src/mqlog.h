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
extern int	mqlog_segment_extend_ahead;

/* the cluster settings (doc/replication.md); empty endpoints: single node */
extern char *mqlog_etcd_endpoints;
extern char *mqlog_cluster_name;
extern char *mqlog_node_name;
extern char *mqlog_node_conninfo;
extern char *mqlog_cluster_database;
extern int	mqlog_etcd_lease_ttl;
extern int	mqlog_etcd_timeout;

#endif							/* MQLOG_H */
