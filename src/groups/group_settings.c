/*-------------------------------------------------------------------------
 *
 * group_settings.c
 *		The consumer groups' settings: what a SQL session's members use
 *		(mqlog.assignor, mqlog.auto_offset_reset, mqlog.enable_auto_commit,
 *		mqlog.max_poll_interval_ms, mqlog.poll_recheck_interval; their
 *		variables are consumer.c's) and the group slots of shared memory
 *		(mqlog.max_groups_per_session, mqlog.kafka_max_groups; registry.c's).
 *
 * mqlog.kafka_max_groups is defined here although only the Kafka listener
 * hosts those groups: it sizes the registry's shared memory, and the kafka
 * layer, above this one, only reads it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "groups/groups.h"

static const struct config_enum_entry assignor_options[] = {
	{"range", MQ_ASSIGN_RANGE, false},
	{"roundrobin", MQ_ASSIGN_ROUNDROBIN, false},
	{"sticky", MQ_ASSIGN_STICKY, false},
	{"cooperative-sticky", MQ_ASSIGN_STICKY, true},
	{NULL, 0, false}
};

static const struct config_enum_entry reset_options[] = {
	{"earliest", MQ_RESET_EARLIEST, false},
	{"latest", MQ_RESET_LATEST, false},
	{"none", MQ_RESET_NONE, false},
	{NULL, 0, false}
};

void
MqGroupsDefineSettings(void)
{
	DefineCustomEnumVariable("mqlog.assignor",
							 "Partition assignor this session proposes when it joins a consumer group.",
							 "The group uses the assignor of its oldest member, as Kafka's group leader decides.",
							 &mqlog_assignor, MQ_ASSIGN_RANGE, assignor_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomEnumVariable("mqlog.auto_offset_reset",
							 "Where a group starts on a partition without a committed offset.",
							 "earliest (the default here, unlike Kafka) replays the history; latest starts at the end.",
							 &mqlog_offset_reset, MQ_RESET_EARLIEST, reset_options,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_groups_per_session",
							"Consumer groups one session may be a member of at once.",
							"Shared memory holds this many member and group slots per possible backend.",
							&mqlog_max_groups_per_session,
							8, 1, 1024,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.kafka_max_groups",
							"Consumer groups the Kafka listener may coordinate at once.",
							"Shared memory holds this many group slots for them beside the SQL sessions' slots; a JoinGroup of one more group is answered COORDINATOR_NOT_AVAILABLE.",
							&mqlog_kafka_max_groups,
							256, 1, 100000,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("mqlog.enable_auto_commit",
							 "mq_poll commits the group's positions of the previous poll first (Kafka's enable.auto.commit).",
							 "At least once without mq_commit: what a poll returned counts as processed once the session polls again.",
							 &mqlog_enable_auto_commit,
							 false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("mqlog.max_poll_interval_ms",
							"A group member that does not poll for this long is evicted (Kafka's max.poll.interval.ms).",
							NULL,
							&mqlog_max_poll_interval_ms,
							300000, 1000, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);

	/*
	 * Superuser only: every waiting poll wakes this often, so a small value
	 * costs the whole server CPU; tests raise it so that only a real wakeup
	 * can end a wait early.
	 */
	DefineCustomIntVariable("mqlog.poll_recheck_interval",
							"How often a waiting mq_poll looks for records without being woken.",
							"Commits, rebalances and DDL wake waiting polls at once; this bounds the wait for records nothing announces, such as records replayed on a standby.",
							&mqlog_poll_recheck_interval,
							1000, 10, 600000,
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
}
