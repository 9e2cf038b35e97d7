/*-------------------------------------------------------------------------
 *
 * external_members.c
 *		The members of groups coordinated outside the registry (the Kafka
 *		listener's, MqGroupHostExternally), as their host publishes them
 *		for mqlog.group_members: a fixed table in shared memory.
 *
 * Why a table of its own in shared memory: a Kafka group's state lives in
 * the memory of the listener process (kafka/api_groups.c), which no SQL
 * session can read, and the registry's member slots are sized per backend
 * for SQL sessions, whose members they assign.  The listener copies what
 * the view shows of each member (ids, client, protocol, generation,
 * subscription, assignment, times) into this table whenever the group
 * changes, and the view's function copies the table out under a shared
 * lock.  Why not a catalog table: the rows would be written at every join
 * and heartbeat, WAL and all, and outlive a listener that crashed.  The
 * table is bounded: MQ_EXT_MEMBERS_PER_GROUP (4) entries per group slot
 * the listener may hold (mqlog.kafka_max_groups), at most MQ_EXT_ASSIGNED partitions and
 * MQ_EXT_TOPICS_LEN bytes of topic names per member; a member beyond
 * those is not shown (the group's DescribeGroups shows every member), a
 * longer assignment is cut short (truncated says so).  The entries of a
 * process go when it exits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "groups/groups.h"

typedef struct ExternalMembers
{
	LWLock	   *lock;
	int			nentries;
	MqExternalMember entries[FLEXIBLE_ARRAY_MEMBER];
} ExternalMembers;

static ExternalMembers *em = NULL;
static bool exit_registered = false;

static int
entry_count(void)
{
	return mqlog_kafka_max_groups * MQ_EXT_MEMBERS_PER_GROUP;
}

Size
MqExternalMembersShmemSize(void)
{
	return add_size(offsetof(ExternalMembers, entries),
					mul_size(entry_count(), sizeof(MqExternalMember)));
}

void
MqExternalMembersShmemInit(void)
{
	bool		found;

	em = ShmemInitStruct("mqlog external group members", MqExternalMembersShmemSize(), &found);
	if (!found)
	{
		memset(em, 0, MqExternalMembersShmemSize());
		em->lock = &(GetNamedLWLockTranche("mqlog_external_members"))->lock;
		em->nentries = entry_count();
	}
}

/* this process's entries of group (NULL: of every group) go */
static void
clear_entries(const char *group)
{
	for (int i = 0; i < em->nentries; i++)
	{
		MqExternalMember *e = &em->entries[i];

		if (e->pid == MyProcPid && e->dboid == MyDatabaseId &&
			(group == NULL || strcmp(e->group, group) == 0))
			e->pid = 0;
	}
}

static void
external_members_exit(int code, Datum arg)
{
	if (em == NULL)
		return;
	LWLockAcquire(em->lock, LW_EXCLUSIVE);
	clear_entries(NULL);
	LWLockRelease(em->lock);
}

/*
 * The members the group has in this process now (n of them; 0 when it has
 * none left), in place of those published before; as many as the table
 * has room for.  Returns how many were published.
 */
int
MqExternalMembersPublish(const char *group, const MqExternalMember *members, int n)
{
	int			done = 0;

	if (em == NULL)
		return 0;
	if (!exit_registered)
	{
		before_shmem_exit(external_members_exit, (Datum) 0);
		exit_registered = true;
	}
	LWLockAcquire(em->lock, LW_EXCLUSIVE);
	clear_entries(group);
	for (int i = 0; i < em->nentries && done < n; i++)
	{
		MqExternalMember *e = &em->entries[i];

		if (e->pid != 0)
			continue;
		*e = members[done++];
		e->pid = MyProcPid;
		e->dboid = MyDatabaseId;
		strlcpy(e->group, group, MQ_GROUP_NAME_LEN);
	}
	LWLockRelease(em->lock);
	return done;
}

MqExternalMember *
MqExternalMembersList(bool all_databases, int *nmembers)
{
	MqExternalMember *out;
	int			n = 0;

	*nmembers = 0;
	if (em == NULL)
		return NULL;
	out = palloc(sizeof(MqExternalMember) * em->nentries);
	LWLockAcquire(em->lock, LW_SHARED);
	for (int i = 0; i < em->nentries; i++)
		if (em->entries[i].pid != 0 &&
			(all_databases || em->entries[i].dboid == MyDatabaseId))
			out[n++] = em->entries[i];
	LWLockRelease(em->lock);
	*nmembers = n;
	return out;
}
