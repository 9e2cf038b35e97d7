/*-------------------------------------------------------------------------
 *
 * positions.h
 *		What the files of the consumer groups layer use of positions.c
 *		beyond groups/groups.h: forgetting a member's positions, which only
 *		its leave (consumer.c) may do, with the member's removal.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_GROUPS_POSITIONS_H
#define MQLOG_GROUPS_POSITIONS_H

#include "groups/groups.h"

extern void MqPositionsForget(const char *group, const char *member_id);

#endif							/* MQLOG_GROUPS_POSITIONS_H */
