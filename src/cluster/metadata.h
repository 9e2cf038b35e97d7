/* TEMP STUB */
#ifndef MQLOG_METADATA_H
#define MQLOG_METADATA_H
extern const char *MqClusterNodeName(void);
extern bool MqClusterEnabled(void);
extern char *MqClusterNodeConninfo(const char *node);
extern char *mqlog_cluster_database;
#endif
