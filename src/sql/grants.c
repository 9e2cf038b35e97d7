/*-------------------------------------------------------------------------
 *
 * grants.c
 *		The SQL entry points of topic privileges: mq_grant, mq_revoke and
 *		mq_has_topic_privilege, and the argument helpers they share with
 *		the group grants of sql/groups.c.
 *
 * Each checks its arguments and resolves the topic, then calls acl/: the
 * check that the caller may grant and the change of mqlog.topic_acl are
 * MqTopicChangeAcl, the answer MqTopicHasPrivilege.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "log/topic.h"
#include "acl/acl.h"
#include "sql/grants.h"

PG_FUNCTION_INFO_V1(mq_grant);
PG_FUNCTION_INFO_V1(mq_revoke);
PG_FUNCTION_INFO_V1(mq_has_topic_privilege);

char *
MqTextArg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

Oid
MqGranteeArg(FunctionCallInfo fcinfo, int argno)
{
	char	   *name = MqTextArg(fcinfo, argno, "role");

	if (pg_strcasecmp(name, "public") == 0)
		return InvalidOid;
	return get_role_oid(name, false);
}

/* mq_grant and mq_revoke(topic, role, privilege) */
static void
change_topic_acl(FunctionCallInfo fcinfo, bool grant)
{
	char	   *name = MqTextArg(fcinfo, 0, "topic name");
	Oid			grantee = MqGranteeArg(fcinfo, 1);
	int			privs = MqPrivilegeFromName(MqTextArg(fcinfo, 2, "privilege"));
	MqTopic    *topic = MqTopicLookup(name, false);

	MqTopicChangeAcl(topic, grantee, privs, grant);
}

Datum
mq_grant(PG_FUNCTION_ARGS)
{
	change_topic_acl(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
mq_revoke(PG_FUNCTION_ARGS)
{
	change_topic_acl(fcinfo, false);
	PG_RETURN_VOID();
}

/* mq_has_topic_privilege(topic, privilege): what the views filter by */
Datum
mq_has_topic_privilege(PG_FUNCTION_ARGS)
{
	char	   *name = MqTextArg(fcinfo, 0, "topic name");
	int			privs = MqPrivilegeFromName(MqTextArg(fcinfo, 1, "privilege"));
	MqTopic    *topic = MqTopicLookup(name, true);

	if (topic == NULL)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(MqTopicHasPrivilege(topic, GetUserId(), privs));
}
