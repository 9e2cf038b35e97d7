/*-------------------------------------------------------------------------
 *
 * listing.c
 *		Consumer groups and their committed offsets as Kafka's group and
 *		admin APIs see them (the listener's ListGroups, DescribeGroups and
 *		OffsetFetch of all topics), and the Kafka commit's metadata string.
 *
 * A group exists while it has committed offsets, a recorded owner
 * (mqlog.consumer_group) or members, SQL sessions in the registry or Kafka
 * clients held by the listener (MqGroupHostExternally): the groups
 * mq_delete_group can delete.  A role sees the groups it may use, as the
 * views mqlog.groups and mqlog.group_members show them
 * (MqGroupHasAccess): its own, those granted to it, and every group for
 * mqlog_admin.  Kafka's ListGroups leaves the others out, as a Kafka
 * broker leaves out the groups a principal may not describe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "base/spi.h"
#include "acl/acl.h"
#include "groups/offsets.h"
#include "groups/ownership.h"
#include "groups/registry.h"

static int
cmp_listing(const void *a, const void *b)
{
	return strcmp(((const MqGroupListing *) a)->group, ((const MqGroupListing *) b)->group);
}

/*
 * The groups with committed offsets or a recorded owner, as listings
 * without members; *n: how many
 */
static MqGroupListing *
catalog_groups(int *n)
{
	MqSpi		spi;
	MemoryContext outer = CurrentMemoryContext;
	MqGroupListing *all;

	MqSpiBegin(&spi, true);
	if (SPI_execute("SELECT c.group_id FROM mqlog.committed_offset c"
					" UNION SELECT g.group_id FROM mqlog.consumer_group g",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: listing consumer groups failed");
	*n = (int) SPI_processed;
	all = MemoryContextAllocZero(outer, sizeof(MqGroupListing) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		strlcpy(all[i].group, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				MQ_GROUP_NAME_LEN);
	MqSpiEnd(&spi);
	return all;
}

int
MqGroupList(MqGroupListing **groups)
{
	int			ncat;
	MqGroupListing *cat = catalog_groups(&ncat);
	int			nmembers;
	MqMemberInfo *members = MqGroupMembers(false, &nmembers);
	int			nexternal;
	MqExternalGroupInfo *external = MqGroupsHostedExternally(false, &nexternal);
	int			n = 0;
	int			kept = 0;
	MqGroupListing *all;
	Oid			role = GetUserId();

	/* every source's names together, sorted, then one entry per name */
	all = palloc0(sizeof(MqGroupListing) * (ncat + nmembers + nexternal + 1));
	memcpy(all, cat, sizeof(MqGroupListing) * ncat);
	n = ncat;
	for (int i = 0; i < nmembers; i++, n++)
	{
		strlcpy(all[n].group, members[i].group, MQ_GROUP_NAME_LEN);
		all[n].sql_members = 1;
	}
	for (int i = 0; i < nexternal; i++, n++)
	{
		strlcpy(all[n].group, external[i].group, MQ_GROUP_NAME_LEN);
		all[n].external_members = external[i].members;
	}
	qsort(all, n, sizeof(MqGroupListing), cmp_listing);
	for (int i = 0; i < n; i++)
	{
		if (kept > 0 && strcmp(all[kept - 1].group, all[i].group) == 0)
		{
			all[kept - 1].sql_members += all[i].sql_members;
			all[kept - 1].external_members += all[i].external_members;
			continue;
		}
		all[kept++] = all[i];
	}
	/* the owner the registry holds, for a group with members (else none) */
	{
		char	  **names = palloc(sizeof(char *) * (kept + 1));
		Oid		   *live = palloc0(sizeof(Oid) * (kept + 1));
		bool	   *allowed = palloc(sizeof(bool) * (kept + 1));

		for (int i = 0; i < kept; i++)
		{
			names[i] = all[i].group;
			if (all[i].sql_members > 0 || all[i].external_members > 0)
				live[i] = MqGroupLiveOwner(all[i].group);
		}
		MqGroupsHaveAccess(names, live, kept, role, allowed);
		n = 0;
		for (int i = 0; i < kept; i++)
			if (allowed[i])
				all[n++] = all[i];
	}
	*groups = all;
	return n;
}

/* does the group have offsets or a recorded owner? */
static bool
in_catalog(const char *group)
{
	MqSpi		spi;
	Oid			type = TEXTOID;
	Datum		val = CStringGetTextDatum(group);
	bool		found;

	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("SELECT 1 FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) $1"
							  " UNION ALL SELECT 1 FROM mqlog.committed_offset c"
							  " WHERE c.group_id OPERATOR(pg_catalog.=) $1 LIMIT 1",
							  1, &type, &val, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "mqlog: looking up a consumer group failed");
	found = SPI_processed > 0;
	MqSpiEnd(&spi);
	return found;
}

bool
MqGroupLookup(const char *group, bool *exists, MqMemberInfo **members, int *nmembers)
{
	int			n;
	MqMemberInfo *all = MqGroupMembers(false, &n);
	int			kept = 0;

	for (int i = 0; i < n; i++)
		if (strcmp(all[i].group, group) == 0)
			all[kept++] = all[i];
	*exists = kept > 0 || MqGroupMemberCount(group) > 0 || in_catalog(group);
	if (members)
		*members = all;
	else if (all)
		pfree(all);
	if (nmembers)
		*nmembers = kept;

	/*
	 * A group that does not exist is anybody's to create (MQ_GROUP_USE), so
	 * saying so tells no more than a JoinGroup would
	 */
	return !*exists || MqGroupHasPrivilege(group, GetUserId());
}

int
MqGroupOffsets(const char *group, MqGroupOffset **offsets)
{
	MqOffsetRow *rows;
	int			n;
	int			kept = 0;
	Oid			role = GetUserId();

	(void) MqGroupAuthorize(group, MQ_GROUP_USE_EXISTING);
	n = MqOffsetReadGroup(group, &rows);
	*offsets = palloc0(sizeof(MqGroupOffset) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		MqTopic    *topic = MqTopicFindById(rows[i].topic_id);

		/* as Kafka leaves out the topics the principal may not describe */
		if (topic == NULL || !MqTopicHasPrivilege(topic, role, MQ_PRIV_DESCRIBE))
			continue;
		(*offsets)[kept].topic = topic;
		(*offsets)[kept].partition = rows[i].partition;
		(*offsets)[kept].offset = rows[i].offset;
		(*offsets)[kept].metadata = rows[i].metadata;
		kept++;
	}
	return kept;
}

void
MqGroupCommitExternalMetadata(const char *group, MqTopic *topic, int32 partition,
							  int64 offset, const char *metadata)
{
	MqGroupCommitExternal(group, topic, partition, offset);
	MqOffsetSetMetadata(group, topic->topic_id, partition, metadata);
}

int64
MqGroupCommittedOffsetMetadata(const char *group, MqTopic *topic, int32 partition,
							   char **metadata)
{
	int64		offset = MqGroupCommittedOffset(group, topic, partition);

	*metadata = offset >= 0 ? MqOffsetReadMetadata(group, topic->topic_id, partition) : NULL;
	return offset;
}
