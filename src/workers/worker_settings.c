/*-------------------------------------------------------------------------
 *
 * worker_settings.c
 *		The maintenance workers' settings (their variables are
 *		maintenance.c's): mqlog.maintenance_naptime, and
 *		mqlog.debug_pause_step, where the tests stop a maintenance pass.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "workers/workers.h"

void
MqWorkersDefineSettings(void)
{
	DefineCustomIntVariable("mqlog.maintenance_naptime",
							"Time between maintenance passes (segment roll and retention) in each database.",
							NULL,
							&mqlog_maintenance_naptime,
							10, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.debug_pause_step",
							"For tests: the step of a maintenance pass's transaction at which it waits until cancelled.",
							"0, the default, never waits.  The tests set it to stop a pass between two of its steps and kill the server there.",
							&mqlog_debug_pause_step,
							0, 0, INT_MAX,
							PGC_SUSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
}
