/*-------------------------------------------------------------------------
 *
 * table_am.c
 *		mqlog.mqlog_am_handler, the handler of the "mqlog" table access
 *		method of segment relations: it returns the routine of
 *		log/am.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "log/am.h"

PG_FUNCTION_INFO_V1(mqlog_am_handler);

Datum
mqlog_am_handler(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(MqTableAmRoutine());
}
