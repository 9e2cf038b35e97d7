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
	int64		revision;

	for (int attempt = 0; attempt < 3; attempt++)
	{
		MqEtcdTxn  *txn;

		if (MqEtcdGet(key, &kv, NULL))
		{
			char	   *node = MqJsonTryString(kv.value, "node");

			if (node != NULL && strcmp(node, mqlog_node_name) != 0)
				return node;

			/*
			 * Ours (under this lease, or an earlier one that is ending):
			 * written again, so that a release that saw the group idle a
			 * moment ago (compared with the revision it read) fails.
			 */
			if (MqEtcdPutIfModRevision(key, kv.value, kv.mod_revision, lease, &revision))
			{
				MqClusterNoteRevision(revision);
				return NULL;
			}
			continue;
		}
		txn = MqEtcdTxnBegin();
		MqEtcdTxnIfAbsent(txn, key);
		MqEtcdTxnPut(txn, key, MqClusterNodeClaim(), lease);
		if (MqEtcdTxnCommit(txn, &revision))
		{
			/* the claim's revision stamps the group's commits (lease.c) */
			MqClusterNoteRevision(revision);
			return NULL;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not claim consumer group \"%s\" in etcd", group),
			 errdetail("Its key changed under every attempt."),
			 errhint("Poll again.")));
	return NULL;				/* keep the compiler quiet */
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
MqClusterReleaseGroups(int64 lease, List *(*groups_with_members) (void))
{
	char	   *prefix = MqClusterKey("groups/");
	List	   *idle_now = NIL;
	List	   *claims;
	List	   *active_groups;
	ListCell   *lc;
	MemoryContext old;

	if (lease == 0)
		return;
	/* the claims first: a group joined since is active in the list after */
	claims = MqEtcdRange(prefix, NULL);
	active_groups = groups_with_members();
	foreach(lc, active_groups)
	{
		/* a group with members here whose claim is gone: claim it again */
		ListCell   *c;
		bool		held = false;

		foreach(c, claims)
			held |= strcmp(((MqEtcdKv *) lfirst(c))->key + strlen(prefix), lfirst(lc)) == 0;
		if (!held)
		{
			char	   *holder = MqClusterClaimGroup(lfirst(lc), lease);

			if (holder != NULL)
				ereport(WARNING,
						(errmsg("mqlog cluster: consumer group \"%s\" has members on this node, but node \"%s\" claims it",
								(char *) lfirst(lc), holder),
						 errhint("Its members here should leave; the group runs on node \"%s\".", holder)));
		}
	}
	foreach(lc, claims)
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
