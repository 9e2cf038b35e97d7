/*
 * values.c
 *	  The records a client sends: random letters and digits of the asked
 *	  size with a 9-byte key "k" and eight digits, as bench.py makes them,
 *	  or the records of a file bench.py wrote (the JSON-like events).
 *
 * A values file is a sequence of records, each a 4-byte big-endian length
 * and the value, then a 4-byte big-endian length and the key.
 */
#include "mqbench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/* xorshift64*: fast, and a seed gives the same records on every run */
uint64_t
BenchRandom(uint64_t *state)
{
	uint64_t	x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(2685821657736338717);
}

/* A key as bench.py writes them: "k" and eight digits, 9 bytes. */
int
BenchKey(char *buf, uint64_t *state)
{
	return snprintf(buf, 10, "k%08u", (unsigned) (BenchRandom(state) % 100000000));
}

static int
alloc_set(BenchSet *set, int nbatch, int batch, size_t bytes)
{
	size_t		n = (size_t) nbatch * batch;

	set->nbatch = nbatch;
	set->batch = batch;
	set->value = calloc(n, sizeof(char *));
	set->key = calloc(n, sizeof(char *));
	set->value_len = calloc(n, sizeof(int));
	set->key_len = calloc(n, sizeof(int));
	set->buf = malloc(bytes > 0 ? bytes : 1);
	return set->value && set->key && set->value_len && set->key_len && set->buf ? 0 : -1;
}

static uint32_t
be32(const unsigned char *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

/*
 * The records of a values file, in batches of opt->batch; a remainder
 * that does not fill a batch is left out.
 */
static int
load_file(const BenchOptions *opt, BenchSet *set, char *err, size_t errlen)
{
	FILE	   *f = fopen(opt->values_file, "rb");
	unsigned char *data;
	long		size;
	long		pos;
	long		n = 0;
	long		i;
	char	   *out;

	if (f == NULL)
	{
		snprintf(err, errlen, "%s: %s", opt->values_file, strerror(errno));
		return -1;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = malloc(size > 0 ? size : 1);
	if (data == NULL || fread(data, 1, size, f) != (size_t) size)
	{
		snprintf(err, errlen, "%s: cannot read", opt->values_file);
		fclose(f);
		free(data);
		return -1;
	}
	fclose(f);
	for (pos = 0; pos + 4 <= size; n++)
	{
		pos += 4 + be32(data + pos);
		if (pos + 4 > size)
			break;
		pos += 4 + be32(data + pos);
	}
	if (pos != size || n < opt->batch)
	{
		snprintf(err, errlen, "%s: not a values file of at least %d records", opt->values_file, opt->batch);
		free(data);
		return -1;
	}
	n -= n % opt->batch;
	if (alloc_set(set, (int) (n / opt->batch), opt->batch, size) < 0)
	{
		snprintf(err, errlen, "out of memory");
		free(data);
		return -1;
	}
	memcpy(set->buf, data, size);
	free(data);
	out = set->buf;
	for (i = 0, pos = 0; i < n; i++)
	{
		set->value_len[i] = (int) be32((unsigned char *) out + pos);
		set->value[i] = out + pos + 4;
		pos += 4 + set->value_len[i];
		set->key_len[i] = (int) be32((unsigned char *) out + pos);
		set->key[i] = out + pos + 4;
		pos += 4 + set->key_len[i];
	}
	return 0;
}

/*
 * nbatch batches of random records for one client, each client from a
 * seed of its own; from the values file instead when there is one.
 */
int
BenchSetMake(const BenchOptions *opt, int client, int nbatch, BenchSet *set,
			 char *err, size_t errlen)
{
	uint64_t	state = opt->seed * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t) client * 7919 + 1;
	size_t		n = (size_t) nbatch * opt->batch;
	size_t		i;
	char	   *p;

	memset(set, 0, sizeof(*set));
	if (opt->values_file)
		return load_file(opt, set, err, errlen);
	if (alloc_set(set, nbatch, opt->batch, n * (opt->value_bytes + 10)) < 0)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p = set->buf;
	for (i = 0; i < n; i++)
	{
		int			j;

		set->value[i] = p;
		set->value_len[i] = opt->value_bytes;
		for (j = 0; j < opt->value_bytes; j++)
			p[j] = alphabet[BenchRandom(&state) % (sizeof(alphabet) - 1)];
		p += opt->value_bytes;
		set->key[i] = p;
		set->key_len[i] = BenchKey(p, &state);
		p += 10;
	}
	return 0;
}

void
BenchSetFree(BenchSet *set)
{
	free(set->value);
	free(set->value_len);
	free(set->key);
	free(set->key_len);
	free(set->buf);
	memset(set, 0, sizeof(*set));
}
