/*-------------------------------------------------------------------------
 *
 * subxact.h
 *		A unit of work in a subtransaction of its own (subxact.c), whose
 *		ERROR is a result to report rather than the end of the caller.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_SUBXACT_H
#define MQLOG_SUBXACT_H

struct ErrorData;

extern bool MqRunInSubtransaction(void (*fn) (void *arg), void *arg,
								  struct ErrorData **error);
extern bool MqTryInSubtransaction(void (*fn) (void *arg), void *arg,
								  struct ErrorData **error);

#endif							/* MQLOG_SUBXACT_H */
