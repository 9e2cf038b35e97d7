/*-------------------------------------------------------------------------
 *
 * group_members.h
 *		What the listener's Kafka groups show in mqlog.group_members
 *		(group_members.c), for the group coordinator (api_groups.c).
 *
 * Private to the Kafka listener: only api_groups.c and group_members.c
 * include it.  The coordinator owns the groups and hands a snapshot of
 * one (MqKafkaGroupInfo) down; nothing here reads the coordinator's state.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_GROUP_MEMBERS_H
#define MQLOG_KAFKA_GROUP_MEMBERS_H

#include "nodes/pg_list.h"

#include "kafka/kafka_internal.h"

/*
 * Publish the group's members (info, as MqKafkaGroupInfoOf gives them;
 * protocol: the one the group's last rebalance chose, or NULL) to the
 * groups layer, with their subscriptions and assignments decoded.
 */
extern void MqKafkaPublishGroupMembers(const char *group, const char *protocol,
									   const MqKafkaGroupInfo *info);

/*
 * The topic names of a consumer's subscription metadata, palloc'd in the
 * current memory context; NIL for metadata of another protocol type.
 */
extern List *MqKafkaSubscriptionTopics(const char *metadata, int metadata_len);

#endif							/* MQLOG_KAFKA_GROUP_MEMBERS_H */
