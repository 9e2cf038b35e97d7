/*-------------------------------------------------------------------------
 *
 * coordinator.c
 *		Which node of a cluster coordinates a Kafka consumer group: the one
 *		that holds the group's claim in etcd (cluster/group_claims.c, the
 *		claim SQL groups of replicated topics take), as FindCoordinator
 *		names it and every other group request checks it.
 *
 * On a cluster (mqlog.etcd_endpoints) every Kafka group is claimed, not
 * only groups of replicated topics as a SQL join claims them:
 * FindCoordinator carries no topics, and two nodes coordinating one group
 * name would share its committed offsets (those of replicated topics
 * replicate) and both consume the same records.  FindCoordinator claims a
 * free group for this node and names the holder; a group request reaching
 * a node that does not hold the claim is answered NOT_COORDINATOR, and the
 * client asks FindCoordinator again.  A claim lives under its node's lease:
 * when the node dies or loses etcd, the lease ends, the claim goes, and the
 * next FindCoordinator (at any node) claims the group there.  While the
 * listener has members of a group, the groups layer knows it holds it
 * (MqGroupHostExternally) and the cluster worker keeps the claim; a claim
 * with no members anywhere here is let go after a couple of seconds
 * (MqClusterReleaseGroups), so that an idle group may move.
 *
 * The listener is one process serving every connection, and an etcd call
 * blocks it for up to mqlog.etcd_timeout, so etcd is asked only where a
 * group may change hands: at FindCoordinator, at the join of a member
 * that is new here, and for a group request about a group with no members
 * here (an assign() consumer's commits, the admin APIs).  A group with
 * members here is this node's for as long as the node's lease is the one
 * the group was claimed under (a check in shared memory, no etcd call).
 * Answers are cached in this process: this node's own claim for
 * SELF_FRESH_MS (well under the two idle rounds of a second the cluster
 * worker waits before it lets an unused claim go), another node's for
 * OTHER_FRESH_MS, so that clients retrying FindCoordinator cost etcd one
 * call per group a second, and there are at most MAX_CLAIMS_PER_SECOND
 * calls a second in all (within_call_limit).  No etcd call is made while this node holds no
 * lease or last failed to reach etcd: the answer is then at once
 * COORDINATOR_NOT_AVAILABLE (FindCoordinator) or NOT_COORDINATOR.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"
#include "groups/groups.h"
#include "kafka/kafka_internal.h"

#define SELF_FRESH_MS		500
#define OTHER_FRESH_MS		1000
#define MAX_CACHED_CLAIMS	1024
#define MAX_CLAIMS_PER_SECOND	50

typedef struct CachedClaim
{
	char		group[MQ_GROUP_NAME_LEN];	/* the hash key */
	char		holder[MQ_NODE_NAME_LEN];	/* "": this node */
	int64		lease;			/* this node's lease when it was asked */
	TimestampTz checked;
} CachedClaim;

static HTAB *claims = NULL;

/* the etcd calls of the current second, and when the limit was last logged */
static TimestampTz window_start = 0;
static int	window_calls = 0;
static TimestampTz limit_logged = 0;

/*
 * May the listener make one more etcd call now?  A client can name a new
 * group in every FindCoordinator, and each would otherwise cost an etcd
 * round trip here and a claim the cluster worker deletes one by one two
 * seconds later, in the round that also renews the node's lease: so at
 * most MAX_CLAIMS_PER_SECOND calls a second, the others answered
 * COORDINATOR_NOT_AVAILABLE, which clients retry.
 */
static bool
within_call_limit(TimestampTz now)
{
	if (TimestampDifferenceExceeds(window_start, now, 1000))
	{
		window_start = now;
		window_calls = 0;
	}
	if (window_calls < MAX_CLAIMS_PER_SECOND)
	{
		window_calls++;
		return true;
	}
	if (TimestampDifferenceExceeds(limit_logged, now, 60000))
	{
		ereport(LOG,
				(errmsg("Kafka group requests made %d claims of consumer groups in etcd within a second; the next ones are answered COORDINATOR_NOT_AVAILABLE until the second is over",
						MAX_CLAIMS_PER_SECOND),
				 errdetail("Clients retry them.  This is logged at most once a minute.")));
		limit_logged = now;
	}
	return false;
}

/* the cache, with room for one more entry; false: no room now */
static bool
cache_room(TimestampTz now)
{
	HASH_SEQ_STATUS seq;
	CachedClaim *c;

	if (claims == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = MQ_GROUP_NAME_LEN;
		ctl.entrysize = sizeof(CachedClaim);
		ctl.hcxt = TopMemoryContext;
		claims = hash_create("mqlog kafka group claims", 64, &ctl,
							 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	if (hash_get_num_entries(claims) < MAX_CACHED_CLAIMS)
		return true;
	/* full: every entry past its use goes (a client making up names) */
	hash_seq_init(&seq, claims);
	while ((c = hash_seq_search(&seq)) != NULL)
		if (TimestampDifferenceExceeds(c->checked, now, OTHER_FRESH_MS))
			(void) hash_search(claims, c->group, HASH_REMOVE, NULL);
	return hash_get_num_entries(claims) < MAX_CACHED_CLAIMS;
}

typedef struct ClaimCall
{
	const char *group;
	int64		lease;
	char	   *holder;			/* out: NULL, this node */
} ClaimCall;

static void
claim_group(void *arg)
{
	ClaimCall  *call = arg;

	call->holder = MqClusterClaimGroup(call->group, call->lease);
}

/*
 * Is this node the group's coordinator?  MQK_NONE if it is (always, off a
 * cluster); else NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE when no
 * node can be named now (this node has no lease or cannot reach etcd, or
 * etcd failed), with *holder the node that holds the claim when known
 * (NULL otherwise).  The modes are kafka_internal.h's.  A group that
 * starts here is claimed FRESH, not from the cache: the cluster worker may
 * have let go of the claim seen a moment ago (it was idle), and another
 * node taken it since; the group's members must not start here then.
 */
int16
MqKafkaCoordinatorError(const char *group, int64 claimed_lease, MqKafkaClaimMode mode,
						char **holder)
{
	int64		lease;
	TimestampTz now;
	CachedClaim *c = NULL;
	ClaimCall	call;
	int16		code;

	*holder = NULL;
	if (!MqClusterEnabled())
		return MQK_NONE;
	lease = MqClusterCurrentLease();
	if (lease == 0)
		return MQK_COORDINATOR_NOT_AVAILABLE;
	if (claimed_lease == lease)
		return MQK_NONE;
	now = GetCurrentTimestamp();
	if (claims != NULL)
		c = hash_search(claims, group, HASH_FIND, NULL);
	if (mode == MQK_CLAIM_FRESH)
		c = NULL;
	if (c != NULL && c->holder[0] == '\0' && c->lease == lease &&
		!TimestampDifferenceExceeds(c->checked, now, SELF_FRESH_MS))
		return MQK_NONE;
	if (c != NULL && c->holder[0] != '\0' &&
		!TimestampDifferenceExceeds(c->checked, now, OTHER_FRESH_MS))
	{
		*holder = pstrdup(c->holder);
		return MQK_NOT_COORDINATOR;
	}
	if (mode == MQK_CLAIM_CHECK)
		return MQK_NOT_COORDINATOR;
	if (!MqClusterEtcdReached() || !within_call_limit(now))
		return MQK_COORDINATOR_NOT_AVAILABLE;

	call.group = group;
	call.lease = lease;
	call.holder = NULL;
	code = MqKafkaTry(claim_group, &call, MQK_COORDINATOR_NOT_AVAILABLE, NULL);
	if (code != MQK_NONE)
		return MQK_COORDINATOR_NOT_AVAILABLE;
	if (cache_room(now))
	{
		c = hash_search(claims, group, HASH_ENTER, NULL);
		strlcpy(c->holder, call.holder ? call.holder : "", MQ_NODE_NAME_LEN);
		c->lease = lease;
		c->checked = now;
	}
	*holder = call.holder;
	return call.holder == NULL ? MQK_NONE : MQK_NOT_COORDINATOR;
}
