/*-------------------------------------------------------------------------
 *
 * roles.c
 *		DROP ROLE, REASSIGN OWNED and DROP OWNED as they touch mqlog's
 *		owners and grants.
 *
 * Topic and group owners (mqlog.topic.owner, mqlog.consumer_group.owner)
 * and grantees (mqlog.topic_acl, mqlog.group_acl) are regrole columns, on
 * which PostgreSQL records no dependency: without this file, DROP ROLE
 * would leave their bare oids behind, which the role that gets that oid
 * next (or, after pg_dump and a restore, whichever role has it on the new
 * server) would inherit.  So, in the database where the statement runs, as
 * PostgreSQL does for the objects it tracks:
 *
 *	DROP ROLE		refused (2BP01) while the role owns a topic or a recorded
 *					consumer group; its mqlog grants go with it.
 *	REASSIGN OWNED	gives the old roles' topics and groups to the new one.
 *	DROP OWNED		revokes the roles' mqlog grants; topics are not dropped
 *					(a topic's records are not an object to lose in passing),
 *					so DROP ROLE still asks for REASSIGN OWNED first.
 *
 * Roles are cluster-wide, mqlog's catalog per database: a role's topics in
 * other databases are not seen from here (doc/reference.md says so).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "acl/acl.h"
#include "base/spi.h"
#include "log/partition.h"

static ProcessUtility_hook_type prev_utility = NULL;

/*
 * The oids of the roles a statement names that exist, as an oid[], and how
 * many (DROP ROLE names roles by name; the others by RoleSpec, which may be
 * CURRENT_USER and the like).
 */
static ArrayType *
role_oids(List *rolespecs, bool plain_names, int *n)
{
	Datum	   *oids = palloc(sizeof(Datum) * Max(list_length(rolespecs), 1));
	ListCell   *lc;

	*n = 0;
	foreach(lc, rolespecs)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			role;

		if (plain_names)
			role = spec->roletype == ROLESPEC_CSTRING ? get_role_oid(spec->rolename, true) : InvalidOid;
		else
			role = get_rolespec_oid(spec, true);
		if (OidIsValid(role))
			oids[(*n)++] = ObjectIdGetDatum(role);
	}
	return construct_array(oids, *n, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
}

/* does this database have mqlog's catalog (CREATE EXTENSION ran here)? */
static bool
mqlog_installed(void)
{
	return IsTransactionState() && OidIsValid(get_extension_oid("mqlog", true));
}

/* run one statement on mqlog's catalog as the extension owner, $1 the roles */
static uint64
run_on_roles(const char *sql, ArrayType *roles, Datum arg2, Oid arg2type)
{
	MqSpi		spi;
	Oid			types[2] = {OIDARRAYOID, arg2type};
	Datum		args[2] = {PointerGetDatum(roles), arg2};
	uint64		result = 0;
	int			rc;

	MqSpiBegin(&spi, true);
	rc = SPI_execute_with_args(sql, OidIsValid(arg2type) ? 2 : 1, types, args, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "mqlog: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	if (rc == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		result = isnull ? 0 : (uint64) DatumGetInt64(d);
	}
	else
		result = SPI_processed;
	MqSpiEnd(&spi);
	return result;
}

/* before DROP ROLE: refuse while a role owns a topic or a recorded group */
static void
check_drop_roles(DropRoleStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->roles)
	{
		RoleSpec   *spec = lfirst(lc);
		Oid			role = spec->roletype == ROLESPEC_CSTRING ?
			get_role_oid(spec->rolename, true) : InvalidOid;
		ArrayType  *one;
		int64		topics,
					groups;

		if (!OidIsValid(role))
			continue;			/* IF EXISTS, or DROP ROLE's own error */
		one = construct_array((Datum[]) {ObjectIdGetDatum(role)}, 1, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
		topics = (int64) run_on_roles("SELECT count(*) FROM mqlog.topic t"
									  " WHERE t.owner::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
									  one, (Datum) 0, InvalidOid);
		groups = (int64) run_on_roles("SELECT count(*) FROM mqlog.consumer_group g"
									  " WHERE g.owner::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
									  one, (Datum) 0, InvalidOid);
		if (topics > 0 || groups > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("role \"%s\" cannot be dropped because it owns mqlog topics or consumer groups",
							spec->rolename),
					 errdetail("It owns " INT64_FORMAT " topic(s) and " INT64_FORMAT " consumer group(s) in database \"%s\".",
							   topics, groups, get_database_name(MyDatabaseId)),
					 errhint("REASSIGN OWNED BY %s TO another role gives them to it (mqlog follows REASSIGN OWNED), or drop the topics first.",
							 quote_identifier(spec->rolename))));
	}
}

/* a role's mqlog grants, revoked (DROP ROLE, DROP OWNED) */
static void
revoke_grants(ArrayType *roles)
{
	uint64		n;

	n = run_on_roles("DELETE FROM mqlog.topic_acl a"
					 " WHERE a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
					 roles, (Datum) 0, InvalidOid);
	n += run_on_roles("DELETE FROM mqlog.group_acl a"
					  " WHERE a.grantee::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
					  roles, (Datum) 0, InvalidOid);
	if (n > 0)
		MqlogCatalogChanged();	/* sessions reload their cached privileges */
}

/* REASSIGN OWNED: the old roles' topics and groups to the new one */
static void
reassign_owners(ArrayType *roles, Oid newrole)
{
	uint64		n;

	n = run_on_roles("UPDATE mqlog.topic t SET owner = $2::pg_catalog.regrole"
					 " WHERE t.owner::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
					 roles, ObjectIdGetDatum(newrole), OIDOID);
	n += run_on_roles("UPDATE mqlog.consumer_group g SET owner = $2::pg_catalog.regrole"
					  " WHERE g.owner::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)",
					  roles, ObjectIdGetDatum(newrole), OIDOID);
	if (n > 0)
		MqlogCatalogChanged();
}

static void
roles_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
			  ProcessUtilityContext context, ParamListInfo params,
			  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	/* the statement first: every BEGIN and COMMIT comes through here */
	bool		ours = (IsA(stmt, DropRoleStmt) || IsA(stmt, ReassignOwnedStmt) ||
						IsA(stmt, DropOwnedStmt)) && mqlog_installed();
	ArrayType  *roles = NULL;
	int			nroles = 0;
	Oid			newrole = InvalidOid;

	/* the oids before the statement: DROP ROLE removes them */
	if (ours)
	{
		if (IsA(stmt, DropRoleStmt))
		{
			check_drop_roles((DropRoleStmt *) stmt);
			roles = role_oids(((DropRoleStmt *) stmt)->roles, true, &nroles);
		}
		else if (IsA(stmt, ReassignOwnedStmt))
		{
			roles = role_oids(((ReassignOwnedStmt *) stmt)->roles, false, &nroles);
			newrole = get_rolespec_oid(((ReassignOwnedStmt *) stmt)->newrole, false);
		}
		else
			roles = role_oids(((DropOwnedStmt *) stmt)->roles, false, &nroles);
	}

	if (prev_utility)
		prev_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);

	/* PostgreSQL has checked the caller's right to do it: follow it */
	if (ours && nroles > 0)
	{
		if (IsA(stmt, ReassignOwnedStmt))
			reassign_owners(roles, newrole);
		else
			revoke_grants(roles);
	}
}

void
MqAclInitHooks(void)
{
	prev_utility = ProcessUtility_hook;
	ProcessUtility_hook = roles_utility;
}
