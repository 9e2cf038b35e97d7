/*-------------------------------------------------------------------------
 *
 * acl_settings.c
 *		The privilege layer's setting: mqlog.allow_everyone_if_no_acl_found,
 *		which acl.c's topic privilege check reads.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "acl/acl.h"

void
MqAclDefineSettings(void)
{
	DefineCustomBoolVariable("mqlog.allow_everyone_if_no_acl_found",
							 "Lets every role produce to, consume from and describe a topic that has no grants.",
							 "Kafka's allow.everyone.if.no.acl.found.  Off: a topic is its owner's and mqlog_admin's until mq_grant().",
							 &mqlog_allow_everyone_if_no_acl_found, false,
							 PGC_SUSET, 0, NULL, NULL, NULL);
}
