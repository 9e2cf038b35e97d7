/*-------------------------------------------------------------------------
 *
 * kafka.h
 *		The Kafka wire protocol listener: what mqlog.c calls to define its
 *		settings and register its background worker, the address this
 *		node's record in the cluster names it by (kafka_settings.c), and
 *		the transaction coordinator's step of each maintenance pass
 *		(txn_coordinator.c, handed to workers/ by mqlog.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_KAFKA_H
#define MQLOG_KAFKA_H

extern void MqKafkaDefineSettings(void);
extern void MqKafkaRegister(void);
extern const char *MqKafkaListener(void);
extern bool MqKafkaTxnMaintain(int round);

#endif							/* MQLOG_KAFKA_H */
