/*-------------------------------------------------------------------------
 *
 * groups.h
 *		The consumer groups layer's C service API: membership (registry.c),
 *		who may use a group and its grants (ownership.c), a member's
 *		positions and commits (positions.c), its polls (consumer.c), and
 *		resetting and deleting a group (reset.c), over the committed-offset
 *		store (offsets.c, private to the layer).  What the layer's files
 *		share beyond this is in registry.h, ownership.h, positions.h and
 *		offsets.h, which nothing above the layer includes.
 *
 * Everything that acts for a member takes its member id, a string as
 * Kafka's, and the group's name.  A member is hosted by the process that
 * joined it: that process keeps its positions (backend-local, rewound when
 * its transaction aborts) and removes it when it exits.  Two kinds of
 * member exist or are planned:
 *	- a SQL session, member "sql-<pid>" in each group it polls: the SQL
 *	  functions in sql/groups.c are thin wrappers that pass that id;
 *	- a Kafka client, whose group the Kafka listener coordinates in its own
 *	  process, outside the registry (kafka/api_groups.c): the registry only
 *	  knows that the listener holds the group (MqGroupHostExternally), and
 *	  its commits and offset reads go through MqGroupCommitExternal and
 *	  MqGroupCommittedOffset.
 * Nothing here assumes one member per group per process.  What remains per
 * process, and why:
 *	- a process hosts at most mqlog.max_groups_per_session members, since
 *	  shared memory holds that many member slots per possible backend
 *	  (registry.c); a listener hosting more will need slots of its own;
 *	- positions, their undo log and the fences belong to the process's
 *	  current transaction, which all its members share (positions.c);
 *	- the groups a transaction evicts with a forced reset or delete are the
 *	  transaction's (registry.c);
 *	- the partition a poll starts with rotates on one counter per process
 *	  (consumer.c), which varies the start for every member it hosts;
 *	- MqGroupPoll waits on the one condition variable that producers'
 *	  commits and rebalances broadcast, so a process waits in one member's
 *	  poll at a time.  A host of many members waits on that condition
 *	  variable itself and reads with MqGroupAssignment, MqPositionsSync,
 *	  MqPositionGet and MqPositionMove.
 *
 * Every call acts in the current database, checks privileges as the
 * current user (GetUserId()), and reports errors with ereport; the SQL
 * wrappers check their arguments before they call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_H
#define MQLOG_GROUPS_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "log/records.h"
#include "log/topic.h"

#define MQ_GROUP_NAME_LEN	128		/* a group name is shorter */
#define MQ_MEMBER_ID_LEN	64		/* a member id is shorter */
#define MQ_MAX_SUB_TOPICS	16		/* topics one member subscribes to */
#define MQ_MAX_ASSIGNED		512		/* partitions assigned to one member */

/* Kafka's NOT_COORDINATOR: the group is coordinated on another node */
#define ERRCODE_MQ_NOT_COORDINATOR	MAKE_SQLSTATE('M','Q','0','0','3')

/* ------------------------------------------------------------------------
 * Settings: what a SQL session's members use, and the group slots of
 * shared memory (group_settings.c defines them: MqGroupsDefineSettings)
 * ------------------------------------------------------------------------ */

typedef enum MqAssignor
{
	MQ_ASSIGN_RANGE,
	MQ_ASSIGN_ROUNDROBIN,
	MQ_ASSIGN_STICKY
} MqAssignor;

typedef enum MqOffsetReset
{
	MQ_RESET_EARLIEST,
	MQ_RESET_LATEST,
	MQ_RESET_NONE				/* an error, as Kafka's auto.offset.reset=none */
} MqOffsetReset;

/* consumer.c */
extern int	mqlog_assignor;
extern int	mqlog_offset_reset;
extern int	mqlog_max_poll_interval_ms;
extern bool mqlog_enable_auto_commit;
extern int	mqlog_poll_recheck_interval;

/* registry.c: size shared memory, so they are the postmaster's */
extern int	mqlog_max_groups_per_session;
extern int	mqlog_kafka_max_groups;

extern void MqGroupsDefineSettings(void);

/* ------------------------------------------------------------------------
 * Membership (registry.c)
 * ------------------------------------------------------------------------ */

typedef struct MqTopicPart
{
	int32		topic_id;
	int32		partition;
} MqTopicPart;

/* a member's own settings, Kafka's consumer configs of the same names */
typedef struct MqMemberConfig
{
	int			assignor;		/* MqAssignor: partition.assignment.strategy */
	int			max_poll_interval_ms;	/* evicted after this long idle */
	int			offset_reset;	/* MqOffsetReset: auto.offset.reset */
	bool		auto_commit;	/* enable.auto.commit: a poll commits the last one */
} MqMemberConfig;

/*
 * A member's assignment, copied out of shared memory.  membership says
 * which join of the member it belongs to: a member that was evicted or
 * left and joined again is a new membership, whose positions start again
 * from the committed offsets.  0: not a member.
 */
typedef struct MqAssignment
{
	uint64		membership;
	int			generation;		/* the group's, when it was computed */
	Oid			owner;			/* the group's live owner then (InvalidOid:
								 * none), for the access check that follows */
	int			nparts;
	MqTopicPart parts[MQ_MAX_ASSIGNED];
} MqAssignment;

/* a row of the committed-offset store (offsets.c) */
typedef struct MqOffsetRow
{
	int32		topic_id;
	int32		partition;
	int64		offset;
	char	   *metadata;		/* a Kafka commit's metadata string, or NULL */
} MqOffsetRow;

/* a member as mqlog.group_members shows it */
typedef struct MqMemberInfo
{
	Oid			dboid;			/* the group's database */
	char		group[MQ_GROUP_NAME_LEN];
	char		member_id[MQ_MEMBER_ID_LEN];
	int			pid;			/* the process that hosts it */
	int			assignor;
	int			generation;
	Oid			owner;			/* the group's live owner, or InvalidOid */
	TimestampTz joined_at;
	TimestampTz last_poll;
	int			max_poll_interval_ms;	/* evicted after this long idle */
	int			ntopics;
	int32		topic_ids[MQ_MAX_SUB_TOPICS];
	int			nassigned;
	MqTopicPart assigned[MQ_MAX_ASSIGNED];
} MqMemberInfo;

extern Size MqGroupsShmemSize(void);
extern void MqGroupsShmemInit(void);
extern void MqGroupsInitCallbacks(void);
struct Latch;
extern int	MqGroupsEvictIdle(void);
extern void MqGroupsSetEvictorLatch(struct Latch *latch);

/* first in every entry point: preloaded?  this process's exit cleanup */
extern void MqGroupsCheckReady(void);

/* of a member this process hosts: it is polling */
extern void MqGroupHeartbeat(const char *group, const char *member_id);
extern List *MqGroupsWithMembers(void);
/*
 * false (and membership 0) if it is not a member; the group's live owner is
 * copied either way, so that one visit of the registry serves a call
 */
extern bool MqGroupAssignment(const char *group, const char *member_id,
							  MqAssignment *assignment);
extern bool MqTopicPartListed(const MqTopicPart *tp, int n, int32 topic_id,
							  int32 partition);
extern void MqTopicPartSort(MqTopicPart *tp, int n);
extern bool MqTopicPartInSorted(const MqTopicPart *sorted, int n, int32 topic_id,
								int32 partition);
extern Oid	MqGroupLiveOwner(const char *group);
/* Kafka's rule, kept short enough for the member table: 1 to 127 bytes */
extern void MqCheckGroupName(const char *group);
/*
 * the members of this database's groups (all_databases: of every
 * database's, the whole table), in the caller's memory context
 */
extern MqMemberInfo *MqGroupMembers(bool all_databases, int *nmembers);
/* member slots and group slots in use, server-wide */
extern int	MqGroupSlotsInUse(int *groups);
/*
 * A DBA's removal of every member of a group of this database, when the
 * transaction commits (Kafka's RemoveMembersFromConsumerGroup): they
 * rejoin at their next poll.  Returns how many members it has now.
 */
extern int	MqGroupRemoveMembers(const char *group);

/*
 * A group this process coordinates outside the registry, with nmembers
 * members (0: let it go): SQL sessions cannot join it meanwhile, and
 * resets and deletes see its members.  false, changing nothing, if SQL
 * sessions are members of it or another process holds it, or (*full set)
 * if it is a new group and this process holds mqlog.kafka_max_groups
 * already: the table reserves that many group slots for it, beside the
 * ones SQL sessions' members take, so neither can fill the other's.
 */
extern bool MqGroupHostExternally(const char *group, int nmembers, bool *full);

/* a group held with MqGroupHostExternally, as mqlog.group_slots shows it */
typedef struct MqExternalGroupInfo
{
	Oid			dboid;
	char		group[MQ_GROUP_NAME_LEN];
	int			pid;			/* the process that holds it */
	int			members;		/* how many members it has there */
} MqExternalGroupInfo;

extern MqExternalGroupInfo *MqGroupsHostedExternally(bool all_databases, int *ngroups);
/* shared memory of the group slots reserved for them */
extern Size MqGroupsExternalShmemSize(void);

/*
 * The members of such groups, as their host publishes them for
 * mqlog.group_members (external_members.c): a bounded table in shared
 * memory, each entry a member.  topics: the names of its subscription and
 * assignment, NUL-separated (ntopics); assigned: its partitions, each with
 * the index of its topic there.
 */
#define MQ_EXT_CLIENT_LEN	64
#define MQ_EXT_PROTOCOL_LEN 32
#define MQ_EXT_TOPICS_LEN	512
#define MQ_EXT_ASSIGNED		128
#define MQ_EXT_MEMBERS_PER_GROUP 4	/* entries per mqlog.kafka_max_groups */

typedef struct MqExternalMember
{
	int			pid;			/* its host; 0: a free entry */
	Oid			dboid;
	char		group[MQ_GROUP_NAME_LEN];
	char		member_id[MQ_MEMBER_ID_LEN];
	char		client_id[MQ_EXT_CLIENT_LEN];
	char		client_host[MQ_EXT_CLIENT_LEN];	/* its address */
	char		protocol[MQ_EXT_PROTOCOL_LEN];	/* the group's assignor, or "" */
	int			generation;
	TimestampTz joined_at;
	TimestampTz last_seen;		/* its last join, sync, heartbeat or commit */
	int			nsubscribed;	/* the first topics are its subscription */
	int			ntopics;
	char		topics[MQ_EXT_TOPICS_LEN];
	bool		truncated;		/* more topics or partitions than shown */
	int			nassigned;
	struct
	{
		int16		topic;		/* the index of its name in topics */
		int32		partition;
	}			assigned[MQ_EXT_ASSIGNED];
} MqExternalMember;

extern Size MqExternalMembersShmemSize(void);
extern void MqExternalMembersShmemInit(void);
/* this process's members of a group now, in place of the last ones */
extern int	MqExternalMembersPublish(const char *group, const MqExternalMember *members, int n);
extern MqExternalMember *MqExternalMembersList(bool all_databases, int *nmembers);

/* ------------------------------------------------------------------------
 * Ownership (ownership.c)
 * ------------------------------------------------------------------------ */

/* what a group call needs (MqGroupCheckAccess) */
typedef enum MqGroupAccess
{
	MQ_GROUP_USE,				/* join, commit, reset: claims a new group */
	MQ_GROUP_USE_EXISTING,		/* seek, delete: never claims */
	MQ_GROUP_OWNER,				/* forced reset or delete: owner or mqlog_admin */
	MQ_GROUP_GRANT				/* grant or revoke on it: owner or mqlog_admin */
} MqGroupAccess;

/*
 * Check that the current role may use the group as mode asks, against its
 * recorded owner and grantees, else live_owner (MqGroupLiveOwner); returns
 * the owner the answer was based on (the current role for a new group).
 */
extern Oid	MqGroupCheckAccess(const char *group, MqGroupAccess mode, Oid live_owner);
/* for the views: may role see the group?  A group nobody owns is nobody's */
extern bool MqGroupHasAccess(const char *group, Oid role, Oid live_owner);
extern bool MqGroupHasPrivilege(const char *group, Oid role);
/* mq_grant_group, mq_revoke_group: a group nobody owns becomes the granter's */
extern void MqGroupGrant(const char *group, Oid grantee, bool grant);
/* the group grants the current role may revoke (acl.h's MqGrant) */
struct MqGrantPage;				/* acl/acl.h */
extern List *MqGroupGrants(const char *group, bool any_grantee, Oid grantee, struct MqGrantPage *page);

/* ------------------------------------------------------------------------
 * Positions and commits (positions.c)
 * ------------------------------------------------------------------------ */

/* a commit that checks ownership only, cooperatively (a SQL session's) */
#define MQ_ANY_GENERATION	(-1)

extern void MqPositionsInitCallbacks(void);

/*
 * Bring the member's positions in line with its assignment: forget revoked
 * partitions (fencing this transaction's commits of the group if it polled
 * one), load new ones from the committed offsets once a commit of their
 * previous owner that is in flight has ended, and after a new membership
 * (the member was evicted and joined again) reload them all, fencing too
 * if this transaction polled under the old one.  topics: the
 * subscription, for the partition counts.
 */
extern void MqPositionsSync(const char *group, const char *member_id,
							const MqAssignment *assignment,
							MqTopic **topics, int ntopics);
/* the next offset to read; -1 before auto.offset.reset; false: none */
extern bool MqPositionGet(const char *group, const char *member_id,
						  int32 topic_id, int32 partition, int64 *position);
/* polled: records below it were handed out, to be committed */
extern void MqPositionMove(const char *group, const char *member_id,
						   int32 topic_id, int32 partition, int64 position,
						   bool polled);
extern void MqGroupSeek(const char *group, const char *member_id,
						MqTopic *topic, int32 partition, int64 offset);

/*
 * Commit every position the member moved past its committed offset /
 * one explicit position (offset: the next to read), in the caller's
 * transaction.  generation: the group generation the member consumed in,
 * refused if the member is at another one; MQ_ANY_GENERATION checks only
 * that each partition is still the member's.  Every refusal is SQLSTATE
 * 40001.
 */
extern int64 MqGroupCommit(const char *group, const char *member_id,
						   int generation);
extern int64 MqGroupAutoCommit(const char *group, const char *member_id,
							   const MqAssignment *assignment);
extern void MqGroupCommitOffset(const char *group, const char *member_id,
								int generation, MqTopic *topic,
								int32 partition, int64 offset);

/*
 * Of a group coordinated outside the registry (MqGroupHostExternally),
 * whose coordinator checked the member: commit an offset whatever the row
 * held (consume on the topic needed), and read one (-1: none; describe
 * needed).  Both check the group's use as the current role.
 */
extern void MqGroupCommitExternal(const char *group, MqTopic *topic,
								  int32 partition, int64 offset);
extern int64 MqGroupCommittedOffset(const char *group, MqTopic *topic,
									int32 partition);

/* ------------------------------------------------------------------------
 * Polls (consumer.c)
 * ------------------------------------------------------------------------ */

/*
 * Join, then hand out up to max_records records of the member's
 * partitions into out, waiting up to timeout_ms for the first.
 */
extern void MqGroupPoll(const char *group, const char *member_id,
						MqTopic **topics, int ntopics,
						const MqMemberConfig *config, int max_records,
						int64 timeout_ms, MqRecordOutput *out);
/* end a membership and its positions; false if it was none */
extern bool MqGroupLeave(const char *group, const char *member_id);

/* ------------------------------------------------------------------------
 * Resetting and deleting a group (reset.c)
 * ------------------------------------------------------------------------ */

typedef enum MqResetKind
{
	MQ_RESET_TO_EARLIEST,
	MQ_RESET_TO_LATEST,
	MQ_RESET_TO_TIME,			/* the first record at or after ts */
	MQ_RESET_TO_OFFSET
} MqResetKind;

typedef struct MqResetTarget
{
	MqResetKind kind;
	TimestampTz ts;				/* MQ_RESET_TO_TIME */
	int64		offset;			/* MQ_RESET_TO_OFFSET */
} MqResetTarget;

/*
 * A group's committed offsets of every partition of topic (the caller
 * holds consume on it); returns them, one per partition.  force: members
 * are evicted when the transaction commits instead of refusing.
 */
extern int64 *MqGroupResetOffsets(const char *group, MqTopic *topic,
								  const MqResetTarget *target, bool force);
/* forget a group's offsets, ownership and grants; returns the offsets */
extern int64 MqGroupDelete(const char *group, bool force);

/*
 * Forget one partition's committed offset of a group (Kafka's
 * OffsetDelete): the group's use and consume on the topic, as
 * mq_reset_offsets; refused (55006) while SQL members of the group
 * subscribe to the topic.  false: the group had no offset there.
 */
extern bool MqGroupDeleteOffset(const char *group, MqTopic *topic, int32 partition);

/* ------------------------------------------------------------------------
 * Groups and offsets as Kafka's group and admin APIs see them (listing.c)
 * ------------------------------------------------------------------------ */

/* a group of this database the current role may see */
typedef struct MqGroupListing
{
	char		group[MQ_GROUP_NAME_LEN];
	int			sql_members;	/* members that are SQL sessions */
	int			external_members;	/* held by a process outside the
									 * registry (MqGroupHostExternally) */
} MqGroupListing;

/*
 * Every group of this database the current role may see (its owner's,
 * granted, or any for mqlog_admin): those with committed offsets, a
 * recorded owner or members, sorted by name; returns how many.
 */
extern int	MqGroupList(MqGroupListing **groups);

/*
 * One group: *exists says whether it has offsets, an owner or members, and
 * members (when not NULL) gets its SQL members (MqGroupMembers' form),
 * *nmembers how many; false if it exists and the current role may not see
 * it (then members may be set all the same: do not show them).
 */
extern bool MqGroupLookup(const char *group, bool *exists, MqMemberInfo **members,
						  int *nmembers);

/* a committed offset as OffsetFetch of all topics answers it */
typedef struct MqGroupOffset
{
	MqTopic    *topic;
	int32		partition;
	int64		offset;
	char	   *metadata;		/* the Kafka commit's, or NULL */
} MqGroupOffset;

/*
 * Every committed offset of a group on the topics the current role may
 * describe (the group's use checked as MqGroupCommittedOffset checks it);
 * returns how many.
 */
extern int	MqGroupOffsets(const char *group, MqGroupOffset **offsets);

/*
 * MqGroupCommitExternal with the commit's metadata string (Kafka's,
 * kept as it is; NULL or empty: none), and MqGroupCommittedOffset with it
 * (*metadata NULL: none)
 */
extern void MqGroupCommitExternalMetadata(const char *group, MqTopic *topic,
										  int32 partition, int64 offset,
										  const char *metadata);
extern int64 MqGroupCommittedOffsetMetadata(const char *group, MqTopic *topic,
											int32 partition, char **metadata);

#endif							/* MQLOG_GROUPS_H */
