/*-------------------------------------------------------------------------
 *
 * lease.c
 *		Whether this node may act as a leader: its own lease in etcd, as far
 *		as it knows, and what the other nodes last said of etcd.
 *
 * A node leads its partitions only while it holds its registration lease
 * (workers/cluster_node.c keeps it alive).  The lease is counted from the
 * moment the request that granted or renewed it was sent, so this node
 * believes it lapsed no later than etcd does: by the time the elector
 * sees the lease gone and elects another leader (cluster/failover.c), this
 * one has stopped taking produce and acknowledging acks=all commits.
 *
 * One exception, as Patroni's failsafe mode makes one: when etcd is gone
 * for everyone, nobody can elect another leader, so the current leaders
 * may go on.  A leader tells the two cases apart by its followers, whose
 * progress reports say whether their own last etcd request failed to reach
 * etcd (sql/replica_leader.c; a slow round that still reaches etcd is not an
 * outage, nor is a cluster worker that has not tried yet), and how long ago
 * their last request that worked was answered: since its own lease lapsed,
 * every other in-sync replica of the partition must have said it cannot
 * reach etcd either (Patroni asks every member), none must have reached
 * etcd after the lapse, and this node must not have reached etcd itself.
 * "When" is the age a follower reports, taken from when its report arrived:
 * later than the truth by the report's transit, never earlier, so the
 * estimate errs on the side of stopping.  It must be an age, not "reaches:
 * yes": a follower whose request to a member that stopped answering is
 * still waiting says yes until it times out, and a yes that arrived after
 * the lapse kept the failsafe off until etcd came back, though the answer
 * it stood for came before the lapse.  With no word from
 * them, or an ISR of this node alone, or a topic that allows unclean
 * elections, it stops.
 *
 * Every time here is CLOCK_MONOTONIC's (MqClusterClock), the same for all
 * processes of the host and never stepped: an NTP correction of the wall
 * clock must not lengthen the time a node believes it holds its lease.
 *
 * A node leads nothing from the moment it registers (at start, and again
 * after its lease lapsed) until its cluster sync worker has read the
 * cluster's metadata from etcd in a round that began after that
 * registration: its local copy of who leads what may be older than a
 * failover made while it had no lease.  (The elector elects a new
 * leader only while the old leader's node key is absent, cluster/failover.c,
 * so no election can land after the node registered again: a read that
 * begins after the registration sees every election made meanwhile.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"

typedef struct MqLeaseShared
{
	slock_t		mutex;
	int64		lease_id;		/* this node's lease in etcd; 0: none */
	int64		valid_until;	/* 0: no lease (never registered, or lost) */
	int64		lapsed_at;		/* when this node last saw its lease lapse */
	int64		registered_at;	/* its last registration, with a new lease (0: none) */
	int			registrations;	/* since the server started */
	int64		synced_from;	/* the local copy read etcd from this time on */
	int64		etcd_ok_at;		/* this node's last etcd request that worked */
	int64		etcd_failed_at; /* ... and its last one that could not reach etcd */
	int64		revision_seen;	/* the newest etcd revision this node saw under a
								 * live lease (MqClusterNoteRevision) */
	int64		catchups;		/* MqClusterSyncCatchups */
	int			npeers;
	struct
	{
		char		node[MQ_NODE_NAME_LEN];
		int64		ok_at;		/* when it last reached etcd, as its reports say */
		int64		down_at;	/* its last report that it does not */
	}			peers[MQ_CLUSTER_MAX_NODES];
} MqLeaseShared;

static MqLeaseShared *lease_shared = NULL;

/* CLOCK_MONOTONIC in microseconds: the clock of every time in this file */
int64
MqClusterClock(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		elog(ERROR, "clock_gettime(CLOCK_MONOTONIC) failed: %m");
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

Size
MqClusterLeaseShmemSize(void)
{
	return MAXALIGN(sizeof(MqLeaseShared));
}

void
MqClusterLeaseShmemInit(void)
{
	bool		found;

	lease_shared = ShmemInitStruct("mqlog lease", sizeof(MqLeaseShared), &found);
	if (!found)
	{
		memset(lease_shared, 0, sizeof(MqLeaseShared));
		SpinLockInit(&lease_shared->mutex);
	}
}

/*
 * The cluster worker: the lease it holds (lease_id) is good until
 * valid_until (MqClusterClock when its grant or keepalive was sent, plus
 * the TTL), or
 * 0: it has none.  registered: it has just registered with a new lease
 * (not renewed one), so this node leads nothing until its local copy is
 * read again.
 */
void
MqClusterSetLease(int64 lease_id, int64 valid_until, bool registered)
{
	int64		now = MqClusterClock();

	SpinLockAcquire(&lease_shared->mutex);
	lease_shared->lease_id = valid_until != 0 ? lease_id : 0;
	if (lease_shared->valid_until != 0 && lease_shared->valid_until > now && valid_until == 0)
		lease_shared->lapsed_at = now;
	else if (lease_shared->valid_until != 0 && lease_shared->valid_until <= now)
		lease_shared->lapsed_at = Max(lease_shared->lapsed_at, lease_shared->valid_until);
	lease_shared->valid_until = valid_until;
	if (registered)
	{
		lease_shared->registered_at = now;
		lease_shared->registrations++;
	}
	SpinLockRelease(&lease_shared->mutex);
}

/* the cluster worker: an etcd request worked, or could not reach etcd */
void
MqClusterNoteEtcd(bool reached)
{
	int64		now = MqClusterClock();

	SpinLockAcquire(&lease_shared->mutex);
	if (reached)
		lease_shared->etcd_ok_at = now;
	else
		lease_shared->etcd_failed_at = now;
	SpinLockRelease(&lease_shared->mutex);
}

/*
 * Does this node reach etcd, as far as its last request says (what a
 * follower reports)?  Only a request that failed says no.
 */
bool
MqClusterEtcdReached(void)
{
	bool		reached;

	if (lease_shared == NULL || !MqClusterEnabled())
		return false;
	SpinLockAcquire(&lease_shared->mutex);
	reached = lease_shared->etcd_ok_at >= lease_shared->etcd_failed_at;
	SpinLockRelease(&lease_shared->mutex);
	return reached;
}

/*
 * The sync worker: the local copy now holds what etcd held when a round
 * that began at read_from read it.
 */
void
MqClusterNoteSynced(int64 read_from)
{
	SpinLockAcquire(&lease_shared->mutex);
	if (lease_shared->registered_at != 0 &&
		lease_shared->synced_from < lease_shared->registered_at &&
		read_from >= lease_shared->registered_at)
		lease_shared->catchups++;
	lease_shared->synced_from = Max(lease_shared->synced_from, read_from);
	SpinLockRelease(&lease_shared->mutex);
}

/*
 * The etcd revisions this node has seen while it held its lease: its
 * group claims' (group_claims.c) and its sync rounds' reads.  Their
 * maximum stamps each committed offset this node writes of a replicated
 * topic (groups/offsets.c), so that a node applying offsets replicated
 * from several nodes keeps the newest coordinator's (workers/apply.c):
 * a group's new coordinator claimed it at a revision above every one its
 * old coordinator saw while it held the claim, which ended before.  A
 * revision read under a lapsed lease is not taken: the node may have
 * lost its claims without knowing yet.
 */
void
MqClusterNoteRevision(int64 revision)
{
	int64		now = MqClusterClock();

	if (lease_shared == NULL || revision <= 0)
		return;
	SpinLockAcquire(&lease_shared->mutex);
	if (lease_shared->valid_until > now)
		lease_shared->revision_seen = Max(lease_shared->revision_seen, revision);
	SpinLockRelease(&lease_shared->mutex);
}

/* that maximum; 0 before any (or with no cluster) */
int64
MqClusterRevisionSeen(void)
{
	int64		revision;

	if (lease_shared == NULL || !MqClusterEnabled())
		return 0;
	SpinLockAcquire(&lease_shared->mutex);
	revision = lease_shared->revision_seen;
	SpinLockRelease(&lease_shared->mutex);
	return revision;
}

/*
 * How many times this node's local copy caught up with etcd after a
 * registration (the sync round that lifts MqClusterLeaderFence's first
 * reason): a topic read before the last of them may name a leader that
 * an election replaced while the node was away (log/topic.c reads it
 * again).  0 with no cluster.
 */
int64
MqClusterSyncCatchups(void)
{
	int64		n;

	if (lease_shared == NULL || !MqClusterEnabled())
		return 0;
	SpinLockAcquire(&lease_shared->mutex);
	n = lease_shared->catchups;
	SpinLockRelease(&lease_shared->mutex);
	return n;
}

/* the lease this node holds now, as far as it knows; 0: none */
int64
MqClusterCurrentLease(void)
{
	int64		lease = 0;
	int64		now = MqClusterClock();

	if (lease_shared == NULL || !MqClusterEnabled())
		return 0;
	SpinLockAcquire(&lease_shared->mutex);
	if (lease_shared->valid_until > now)
		lease = lease_shared->lease_id;
	SpinLockRelease(&lease_shared->mutex);
	return lease;
}

/*
 * How many milliseconds ago this node's last etcd request that worked was
 * answered (what a follower reports with MqClusterEtcdReached); -1: none
 * has since the server started.
 */
int64
MqClusterEtcdReachedAgo(void)
{
	int64		ok_at;

	if (lease_shared == NULL || !MqClusterEnabled())
		return -1;
	SpinLockAcquire(&lease_shared->mutex);
	ok_at = lease_shared->etcd_ok_at;
	SpinLockRelease(&lease_shared->mutex);
	return ok_at == 0 ? -1 : (MqClusterClock() - ok_at) / 1000;
}

/*
 * A follower's progress report: whether its last etcd request reached etcd,
 * and how long ago its last one that did was answered (-1: none yet).
 */
void
MqClusterNotePeer(const char *node, bool peer_reaches_etcd, int64 reached_ms_ago)
{
	int64		now = MqClusterClock();
	int			i;

	SpinLockAcquire(&lease_shared->mutex);
	for (i = 0; i < lease_shared->npeers; i++)
		if (strcmp(lease_shared->peers[i].node, node) == 0)
			break;
	if (i == lease_shared->npeers && i < MQ_CLUSTER_MAX_NODES)
	{
		memset(&lease_shared->peers[i], 0, sizeof(lease_shared->peers[i]));
		strlcpy(lease_shared->peers[i].node, node, MQ_NODE_NAME_LEN);
		lease_shared->npeers++;
	}
	if (i < lease_shared->npeers)
	{
		if (reached_ms_ago >= 0)
			lease_shared->peers[i].ok_at = Max(lease_shared->peers[i].ok_at,
											   now - Min(reached_ms_ago, now / 1000) * 1000);
		if (!peer_reaches_etcd)
			lease_shared->peers[i].down_at = now;
	}
	SpinLockRelease(&lease_shared->mutex);
}

/*
 * The failsafe (see the top), for a partition with these in-sync
 * replicas: every other one has said, since this node's lease lapsed, that
 * it cannot reach etcd either, and none reached it after the lapse.  Called
 * with the mutex held.
 */
static bool
isr_cut_off_too(const char *const *isr, int nisr, int64 since)
{
	const char *self = MqClusterNodeName();
	int			others = 0;

	for (int m = 0; m < nisr; m++)
	{
		bool		down = false;

		if (strcmp(isr[m], self) == 0)
			continue;
		others++;
		for (int i = 0; i < lease_shared->npeers; i++)
			if (strcmp(lease_shared->peers[i].node, isr[m]) == 0)
				down = lease_shared->peers[i].down_at > since &&
					lease_shared->peers[i].ok_at <= since;
		if (!down)
			return false;
	}
	return others > 0;
}

/*
 * May this node act as the leader it believes it is?  NULL if so, else
 * why not (for an error's detail).
 */
const char *
MqClusterLeaderFence(const char *const *isr, int nisr, bool unclean)
{
	int64		now = MqClusterClock();
	const char *why = NULL;

	if (lease_shared == NULL || !MqClusterEnabled())
		return NULL;
	SpinLockAcquire(&lease_shared->mutex);
	if (lease_shared->registered_at == 0 || lease_shared->synced_from < lease_shared->registered_at)
		why = lease_shared->registrations <= 1 ?
			"This node has not registered in etcd and read the cluster's metadata since it started." :
			"This node registered in etcd again after its lease lapsed, and has not read the cluster's metadata since: another leader may have been elected meanwhile.";
	else if (lease_shared->valid_until <= now)
	{
		int64		since = lease_shared->valid_until != 0 ?
			Max(lease_shared->lapsed_at, lease_shared->valid_until) : lease_shared->lapsed_at;

		/*
		 * etcd gone for everyone: the failsafe.  Not when this node itself
		 * reached etcd since (its lease ended there: others may elect), nor
		 * for a topic that may elect outside the ISR.
		 */
		if (unclean || lease_shared->etcd_ok_at > since ||
			!isr_cut_off_too(isr, nisr, since))
			why = "This node's lease in etcd has lapsed, and another leader may have been elected.";
	}
	SpinLockRelease(&lease_shared->mutex);
	return why;
}
