/*-------------------------------------------------------------------------
 *
 * spi.h
 *		SPI with a pinned search_path (spi.c): the lowest layer, used by
 *		every module that queries the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef MQLOG_SPI_H
#define MQLOG_SPI_H

/*
 * A stretch of SPI work with search_path pinned to pg_catalog, pg_temp,
 * optionally as the extension owner.  Every SPI query of mqlog runs inside
 * one; an error in between is unwound by transaction abort.
 */
typedef struct MqSpi
{
	bool		as_owner;
	Oid			saved_user;
	int			saved_sec;
	int			guc_level;
} MqSpi;

extern Oid	MqExtensionOwner(void);
extern void MqSpiBegin(MqSpi *spi, bool as_owner);
extern void MqSpiEnd(MqSpi *spi);
extern void MqWorkerPinSearchPath(void);

/* A bigint[] argument of an SPI query: the n values. */
extern Datum MqSpiInt8Array(const int64 *values, int n);

#endif							/* MQLOG_SPI_H */
