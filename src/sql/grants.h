/*-------------------------------------------------------------------------
 *
 * grants.h
 *		The argument helpers of the SQL functions that grant and revoke
 *		(grants.c), which the group ones in sql/groups.c use too.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_SQL_GRANTS_H
#define MQLOG_SQL_GRANTS_H

#include "fmgr.h"

/* a text argument that must not be null; what names it in the error */
extern char *MqTextArg(FunctionCallInfo fcinfo, int argno, const char *what);
/* a role name, or PUBLIC (InvalidOid) */
extern Oid	MqGranteeArg(FunctionCallInfo fcinfo, int argno);

#endif							/* MQLOG_SQL_GRANTS_H */
