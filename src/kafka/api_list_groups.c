/*-------------------------------------------------------------------------
 *
 * api_list_groups.c
 *		ListGroups (key 16, v0-v4; v3+ flexible, v4 with Kafka's states
 *		filter): the consumer groups of mqlog.kafka_database the request's
 *		role may see, those Kafka clients are members of here and those of
 *		SQL sessions alike (groups/listing.c).
 *
 * A group the listener coordinates is listed in its coordinator's state
 * and protocol type; a group of SQL members is Stable (the registry
 * assigns its partitions at each join, with no rebalance phases a client
 * could see); a group with only committed offsets or an owner is Empty.
 * Every group is of protocol type "consumer": mqlog's groups are groups of
 * consumers, whose offsets are in mqlog.committed_offset.  A group the
 * role may not see is left out, as a Kafka broker leaves out the groups a
 * principal may not describe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/extension.h"

#include "groups/groups.h"
#include "kafka/kafka_internal.h"

/* the state and protocol type a listed or described group shows */
void
MqKafkaGroupShownState(const char *group, int sql_members, const char **state,
					   const char **protocol_type)
{
	MqKafkaGroupInfo info;

	if (MqKafkaGroupInfoOf(group, &info))
	{
		*state = info.state;
		*protocol_type = info.protocol_type;
		return;
	}
	*state = sql_members > 0 ? "Stable" : "Empty";
	*protocol_type = "consumer";
}

typedef struct ListArgs
{
	MqGroupListing *groups;
	int			ngroups;
} ListArgs;

static void
list_groups(void *arg)
{
	ListArgs   *a = arg;

	a->ngroups = MqGroupList(&a->groups);
}

/* is state one of the filter's (Kafka compares them ignoring case)? */
static bool
state_wanted(const char *state, char **filter, int nfilter)
{
	if (nfilter <= 0)
		return true;
	for (int i = 0; i < nfilter; i++)
		if (pg_strcasecmp(filter[i], state) == 0)
			return true;
	return false;
}

MqKafkaOutcome
MqKafkaListGroups(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	int16		v = req->api_version;
	bool		flex = req->flexible;
	int32		nfilter = 0;
	char	  **filter = NULL;
	ListArgs	a = {NULL, 0};
	int16		error = MQK_NONE;
	char	   *message;
	StringInfoData entries;
	int			n = 0;

	if (v >= 4)
	{
		nfilter = MqKafkaReadArrayLen(r, flex, 1);
		filter = palloc0(sizeof(char *) * (Max(nfilter, 0) + 1));
		for (int i = 0; i < nfilter && !r->failed; i++)
			if ((filter[i] = MqKafkaReadString(r, flex, NULL)) == NULL)
				return MQK_CLOSE;
	}
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	if (!OidIsValid(get_extension_oid("mqlog", true)))
		error = MQK_COORDINATOR_NOT_AVAILABLE;
	else
		error = MqKafkaTryAdmin(list_groups, &a, NULL, true, &message);

	if (v >= 1)
		MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteInt16(out, error);
	if (error != MQK_NONE)
		a.ngroups = 0;
	/* the entries first: their count is known once the filter has spoken */
	initStringInfo(&entries);
	for (int i = 0; i < a.ngroups; i++)
	{
		const char *state;
		const char *protocol_type;

		MqKafkaGroupShownState(a.groups[i].group, a.groups[i].sql_members, &state,
							   &protocol_type);
		if (!state_wanted(state, filter, nfilter))
			continue;
		MqKafkaWriteString(&entries, flex, a.groups[i].group);
		MqKafkaWriteString(&entries, flex, protocol_type);
		if (v >= 4)
			MqKafkaWriteString(&entries, flex, state);
		MqKafkaWriteTags(&entries, flex);
		n++;
	}
	MqKafkaWriteArrayLen(out, flex, n);
	appendBinaryStringInfo(out, entries.data, entries.len);
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
