/*-------------------------------------------------------------------------
 *
 * failover.c
 *		The elector: one node of the cluster at a time elects new leaders
 *		for the partitions whose leader's node is gone.
 *
 * Chosen as Patroni chooses its leader, with no election of our own:
 * every node's cluster worker (workers/cluster_node.c) tries, every second, an
 * etcd transaction that creates the key elector only if it is absent,
 * under the node's own registration lease.  The node that holds it is the
 * elector until its lease ends (it stops, dies, or loses etcd); then
 * the key goes with the lease and the next node to try takes it.
 *
 * The elector's round, every second: a partition whose leader holds no
 * live key under nodes/ (its lease lapsed: the node has not renewed it for
 * mqlog.etcd_lease_ttl) gets a new leader, Kafka's way:
 *	- the first in-sync replica, in replica order, that is alive;
 *	- none alive: the partition stays without a working leader (produce is
 *	  refused, with the old leader named), unless the topic sets
 *	  unclean.leader.election.enable, when the first live replica outside
 *	  the ISR leads, with a WARNING that records may be lost;
 *	- the leader epoch goes up by one and the dead leader leaves the ISR
 *	  (an unclean election leaves only the new leader in it), written with
 *	  compare-and-swap on the partition key's mod_revision, so a concurrent
 *	  ISR change or leader move wins or loses whole.
 * Every node's sync worker takes the new leader from etcd within a second
 * (workers/cluster_sync.c): the new leader takes produce, followers follow it,
 * and the old leader, if it comes back, is a follower that truncates what
 * it holds beyond the new leader's log (workers/apply.c).
 *
 * The old leader stops acting as one no later than etcd lets its lease go
 * (cluster/lease.c), so two leaders never both take acks=all produce.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/etcd.h"
#include "cluster/json.h"
#include "cluster/metadata.h"

/* elections a round makes stop after this long (the rest: next round) */
#define MQ_ELECTOR_ROUND_MS		300

/* a partition left without a leader is logged again at most this often */
#define MQ_NO_LEADER_LOG_MS		60000

static int64 held_lease = 0;	/* this node is the elector under it; 0: not */
static TimestampTz last_no_leader_log = 0;

/* is name alive in the node list (MqClusterNode *)? */
static bool
node_alive(List *nodes, const char *name)
{
	ListCell   *lc;

	foreach(lc, nodes)
	{
		MqClusterNode *n = lfirst(lc);

		if (strcmp(n->name, name) == 0)
			return n->alive;
	}
	return false;
}

/*
 * The first replica, in replica order, other than the gone leader, that is
 * alive (and, with in_sync, in the ISR): the one to elect; NULL if none.
 */
static char *
first_live_replica(MqPartitionMeta *p, List *nodes, bool in_sync)
{
	ListCell   *lc;

	foreach(lc, p->replicas)
	{
		char	   *r = lfirst(lc);

		if (strcmp(r, p->leader) != 0 && node_alive(nodes, r) &&
			(!in_sync || MqClusterNameListed(p->isr, r)))
			return r;
	}
	return NULL;
}

/* take the elector's key, or see who holds it */
static bool
claim(int64 lease)
{
	char	   *key = MqClusterKey("elector");
	MqEtcdTxn  *txn;
	MqEtcdKv	kv;
	bool		mine;

	if (held_lease == lease)
	{
		/* ours while the lease lives; a look confirms nobody deleted it */
		if (MqEtcdGet(key, &kv, NULL) && kv.lease == lease)
			return true;
	}
	txn = MqEtcdTxnBegin();
	MqEtcdTxnIfAbsent(txn, key);
	MqEtcdTxnPut(txn, key, MqClusterNodeClaim(), lease);
	mine = MqEtcdTxnCommit(txn, NULL);
	if (mine && held_lease != lease)
		ereport(LOG,
				(errmsg("mqlog cluster: node \"%s\" is the elector of cluster \"%s\"",
						mqlog_node_name, mqlog_cluster_name),
				 errdetail("etcd key %s, under this node's lease " INT64_FORMAT ".", key, lease)));
	else if (!mine && held_lease != 0)
		ereport(LOG,
				(errmsg("mqlog cluster: node \"%s\" is no longer the elector of cluster \"%s\"",
						mqlog_node_name, mqlog_cluster_name)));
	held_lease = mine ? lease : 0;
	return mine;
}

/* the topic's config says unclean.leader.election.enable = true? */
static bool
unclean_allowed(List *topics, const char *topic)
{
	ListCell   *lc;

	foreach(lc, topics)
	{
		MqTopicMeta *t = lfirst(lc);

		if (strcmp(t->name, topic) == 0)
			return MqJsonBool(MqJsonParse(t->config), "unclean.leader.election.enable");
	}
	return false;
}

/*
 * Elect a new leader for one partition whose leader is gone; false when
 * none can be (logged, at most once a minute for all partitions).
 */
static bool
elect(const char *topic, MqPartitionMeta *p, List *nodes, bool unclean, const char *key)
{
	char	   *old = p->leader;
	char	   *chosen = first_live_replica(p, nodes, true);
	bool		clean = true;
	List	   *isr = NIL;
	ListCell   *lc;
	MqEtcdTxn  *txn;
	int64		rev;

	if (chosen == NULL && unclean)
	{
		chosen = first_live_replica(p, nodes, false);
		clean = false;
	}
	if (chosen == NULL)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (TimestampDifferenceExceeds(last_no_leader_log, now, MQ_NO_LEADER_LOG_MS))
		{
			ereport(LOG,
					(errmsg("mqlog cluster: partition %d of topic \"%s\" has no leader: node \"%s\" is gone and no other in-sync replica is alive",
							p->partition, topic, old),
					 errdetail("The in-sync replicas are %s.", MqClusterNamesText(p->isr)),
					 errhint("Bring an in-sync replica back, or set the topic's unclean.leader.election.enable to true to accept losing records.")));
			last_no_leader_log = now;
		}
		return false;
	}

	if (clean)
	{
		foreach(lc, p->isr)
			if (strcmp(lfirst(lc), old) != 0)
				isr = lappend(isr, lfirst(lc));
	}
	else
		isr = list_make1(chosen);
	p->leader = chosen;
	p->leader_epoch++;
	p->isr = isr;

	/*
	 * Compare-and-swap on the partition key, and only while the old
	 * leader's node key is still absent: once that node has registered
	 * again (lease.c), it leads again as soon as it has read the metadata,
	 * so an election must not land after that read.  And only while the
	 * chosen node's key is still there: the node list was read before this
	 * node took the elector key, which it can do only once the last
	 * elector's lease ended, so a node that died with that elector can
	 * still be alive in the list.
	 */
	txn = MqEtcdTxnBegin();
	MqEtcdTxnIfModRevision(txn, key, p->mod_revision);
	MqEtcdTxnIfAbsent(txn, MqClusterKey("nodes/%s", old));
	MqEtcdTxnIfPresent(txn, MqClusterKey("nodes/%s", chosen));
	MqEtcdTxnPut(txn, key, MqPartitionMetaJson(p), 0);
	if (!MqEtcdTxnCommit(txn, &rev))
		return false;			/* changed meanwhile, the old leader is back or the chosen one gone: the next round looks again */
	if (clean)
		ereport(LOG,
				(errmsg("mqlog cluster: partition %d of topic \"%s\": node \"%s\" is gone; node \"%s\" leads from epoch %d",
						p->partition, topic, old, chosen, p->leader_epoch),
				 errdetail("The in-sync replicas are now %s.", MqClusterNamesText(isr))));
	else
		ereport(WARNING,
				(errmsg("mqlog cluster: partition %d of topic \"%s\": unclean leader election: node \"%s\", not in sync, leads from epoch %d",
						p->partition, topic, chosen, p->leader_epoch),
				 errdetail("Node \"%s\" is gone and no in-sync replica is alive; records the new leader lacks are lost.", old)));
	return true;
}

/*
 * The cluster worker's call, every second, with the node list it just
 * read: claim the elector's key under lease (0: this node has none),
 * and if this node holds it, elect leaders where they are gone.
 */
void
MqClusterElectorRound(int64 lease, List *nodes)
{
	char	   *tprefix = MqClusterKey("topics/");
	char	   *pprefix = MqClusterKey("partitions/");
	List	   *topics = NIL;
	ListCell   *lc;
	TimestampTz started = GetCurrentTimestamp();

	if (lease == 0)
	{
		held_lease = 0;
		return;
	}
	if (!claim(lease))
		return;

	foreach(lc, MqEtcdRange(tprefix, NULL))
	{
		MqEtcdKv   *kv = lfirst(lc);

		topics = lappend(topics, MqTopicMetaParse(kv->value, kv->mod_revision));
	}
	foreach(lc, MqEtcdRange(pprefix, NULL))
	{
		MqEtcdKv   *kv = lfirst(lc);
		char	   *topic = pstrdup(kv->key + strlen(pprefix));
		char	   *slash = strrchr(topic, '/');
		MqPartitionMeta *p;

		/*
		 * The round runs in the worker that keeps this node's lease alive:
		 * a failover of many partitions goes on next round rather than let
		 * the keepalive wait (an etcd txn per partition).
		 */
		if (TimestampDifferenceExceeds(started, GetCurrentTimestamp(), MQ_ELECTOR_ROUND_MS))
			break;
		if (slash == NULL)
			continue;
		*slash = '\0';
		p = MqPartitionMetaParse(kv->value, atoi(slash + 1), kv->mod_revision);
		if (node_alive(nodes, p->leader))
			continue;
		(void) elect(topic, p, nodes, unclean_allowed(topics, topic), kv->key);
	}
}
