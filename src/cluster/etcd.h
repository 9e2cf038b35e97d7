/*-------------------------------------------------------------------------
 *
 * etcd.h
 *		A small etcd v3 client over etcd's JSON gateway (etcd.c): leases,
 *		reads, writes and compare-and-swap transactions.
 *
 * Every call goes to the endpoints of mqlog.etcd_endpoints in turn, is
 * bounded by mqlog.etcd_timeout and raises an ERROR (connection_failure,
 * or the error etcd returned) when none answers.  Keys and values are C
 * strings; revisions and lease ids are etcd's int64.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_ETCD_H
#define MQLOG_ETCD_H

#include "nodes/pg_list.h"

/* where etcd is, and how long a request and this node's lease last (cluster_settings.c) */
extern char *mqlog_etcd_endpoints;
extern int	mqlog_etcd_timeout;
extern int	mqlog_etcd_lease_ttl;

/* one key as etcd returned it */
typedef struct MqEtcdKv
{
	char	   *key;
	char	   *value;			/* NUL-terminated; "" for an empty value */
	int64		create_revision;
	int64		mod_revision;
	int64		lease;			/* 0: not under a lease */
} MqEtcdKv;

/* leases: the heartbeat of a node */
extern int64 MqEtcdLeaseGrant(int ttl_seconds);
extern bool MqEtcdLeaseKeepAlive(int64 lease_id);
extern void MqEtcdLeaseRevoke(int64 lease_id);

/* reads: revision (when not NULL) is the store's revision at the read */
extern bool MqEtcdGet(const char *key, MqEtcdKv *kv, int64 *revision);
extern List *MqEtcdRange(const char *prefix, int64 *revision);

/* writes: each returns the revision it made (or the store's, when it lost) */
extern int64 MqEtcdPut(const char *key, const char *value, int64 lease);
extern bool MqEtcdPutIfAbsent(const char *key, const char *value, int64 lease,
							  int64 *revision);
extern bool MqEtcdPutIfModRevision(const char *key, const char *value,
								   int64 mod_revision, int64 lease,
								   int64 *revision);
extern int64 MqEtcdDelete(const char *key, bool prefix);

/*
 * A transaction of several compares and operations: the operations are
 * applied, all at one revision, only if every compare holds.  Build it
 * with the calls below (in the caller's memory context), then commit.
 */
typedef struct MqEtcdTxn MqEtcdTxn;

extern MqEtcdTxn *MqEtcdTxnBegin(void);
extern void MqEtcdTxnIfAbsent(MqEtcdTxn *txn, const char *key);
extern void MqEtcdTxnIfPresent(MqEtcdTxn *txn, const char *key);
extern void MqEtcdTxnIfModRevision(MqEtcdTxn *txn, const char *key, int64 mod_revision);
extern void MqEtcdTxnPut(MqEtcdTxn *txn, const char *key, const char *value, int64 lease);
extern void MqEtcdTxnDelete(MqEtcdTxn *txn, const char *key, bool prefix);
extern int	MqEtcdTxnOps(MqEtcdTxn *txn);
extern bool MqEtcdTxnCommit(MqEtcdTxn *txn, int64 *revision);

/* etcd's default --max-txn-ops: at most this many operations per txn */
#define MQ_ETCD_MAX_TXN_OPS 128

/* the end of the key range of every key that begins with prefix */
extern char *MqEtcdPrefixEnd(const char *prefix);

#endif							/* MQLOG_ETCD_H */
