/*-------------------------------------------------------------------------
 *
 * grants.c
 *		The SQL entry points of topic privileges: mq_grant, mq_revoke and
 *		mq_has_topic_privilege, and the argument helpers they share with
 *		the group grants of sql/groups.c; mqlog.grant_list, the grants of
 *		topics and groups behind the view mqlog.grants.
 *
 * Each checks its arguments and resolves the topic, then calls acl/: the
 * check that the caller may grant and the change of mqlog.topic_acl are
 * MqTopicChangeAcl, the answer MqTopicHasPrivilege.  The list is acl/'s
 * and groups/' (MqTopicGrants, MqGroupGrants): the grants the caller could
 * revoke, as the Kafka listener's DescribeAcls lists them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "log/topic.h"
#include "acl/acl.h"
#include "groups/groups.h"
#include "sql/grants.h"

PG_FUNCTION_INFO_V1(mq_grant);
PG_FUNCTION_INFO_V1(mq_revoke);
PG_FUNCTION_INFO_V1(mq_has_topic_privilege);
PG_FUNCTION_INFO_V1(mqlog_grant_list);

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

/* one row of mqlog.grants: privileges are the topic's bit names, a group's "use" */
static void
put_grants(ReturnSetInfo *rsinfo, const char *kind, List *grants)
{
	static const int bits[] = {MQ_PRIV_PRODUCE, MQ_PRIV_CONSUME, MQ_PRIV_DESCRIBE, MQ_PRIV_ALTER};
	ListCell   *lc;

	foreach(lc, grants)
	{
		MqGrant    *g = lfirst(lc);
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		Datum		names[lengthof(bits)];
		int			n = 0;
		const char *grantee = OidIsValid(g->grantee) ? GetUserNameFromId(g->grantee, true) : "PUBLIC";

		if (strcmp(kind, "group") == 0)
			names[n++] = CStringGetTextDatum("use");
		else
			for (int i = 0; i < lengthof(bits); i++)
				if (g->privs & bits[i])
					names[n++] = CStringGetTextDatum(MqPrivilegeName(bits[i]));
		values[0] = CStringGetTextDatum(kind);
		values[1] = CStringGetTextDatum(g->object);
		values[2] = grantee ? CStringGetTextDatum(grantee) : (Datum) 0;
		nulls[2] = (grantee == NULL);
		values[3] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/*
 * mqlog.grant_list(): the grants made with mq_grant and mq_grant_group
 * that the current role could revoke (of the topics and groups it owns;
 * all of them for mqlog_admin)
 */
Datum
mqlog_grant_list(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	put_grants(rsinfo, "topic", MqTopicGrants(NULL, true, InvalidOid, NULL));
	put_grants(rsinfo, "group", MqGroupGrants(NULL, true, InvalidOid, NULL));
	return (Datum) 0;
}
