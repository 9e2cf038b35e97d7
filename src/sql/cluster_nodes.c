/*-------------------------------------------------------------------------
 *
 * cluster_nodes.c
 *		mqlog.cluster_nodes(), behind the view mqlog.nodes: the cluster's
 *		nodes as the cluster worker last copied them into shared memory
 *		(cluster/nodes.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "cluster/metadata.h"

PG_FUNCTION_INFO_V1(mqlog_cluster_nodes);

/*
 * The shared copy as rows.  A conninfo may hold a password, so only
 * superusers and members of mqlog_admin see it; others see null.
 */
Datum
mqlog_cluster_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			admin = get_role_oid("mqlog_admin", true);
	bool		show_conninfo = superuser() ||
		(OidIsValid(admin) && has_privs_of_role(GetUserId(), admin));
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, MqClusterSharedNodes())
	{
		MqClusterNode *n = lfirst(lc);
		Datum		values[8];
		bool		nulls[8] = {0};

		values[0] = CStringGetTextDatum(n->name);
		if (show_conninfo && n->conninfo[0])
			values[1] = CStringGetTextDatum(n->conninfo);
		else
			nulls[1] = true;
		values[2] = BoolGetDatum(n->alive);
		values[3] = BoolGetDatum(n->is_self);
		if (n->last_seen)
			values[4] = TimestampTzGetDatum(n->last_seen);
		else
			nulls[4] = true;
		values[5] = Int32GetDatum(n->broker_id);
		nulls[5] = n->broker_id < 0;
		values[6] = CStringGetTextDatum(n->kafka);
		nulls[6] = n->kafka[0] == '\0';
		values[7] = CStringGetTextDatum(n->rack);
		nulls[7] = n->rack[0] == '\0';
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
