/*-------------------------------------------------------------------------
 *
 * cluster_settings.c
 *		The cluster's settings (doc/replication.md): where etcd is
 *		(mqlog.etcd_endpoints, mqlog.etcd_timeout, mqlog.etcd_lease_ttl),
 *		who this node is (mqlog.cluster_name, mqlog.node_name,
 *		mqlog.node_conninfo, mqlog.node_rack) and which database holds the
 *		replicated topics (mqlog.cluster_database), with their checks.
 *
 * Who the node is and where etcd is are fixed at server start: the cluster
 * worker is registered only when endpoints are set, and a node's name is
 * its identity in every replica list, so changing it on a running node
 * would orphan its replicas.  The rack may change at a reload: the cluster
 * worker writes the node's record again (workers/cluster_node.c), and
 * leaders choose replicas for consumers by the new one within a second.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "cluster/etcd.h"
#include "cluster/metadata.h"

/* empty endpoints: a single node */
char	   *mqlog_etcd_endpoints = NULL;
char	   *mqlog_cluster_name = NULL;
char	   *mqlog_node_name = NULL;
char	   *mqlog_node_conninfo = NULL;
char	   *mqlog_cluster_database = NULL;
char	   *mqlog_node_rack = NULL;
int			mqlog_etcd_lease_ttl = 3;
int			mqlog_etcd_timeout = 2000;

/*
 * GUC check hook of mqlog.node_name and mqlog.cluster_name: they become
 * etcd keys and appear in replica lists, so they are kept to a safe
 * alphabet (Kafka's topic name alphabet), at most 63 bytes.
 */
static bool
check_name(char **newval, void **extra, GucSource source)
{
	const char *s = *newval;

	if (s == NULL || s[0] == '\0')
		return true;			/* unset; MqClusterCheckSettings decides */
	if (strlen(s) >= MQ_NODE_NAME_LEN)
	{
		GUC_check_errdetail("A name is at most %d characters.", MQ_NODE_NAME_LEN - 1);
		return false;
	}
	for (const char *p = s; *p; p++)
	{
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
		{
			GUC_check_errdetail("A name is made of ASCII letters, digits, \"_\", \".\" and \"-\".");
			return false;
		}
	}
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
	{
		GUC_check_errdetail("A name is not \".\" or \"..\".");
		return false;
	}
	return true;
}

/*
 * GUC check hook of mqlog.node_rack: Kafka's broker.rack is any string,
 * which Metadata hands to clients and consumers compare with their
 * client.rack; here at most 63 bytes of printable ASCII, so that it fits
 * the node list's shared copy and reads the same in every log and client.
 */
static bool
check_rack(char **newval, void **extra, GucSource source)
{
	const char *s = *newval;

	if (s == NULL)
		return true;
	if (strlen(s) >= MQ_NODE_RACK_LEN)
	{
		GUC_check_errdetail("A rack is at most %d characters.", MQ_NODE_RACK_LEN - 1);
		return false;
	}
	for (const char *p = s; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
		{
			GUC_check_errdetail("A rack is made of printable ASCII characters.");
			return false;
		}
	return true;
}

void
MqClusterDefineSettings(void)
{
	DefineCustomStringVariable("mqlog.etcd_endpoints",
							   "Comma-separated etcd client URLs holding the cluster's metadata; empty runs a single node.",
							   "For example 'http://10.0.0.1:2379,http://10.0.0.2:2379'.  Each request tries them in turn.",
							   &mqlog_etcd_endpoints, "",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.cluster_name",
							   "Name of the mqlog cluster: its keys in etcd are under /mqlog/<cluster_name>/.",
							   NULL,
							   &mqlog_cluster_name, "mqlog",
							   PGC_POSTMASTER, 0, check_name, NULL, NULL);
	DefineCustomStringVariable("mqlog.node_name",
							   "This node's name in the cluster, unique among its nodes.",
							   "Required when mqlog.etcd_endpoints is set: ASCII letters, digits, \"_\", \".\" and \"-\", at most 63 characters.",
							   &mqlog_node_name, "",
							   PGC_POSTMASTER, 0, check_name, NULL, NULL);
	DefineCustomStringVariable("mqlog.node_conninfo",
							   "libpq connection string other nodes reach this node with.",
							   "Required when mqlog.etcd_endpoints is set, for example 'host=10.0.0.5 port=5432'.  It is stored in etcd: keep passwords in a password file.",
							   &mqlog_node_conninfo, "",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.cluster_database",
							   "The database of each node that holds the replicated topics.",
							   NULL,
							   &mqlog_cluster_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("mqlog.node_rack",
							   "This node's rack (Kafka's broker.rack); empty: none.",
							   "Published in etcd with the node's record and in Kafka's Metadata; a leader sends a consumer whose client.rack names the rack of an in-sync follower to that follower (KIP-392).",
							   &mqlog_node_rack, "",
							   PGC_SIGHUP, 0, check_rack, NULL, NULL);
	DefineCustomIntVariable("mqlog.etcd_lease_ttl",
							"Time-to-live of this node's etcd lease: a node that stops is seen as gone this long after.",
							"The lease is renewed every third of it.  Takes effect at the next lease.",
							&mqlog_etcd_lease_ttl,
							3, 2, 3600,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.etcd_timeout",
							"Longest time one etcd request may take, over all endpoints.",
							NULL,
							&mqlog_etcd_timeout,
							2000, 100, 60000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
}

/*
 * At server start, with etcd endpoints set: a node without a name or a
 * conninfo cannot take part, and starting it as a single node would hide
 * the mistake, so the server does not start.
 */
void
MqClusterCheckSettings(void)
{
	if (!MqClusterEnabled())
		return;
	if (mqlog_node_name == NULL || mqlog_node_name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mqlog.node_name must be set when mqlog.etcd_endpoints is set"),
				 errdetail("mqlog.etcd_endpoints is \"%s\".", mqlog_etcd_endpoints),
				 errhint("Give every node of the cluster a name of its own, of ASCII letters, digits, \"_\", \".\" and \"-\", or clear mqlog.etcd_endpoints to run a single node.")));
	if (mqlog_node_conninfo == NULL || mqlog_node_conninfo[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mqlog.node_conninfo must be set when mqlog.etcd_endpoints is set"),
				 errhint("Set it to the libpq connection string other nodes reach this node with, for example 'host=10.0.0.5 port=5432'.")));
	if (strlen(mqlog_node_conninfo) >= MQ_NODE_CONNINFO_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mqlog.node_conninfo is longer than %d bytes", MQ_NODE_CONNINFO_LEN - 1)));
	if (mqlog_cluster_name == NULL || mqlog_cluster_name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("mqlog.cluster_name must not be empty")));
}
