/*-------------------------------------------------------------------------
 *
 * lease.c
 *		Whether this node may act as a leader: its own lease in etcd, as far
 *		as it knows, and what the other nodes last said of etcd.
 *
 * A node leads its partitions only while it holds its registration lease
 * (workers/cluster.c keeps it alive).  The lease is counted from the
 * moment the request that granted or renewed it was sent, so this node
 * believes it lapsed no later than etcd does: by the time the coordinator
 * sees the lease gone and elects another leader (cluster/failover.c), this
 * one has stopped taking produce and acknowledging acks=all commits.
 *
 * One exception, as Patroni's failsafe mode makes one: when etcd is gone
 * for everyone, nobody can elect another leader, so the current leaders
 * may go on.  A leader tells the two cases apart by its followers, whose
 * progress reports say whether their own last etcd request, within the
 * last MQ_ETCD_REACHED_MS, succeeded (sql/replica.c): since its own lease
 * lapsed, at least one follower must have said it cannot reach etcd
 * either, and none that it can.  With no word from anyone, it stops.
 *
 * A node leads nothing from the moment it registers (at start, and again
 * after its lease lapsed) until its cluster sync worker has read the
 * cluster's metadata from etcd in a round that began after that
 * registration: its local copy of who leads what may be older than a
 * failover made while it had no lease.  (The coordinator elects a new
 * leader only while the old leader's node key is absent, cluster/failover.c,
 * so no election can land after the node registered again: a read that
 * begins after the registration sees every election made meanwhile.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "mqlog.h"
#include "cluster/metadata.h"

typedef struct MqLeaseShared
{
	slock_t		mutex;
	int64		lease_id;		/* this node's lease in etcd; 0: none */
	TimestampTz valid_until;	/* 0: no lease (never registered, or lost) */
	TimestampTz lapsed_at;		/* when this node last saw its lease lapse */
	TimestampTz registered_at;	/* its last registration, with a new lease (0: none) */
	int			registrations;	/* since the server started */
	TimestampTz synced_from;	/* the local copy read etcd from this time on */
	TimestampTz etcd_ok_at;		/* this node's last etcd request that worked */
	TimestampTz peer_ok_at;		/* last report of a peer that reaches etcd */
	TimestampTz peer_down_at;	/* ... and of one that does not */
} MqLeaseShared;

static MqLeaseShared *lease_shared = NULL;

/*
 * "Reached etcd a moment ago": the cluster worker asks etcd for the node
 * list every second, so a node that reaches etcd has done so within this.
 * It must stay below two thirds of the shortest lease TTL (2 s), the least
 * time between a leader's last renewal and its lapse, so that in an
 * outage every follower says so before any leader's lease lapses.
 */
#define MQ_ETCD_REACHED_MS	1200

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
 * valid_until (the time its grant or keepalive was sent, plus the TTL), or
 * 0: it has none.  registered: it has just registered with a new lease
 * (not renewed one), so this node leads nothing until its local copy is
 * read again.
 */
void
MqClusterSetLease(int64 lease_id, TimestampTz valid_until, bool registered)
{
	TimestampTz now = GetCurrentTimestamp();

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

/* the cluster worker: an etcd request just worked */
void
MqClusterNoteEtcdOk(void)
{
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&lease_shared->mutex);
	lease_shared->etcd_ok_at = now;
	SpinLockRelease(&lease_shared->mutex);
}

/* did this node reach etcd a moment ago (what a follower reports)? */
bool
MqClusterEtcdReached(void)
{
	TimestampTz at;

	if (lease_shared == NULL || !MqClusterEnabled())
		return false;
	SpinLockAcquire(&lease_shared->mutex);
	at = lease_shared->etcd_ok_at;
	SpinLockRelease(&lease_shared->mutex);
	return at != 0 && !TimestampDifferenceExceeds(at, GetCurrentTimestamp(), MQ_ETCD_REACHED_MS);
}

/*
 * The sync worker: the local copy now holds what etcd held when a round
 * that began at read_from read it.
 */
void
MqClusterNoteSynced(TimestampTz read_from)
{
	SpinLockAcquire(&lease_shared->mutex);
	lease_shared->synced_from = Max(lease_shared->synced_from, read_from);
	SpinLockRelease(&lease_shared->mutex);
}

/* the lease this node holds now, as far as it knows; 0: none */
int64
MqClusterCurrentLease(void)
{
	int64		lease = 0;
	TimestampTz now = GetCurrentTimestamp();

	if (lease_shared == NULL || !MqClusterEnabled())
		return 0;
	SpinLockAcquire(&lease_shared->mutex);
	if (lease_shared->valid_until > now)
		lease = lease_shared->lease_id;
	SpinLockRelease(&lease_shared->mutex);
	return lease;
}

/* does this node hold its lease now, as far as it knows? */
bool
MqClusterLeaseHeld(void)
{
	bool		held;
	TimestampTz now = GetCurrentTimestamp();

	if (lease_shared == NULL || !MqClusterEnabled())
		return false;
	SpinLockAcquire(&lease_shared->mutex);
	held = lease_shared->valid_until > now;
	SpinLockRelease(&lease_shared->mutex);
	return held;
}

/* a follower's progress report said whether it reaches etcd */
void
MqClusterNotePeer(bool peer_reaches_etcd)
{
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&lease_shared->mutex);
	if (peer_reaches_etcd)
		lease_shared->peer_ok_at = now;
	else
		lease_shared->peer_down_at = now;
	SpinLockRelease(&lease_shared->mutex);
}

/*
 * May this node act as the leader it believes it is?  NULL if so, else
 * why not (for an error's detail).
 */
const char *
MqClusterLeaderFence(void)
{
	TimestampTz now = GetCurrentTimestamp();
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
		TimestampTz since = lease_shared->valid_until != 0 ?
			Max(lease_shared->lapsed_at, lease_shared->valid_until) : lease_shared->lapsed_at;

		/*
		 * etcd gone for everyone: the failsafe.  Not when this node itself
		 * reached etcd since (its lease ended there: others may elect).
		 */
		if (!(lease_shared->peer_down_at > since && lease_shared->peer_ok_at <= since &&
			  lease_shared->etcd_ok_at <= since))
			why = "This node's lease in etcd has lapsed, and another leader may have been elected.";
	}
	SpinLockRelease(&lease_shared->mutex);
	return why;
}
