/*-------------------------------------------------------------------------
 *
 * api_delete_groups.c
 *		DeleteGroups (key 42, v0-v1): mq_delete_group(group) as the
 *		request's role, each group in a subtransaction of its own, for SQL
 *		and Kafka groups alike.
 *
 * The checks are mq_delete_group's (MqGroupDelete without force): the
 * role must be allowed to execute mq_delete_group (a DBA may revoke it
 * from PUBLIC) and to use the group (GROUP_AUTHORIZATION_FAILED); a
 * group with members, SQL sessions or Kafka clients of this listener, is
 * NON_EMPTY_GROUP, as Kafka refuses a group that is not Empty; a group
 * with no offsets, owner or members is GROUP_ID_NOT_FOUND.  A deleted
 * group's offsets, owner and grants are gone, for SQL too.  Kafka's
 * DeleteGroups has no force: mq_delete_group(group, true) evicts SQL
 * members, which no Kafka client could ask for.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/errcodes.h"

#include "groups/groups.h"
#include "kafka/kafka_internal.h"

typedef struct DeleteUnit
{
	const char *group;
	Oid			fn;				/* mq_delete_group(text, bool) */
} DeleteUnit;

static void
delete_group(void *arg)
{
	DeleteUnit *u = arg;

	MqKafkaCheckExecute(u->fn);
	(void) MqGroupDelete(u->group, false);
}

Oid
MqKafkaDeleteGroupFunction(void)
{
	static const Oid args[] = {TEXTOID, BOOLOID};

	return MqKafkaExtensionFunction("mq_delete_group", lengthof(args), args);
}

/* mq_delete_group's refusals as Kafka's error codes */
int16
MqKafkaGroupErrorOf(int sqlerrcode, void *arg)
{
	switch (sqlerrcode)
	{
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return MQK_GROUP_AUTHORIZATION_FAILED;
		case ERRCODE_OBJECT_IN_USE:
			return MQK_NON_EMPTY_GROUP;
		case ERRCODE_UNDEFINED_OBJECT:
			return MQK_GROUP_ID_NOT_FOUND;
		case ERRCODE_INVALID_NAME:
			return MQK_INVALID_GROUP_ID;
		default:
			return MqKafkaErrorOf(sqlerrcode, MQK_INVALID_REQUEST);
	}
}

char	  **
MqKafkaReadGroupIds(MqKafkaReader *r, bool flex, int32 *ngroups)
{
	char	  **names;

	*ngroups = MqKafkaReadArrayLen(r, flex, flex ? 1 : 2);
	if (*ngroups < 0 || r->failed)
		return NULL;
	names = palloc0(sizeof(char *) * (*ngroups + 1));
	for (int i = 0; i < *ngroups; i++)
		if ((names[i] = MqKafkaReadString(r, flex, NULL)) == NULL)
			return NULL;
	return names;
}

MqKafkaOutcome
MqKafkaDeleteGroups(MqKafkaRequest *req, StringInfo out)
{
	MqKafkaReader *r = &req->body;
	bool		flex = req->flexible;
	int32		ngroups;
	char	  **names;
	int			attempted = 0;
	Oid			fn;

	if ((names = MqKafkaReadGroupIds(r, flex, &ngroups)) == NULL)
		return MQK_CLOSE;
	MqKafkaSkipTags(r, flex);
	if (r->failed)
		return MQK_CLOSE;

	fn = MqKafkaDeleteGroupFunction();
	MqKafkaWriteInt32(out, 0);	/* throttle_time_ms */
	MqKafkaWriteArrayLen(out, flex, ngroups);
	for (int i = 0; i < ngroups; i++)
	{
		int16		error;
		char	   *message;

		DeleteUnit	u = {names[i], fn};

		error = MqKafkaGroupIdError(names[i]);
		if (error == MQK_NONE && MqKafkaOutOfTime(req, &attempted))
			error = MQK_REQUEST_TIMED_OUT;
		if (error == MQK_NONE)
			error = MqKafkaCoordinatesGroup(names[i]);
		if (error == MQK_NONE)
			error = MqKafkaTryAdmin(delete_group, &u, MqKafkaGroupErrorOf, true, &message);
		MqKafkaWriteString(out, flex, names[i]);
		MqKafkaWriteInt16(out, error);
		MqKafkaWriteTags(out, flex);
	}
	MqKafkaWriteTags(out, flex);
	return MQK_RESPOND;
}
