/*-------------------------------------------------------------------------
 *
 * admin.c
 *		The administration of consumer groups: resetting a group's offsets,
 *		deleting a group, granting and revoking its use, and asking whether
 *		a role may use it; each checked against the group's owner, which
 *		lives with its members (registry.c) until it is recorded (acl.c).
 *
 * A reset or a delete changes offsets under the group's members, so it is
 * refused while the group has any, or with force evicts them when its
 * transaction commits (registry.c): they rejoin and load the new offsets.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "base/spi.h"
#include "log/logiter.h"
#include "log/partition.h"
#include "log/records.h"
#include "groups/internal.h"

int64 *
MqGroupResetOffsets(const char *group, MqTopic *topic, const MqResetTarget *target,
					bool force)
{
	int64	   *targets = palloc(sizeof(int64) * Max(topic->partitions, 1));

	MqGroupCheckAccess(group, MQ_GROUP_USE, MqGroupLiveOwner(group));
	MqGroupRefuseIfActive(group, force, "reset offsets");
	MqGroupPersistOwner(group, MqGroupLiveOwner(group));

	for (int p = 0; p < topic->partitions; p++)
	{
		int64		lso,
					hw;

		MqPartitionOffsets(topic, p, &lso, &hw);
		switch (target->kind)
		{
			case MQ_RESET_TO_EARLIEST:
				targets[p] = MqLogStartOffset(topic, p);
				break;
			case MQ_RESET_TO_LATEST:
				targets[p] = lso;
				break;
			case MQ_RESET_TO_TIME:
				/* the first record at or after ts, else the end */
				targets[p] = MqOffsetForTime(topic, p, target->ts, NULL);
				if (targets[p] < 0)
					targets[p] = lso;
				break;
			case MQ_RESET_TO_OFFSET:
				MqCheckOffsetRange(topic, p, target->offset, false);
				targets[p] = target->offset;
				break;
		}
		MqOffsetWrite(group, topic->topic_id, p, targets[p]);
	}
	return targets;
}

int64
MqGroupDelete(const char *group, bool force)
{
	MqSpi		spi;
	Oid			type = TEXTOID;
	Datum		val = CStringGetTextDatum(group);
	int64		n;
	uint64		owned;

	MqGroupCheckAccess(group, MQ_GROUP_USE_EXISTING, MqGroupLiveOwner(group));
	MqGroupRefuseIfActive(group, force, "delete the offsets");
	n = MqOffsetsDelete(group);

	/* its ownership and grants go with it (group_acl cascades) */
	MqSpiBegin(&spi, true);
	if (SPI_execute_with_args("DELETE FROM mqlog.consumer_group g WHERE g.group_id OPERATOR(pg_catalog.=) $1",
							  1, &type, &val, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "mqlog: deleting the group failed");
	owned = SPI_processed;
	MqSpiEnd(&spi);
	MqGroupForget(group);
	MqlogCatalogChanged();
	if (n == 0 && owned == 0 && MqGroupMemberCount(group) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("consumer group \"%s\" does not exist", group)));
	return n;
}

void
MqGroupGrant(const char *group, Oid grantee, bool grant)
{
	Oid			live = MqGroupLiveOwner(group);

	/* a group nobody owns yet becomes the granter's */
	if (grant)
	{
		MqGroupCheckAccess(group, MQ_GROUP_USE, live);
		MqGroupPersistOwner(group, live);
	}
	MqGroupCheckAccess(group, MQ_GROUP_GRANT, live);
	MqGroupChangeGrant(group, grantee, grant);
}

bool
MqGroupHasPrivilege(const char *group, Oid role)
{
	return MqGroupHasAccess(group, role, MqGroupLiveOwner(group));
}
