/* TEMP STUB, not committed */
#include "postgres.h"
#include "cluster/metadata.h"
char *mqlog_cluster_database = "postgres";
const char *MqClusterNodeName(void) { return "n1"; }
bool MqClusterEnabled(void) { return false; }
char *MqClusterNodeConninfo(const char *node) { return NULL; }
