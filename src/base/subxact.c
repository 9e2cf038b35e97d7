/*-------------------------------------------------------------------------
 *
 * subxact.c
 *		Run fn(arg) in a subtransaction: mq_verify's decode of one batch
 *		(a batch that does not decode is a problem to report) and the
 *		Kafka listener's work on one partition (an ERROR is that
 *		partition's Kafka error code, the rest of the request goes on),
 *		or as a dry run rolled back whatever its outcome (CreateTopics
 *		with validate_only).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"

#include "base/subxact.h"

/*
 * Both forms: fn in a subtransaction that, when fn returns, is released
 * (keep) or rolled back all the same.
 */
static bool
run(void (*fn) (void *arg), void *arg, bool keep, ErrorData **error)
{
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller);
	PG_TRY();
	{
		fn(arg);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller);
		*error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller);
	CurrentResourceOwner = owner;
	return ok;
}

/*
 * true if fn returned; otherwise its subtransaction is rolled back (its
 * writes undone, its locks released) and *error, in the caller's memory
 * context, says why.  fn runs in the caller's memory context, so what it
 * allocates outlives the subtransaction.
 */
bool
MqRunInSubtransaction(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	return run(fn, arg, true, error);
}

/*
 * As MqRunInSubtransaction, but what fn did is rolled back even when it
 * returned: a dry run that checks everything the real one would (the
 * Kafka listener's CreateTopics with validate_only).
 */
bool
MqTryInSubtransaction(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	return run(fn, arg, false, error);
}
