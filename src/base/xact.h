/*-------------------------------------------------------------------------
 *
 * xact.h
 *		A unit of work in a transaction of its own (xact.c), whose ERROR is
 *		a result to report rather than the end of the caller's round.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_XACT_H
#define MQLOG_XACT_H

struct ErrorData;

extern bool MqRunInTransaction(void (*fn) (void *arg), void *arg,
							   struct ErrorData **error);

#endif							/* MQLOG_XACT_H */
