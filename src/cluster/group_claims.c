/*-------------------------------------------------------------------------
 *
 * group_claims.c
 *		Which node coordinates a consumer group of replicated topics: the
 *		first to claim it in etcd, for as long as its lease lives.
 *
 * A group's members and rebalances live in one node's shared memory
 * (groups/registry.c), so a group must have one node: two nodes running
 * members of one group would each assign every partition, and both would
 * read and commit them.  Kafka makes one broker a group's coordinator (the
 * leader of the group's __consumer_offsets partition); mqlog makes it the
 * node that claimed the group first: the key groups/<group> holds
 * {"node": ...} under that node's registration lease, written by a
 * create-if-absent transaction when a member first joins there.  A member
 * joining on another node is refused, naming the coordinator.
 *
 * The claim ends with the node's lease (the node stopped, died or lost
 * etcd), or when the group has had no members on it for a while: the
 * cluster worker releases such claims (MqClusterReleaseGroups), so a group
 * may move to another node once its members there have left.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "mqlog.h"
#include "cluster/etcd.h"
#include "cluster/json.h"
#include "cluster/metadata.h"

static char *
group_key(const char *group)
{
	return MqClusterKey("groups/%s", group);
}

/*
 * Claim group for this node under lease (its current lease, not 0).
 * Returns NULL when this node holds the claim, else the node that does.
 */
char *
MqClusterClaimGroup(const char *group, int64 lease)
{
	char	   *key = group_key(group);
	MqEtcdKv	kv;

	for (int attempt = 0; attempt < 3; attempt++)
	{
		MqEtcdTxn  *txn;

		if (MqEtcdGet(key, &kv, NULL))
		{
			char	   *node = MqJsonTryString(kv.value, "node");

			if (node != NULL && strcmp(node, mqlog_node_name) == 0 && kv.lease == lease)
				return NULL;
			if (node != NULL && strcmp(node, mqlog_node_name) != 0)
				return node;
			/* ours under an earlier lease: that lease is ending; take it anew */
			if (MqEtcdPutIfModRevision(key, kv.value, kv.mod_revision, lease, NULL))
				return NULL;
			continue;
		}
		txn = MqEtcdTxnBegin();
		MqEtcdTxnIfAbsent(txn, key);
		MqEtcdTxnPut(txn, key, MqClusterNodeClaim(), lease);
		if (MqEtcdTxnCommit(txn, NULL))
			return NULL;
	}
	return pstrdup("(changing)");
}

/* claims seen idle in the previous round (keys, in TopMemoryContext) */
static List *idle_before = NIL;

/*
 * The cluster worker, every second: give up this node's claims (under
 * lease) on groups that have no members here (active_groups: the names
 * of those that have, char *), so that they may move.  Only a claim idle
 * in two rounds in a row goes: a member that has just claimed its group
 * is in the registry a moment later, well within a round.
 */
void
MqClusterReleaseGroups(int64 lease, List *active_groups)
{
	char	   *prefix = MqClusterKey("groups/");
	List	   *idle_now = NIL;
	ListCell   *lc;
	MemoryContext old;

	if (lease == 0)
		return;
	foreach(lc, MqEtcdRange(prefix, NULL))
	{
		MqEtcdKv   *kv = lfirst(lc);
		const char *group = kv->key + strlen(prefix);
		char	   *node = MqJsonTryString(kv->value, "node");
		MqEtcdTxn  *txn;

		if (kv->lease != lease || node == NULL || strcmp(node, mqlog_node_name) != 0 ||
			MqClusterNameListed(active_groups, group))
			continue;
		if (!MqClusterNameListed(idle_before, kv->key))
		{
			idle_now = lappend(idle_now, kv->key);
			continue;
		}
		txn = MqEtcdTxnBegin();
		MqEtcdTxnIfModRevision(txn, kv->key, kv->mod_revision);
		MqEtcdTxnDelete(txn, kv->key, false);
		(void) MqEtcdTxnCommit(txn, NULL);
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	list_free_deep(idle_before);
	idle_before = NIL;
	foreach(lc, idle_now)
		idle_before = lappend(idle_before, pstrdup(lfirst(lc)));
	MemoryContextSwitchTo(old);
}
