/*-------------------------------------------------------------------------
 *
 * spi.c
 *		SPI with search_path pinned to pg_catalog, pg_temp, as the caller or
 *		as the extension owner; the workers' own search_path.
 *
 * Every SPI query of mqlog runs between MqSpiBegin and MqSpiEnd and names
 * every object with its schema, so that no role can shadow a function or
 * an operator that mqlog's queries call.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "base/spi.h"

#include "base/spi.h"

/* The role that owns the extension's objects: the owner of schema mqlog. */
Oid
MqExtensionOwner(void)
{
	Oid			nsp = get_namespace_oid("mqlog", false);
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

void
MqSpiBegin(MqSpi *spi, bool as_owner)
{
	spi->as_owner = as_owner;
	if (as_owner)
	{
		Oid			owner = MqExtensionOwner();

		GetUserIdAndSecContext(&spi->saved_user, &spi->saved_sec);
		SetUserIdAndSecContext(owner, spi->saved_sec | SECURITY_LOCAL_USERID_CHANGE);
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "mqlog: SPI_connect failed");
	spi->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

void
MqSpiEnd(MqSpi *spi)
{
	AtEOXact_GUC(true, spi->guc_level);
	SPI_finish();
	if (spi->as_owner)
		SetUserIdAndSecContext(spi->saved_user, spi->saved_sec);
}

/*
 * A background worker connects with its database's and role's settings,
 * which a database owner controls (ALTER DATABASE ... SET search_path), and
 * it runs as a superuser: it pins its own search_path before any query.
 */
void
MqWorkerPinSearchPath(void)
{
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

Datum
MqSpiInt8Array(const int64 *values, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	ArrayType  *array;

	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(values[i]);
	array = construct_array(elems, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	pfree(elems);
	return PointerGetDatum(array);
}
