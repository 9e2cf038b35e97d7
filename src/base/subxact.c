/*-------------------------------------------------------------------------
 *
 * subxact.c
 *		Run fn(arg) in a subtransaction: mq_verify's decode of one batch
 *		(a batch that does not decode is a problem to report) and the
 *		Kafka listener's work on one partition (an ERROR is that
 *		partition's Kafka error code, the rest of the request goes on).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"

#include "base/subxact.h"

/*
 * true if fn returned; otherwise its subtransaction is rolled back (its
 * writes undone, its locks released) and *error, in the caller's memory
 * context, says why.  fn runs in the caller's memory context, so what it
 * allocates outlives the subtransaction.
 */
bool
MqRunInSubtransaction(void (*fn) (void *arg), void *arg, ErrorData **error)
{
	MemoryContext caller = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
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
