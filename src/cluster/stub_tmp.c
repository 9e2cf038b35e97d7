/* TEMP STUB, not committed */
#include "postgres.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "cluster/metadata.h"
#include "workers/workers.h"
char *mqlog_cluster_database = "postgres";
const char *MqClusterNodeName(void) { return getenv("MQ_TEST_NODE") ? getenv("MQ_TEST_NODE") : "n1"; }
bool MqClusterEnabled(void) { return false; }
char *MqClusterNodeConninfo(const char *node) { return getenv("MQ_TEST_LEADER") ? pstrdup(getenv("MQ_TEST_LEADER")) : NULL; }
PG_FUNCTION_INFO_V1(mqlog_apply_start_tmp);
Datum mqlog_apply_start_tmp(PG_FUNCTION_ARGS) { MqApplyEnsureWorkers(list_make1(text_to_cstring(PG_GETARG_TEXT_PP(0)))); PG_RETURN_VOID(); }
