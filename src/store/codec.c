/*-------------------------------------------------------------------------
 *
 * codec.c
 *		Kafka's compression codecs for the records of a batch: gzip,
 *		snappy, lz4 and zstd, as Kafka's own clients write them.
 *
 * The records section of a batch (everything after the 61-byte header) is
 * compressed as one stream; the header says which codec.  The framing of
 * each codec is Kafka's:
 *
 *	gzip	a gzip member (RFC 1952), read with zlib's gzip/zlib detection
 *	snappy	the xerial framing Kafka's Java client writes (magic, version,
 *			then 4-byte big-endian block lengths, blocks of 32 kB input);
 *			raw snappy, which librdkafka writes, is read as well
 *	lz4		an LZ4 frame with independent 64 kB blocks (Kafka's Java
 *			reader refuses dependent blocks)
 *	zstd	a zstd frame
 *
 * The libraries allocate with malloc; every context is freed before an
 * error is raised.  Decompression is given a limit, and never grows its
 * output buffer past it: the output grows by doubling up to the limit and
 * then stops, and a stream with more to give fails with
 * ERRCODE_PROGRAM_LIMIT_EXCEEDED before a byte past the limit is
 * allocated.  So a small hostile batch (a "decompression bomb") costs at
 * most its caller's limit: the Kafka listener's per-request memory budget
 * (log/append.c), or, for a stored batch, what one palloc can hold.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "port/pg_bswap.h"
#include "utils/memutils.h"

#include "store/batch.h"

static const char *const codec_names[] = {"none", "gzip", "snappy", "lz4", "zstd"};

const char *
MqCodecName(int codec)
{
	if (codec == MQ_CODEC_PRODUCER)
		return "producer";
	if (codec < 0 || codec > MQ_CODEC_ZSTD)
		return "unknown";
	return codec_names[codec];
}

/* topic config compression.type -> codec; -2 if the name is unknown */
int
MqCodecFromName(const char *name)
{
	if (strcmp(name, "producer") == 0)
		return MQ_CODEC_PRODUCER;
	if (strcmp(name, "uncompressed") == 0)
		return MQ_CODEC_NONE;
	for (int c = MQ_CODEC_GZIP; c <= MQ_CODEC_ZSTD; c++)
		if (strcmp(name, codec_names[c]) == 0)
			return c;
	return -2;
}

static void
bad_data(MqCodec codec, int64 base_offset, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("could not decompress the %s-compressed batch at offset " INT64_FORMAT,
					codec_names[codec], base_offset),
			 errdetail("The %s data is damaged or truncated: %s.", codec_names[codec], why)));
}

/* the stream holds more than the caller's limit allows */
static void
too_large(MqCodec codec, int64 base_offset, Size limit)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("the %s-compressed batch at offset " INT64_FORMAT " decompresses to more than %zu bytes",
					codec_names[codec], base_offset, limit)));
}

/*
 * Room in dst for up to want more bytes, never past limit bytes in all:
 * the room given, 0 when dst already holds limit bytes.  The buffer
 * doubles, as a StringInfo's does, but stops at limit (plus the
 * terminating zero), so what is allocated never passes what is allowed.
 */
static Size
room_for(StringInfo dst, Size want, Size limit)
{
	Size		have = (Size) dst->len;
	Size		room = have >= limit ? 0 : Min(want, limit - have);

	if (have + room + 1 > (Size) dst->maxlen)
	{
		Size		newmax = Max((Size) dst->maxlen * 2, have + room + 1);

		newmax = Min(newmax, limit + 1);
		dst->data = repalloc(dst->data, newmax);
		dst->maxlen = (int) newmax;
	}
	return room;
}

/* ------------------------------------------------------------------------
 * gzip
 * ------------------------------------------------------------------------ */

static void
gzip_compress(const char *src, Size len, StringInfo dst)
{
	z_stream	zs;
	uLong		bound;

	memset(&zs, 0, sizeof(zs));
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
					 Z_DEFAULT_STRATEGY) != Z_OK)
		elog(ERROR, "mqlog: could not initialize gzip compression");
	bound = deflateBound(&zs, len);
	enlargeStringInfo(dst, (int) bound);
	zs.next_in = (Bytef *) src;
	zs.avail_in = len;
	zs.next_out = (Bytef *) dst->data + dst->len;
	zs.avail_out = bound;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
	{
		deflateEnd(&zs);
		elog(ERROR, "mqlog: gzip compression failed");
	}
	dst->len += zs.total_out;
	deflateEnd(&zs);
}

static void
gzip_decompress(const char *src, Size len, StringInfo dst, int64 base_offset, Size limit)
{
	z_stream	zs;
	int			ret = Z_OK;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 15 + 32) != Z_OK)
		elog(ERROR, "mqlog: could not initialize gzip decompression");
	zs.next_in = (Bytef *) src;
	zs.avail_in = len;
	while (ret != Z_STREAM_END)
	{
		Size		room = room_for(dst, Max(len * 4, 65536), limit);

		if (room == 0)
		{
			inflateEnd(&zs);
			too_large(MQ_CODEC_GZIP, base_offset, limit);
		}
		zs.next_out = (Bytef *) dst->data + dst->len;
		zs.avail_out = room;
		ret = inflate(&zs, Z_NO_FLUSH);
		dst->len += room - zs.avail_out;
		if (ret != Z_OK && ret != Z_STREAM_END)
		{
			const char *why = zs.msg ? pstrdup(zs.msg) : "the stream ends early";

			inflateEnd(&zs);
			bad_data(MQ_CODEC_GZIP, base_offset, why);
		}
		if (ret == Z_OK && zs.avail_in == 0 && zs.avail_out != 0)
		{
			inflateEnd(&zs);
			bad_data(MQ_CODEC_GZIP, base_offset, "the stream ends early");
		}
		/* another member follows, as a concatenating writer makes them */
		if (ret == Z_STREAM_END && zs.avail_in > 0)
		{
			if (inflateReset(&zs) != Z_OK)
			{
				inflateEnd(&zs);
				bad_data(MQ_CODEC_GZIP, base_offset, "a member after the first does not start");
			}
			ret = Z_OK;
		}
	}
	inflateEnd(&zs);
}

/* ------------------------------------------------------------------------
 * snappy, in xerial's framing
 * ------------------------------------------------------------------------ */

static const char xerial_magic[8] = {(char) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

#define XERIAL_HEADER	16		/* magic, version, compatible version */
#define XERIAL_BLOCK	(32 * 1024)

static void
snappy_compress_xerial(const char *src, Size len, StringInfo dst)
{
	uint32		v = pg_hton32(1);

	appendBinaryStringInfo(dst, xerial_magic, 8);
	appendBinaryStringInfo(dst, (char *) &v, 4);	/* version */
	appendBinaryStringInfo(dst, (char *) &v, 4);	/* compatible version */
	for (Size done = 0; done < len; done += XERIAL_BLOCK)
	{
		size_t		in = Min(len - done, (Size) XERIAL_BLOCK);
		size_t		out = snappy_max_compressed_length(in);
		uint32		be;

		enlargeStringInfo(dst, (int) (out + 4));
		if (snappy_compress(src + done, in, dst->data + dst->len + 4, &out) != SNAPPY_OK)
			elog(ERROR, "mqlog: snappy compression failed");
		be = pg_hton32((uint32) out);
		memcpy(dst->data + dst->len, &be, 4);
		dst->len += 4 + out;
	}
}

static void
snappy_raw_decompress(const char *src, Size len, StringInfo dst, int64 base_offset,
					  Size limit)
{
	size_t		out;

	if (snappy_uncompressed_length(src, len, &out) != SNAPPY_OK)
		bad_data(MQ_CODEC_SNAPPY, base_offset, "a block has a bad length header");
	/* checked before room_for, which would allocate up to the limit */
	if (out > limit - Min((Size) dst->len, limit))
		too_large(MQ_CODEC_SNAPPY, base_offset, limit);
	(void) room_for(dst, out, limit);	/* all of out, now that it fits */
	if (snappy_uncompress(src, len, dst->data + dst->len, &out) != SNAPPY_OK)
		bad_data(MQ_CODEC_SNAPPY, base_offset, "a block does not decode");
	dst->len += out;
}

static void
snappy_decompress(const char *src, Size len, StringInfo dst, int64 base_offset, Size limit)
{
	Size		pos = XERIAL_HEADER;

	if (len < XERIAL_HEADER || memcmp(src, xerial_magic, 8) != 0)
	{
		snappy_raw_decompress(src, len, dst, base_offset, limit);
		return;
	}
	while (pos < len)
	{
		uint32		blen;

		if (len - pos < 4)
			bad_data(MQ_CODEC_SNAPPY, base_offset, "a block length is cut off");
		memcpy(&blen, src + pos, 4);
		blen = pg_ntoh32(blen);
		pos += 4;
		if (blen > len - pos)
			bad_data(MQ_CODEC_SNAPPY, base_offset, "a block runs past the end");
		snappy_raw_decompress(src + pos, blen, dst, base_offset, limit);
		pos += blen;
	}
}

/* ------------------------------------------------------------------------
 * lz4 frames
 * ------------------------------------------------------------------------ */

static void
lz4_compress(const char *src, Size len, StringInfo dst)
{
	LZ4F_preferences_t prefs;
	size_t		bound;
	size_t		n;

	memset(&prefs, 0, sizeof(prefs));
	prefs.frameInfo.blockSizeID = LZ4F_max64KB;
	prefs.frameInfo.blockMode = LZ4F_blockIndependent;
	bound = LZ4F_compressFrameBound(len, &prefs);
	enlargeStringInfo(dst, (int) bound);
	n = LZ4F_compressFrame(dst->data + dst->len, bound, src, len, &prefs);
	if (LZ4F_isError(n))
		elog(ERROR, "mqlog: lz4 compression failed: %s", LZ4F_getErrorName(n));
	dst->len += n;
}

static void
lz4_decompress(const char *src, Size len, StringInfo dst, int64 base_offset, Size limit)
{
	LZ4F_dctx  *dctx;
	size_t		ret = 1;
	Size		pos = 0;

	if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		elog(ERROR, "mqlog: could not initialize lz4 decompression");
	/* ret is 0 at the end of a frame; more input is another frame */
	while (pos < len || ret != 0)
	{
		size_t		in = len - pos;
		size_t		out = room_for(dst, 65536, limit);

		if (out == 0)
		{
			LZ4F_freeDecompressionContext(dctx);
			too_large(MQ_CODEC_LZ4, base_offset, limit);
		}
		ret = LZ4F_decompress(dctx, dst->data + dst->len, &out, src + pos, &in, NULL);
		if (LZ4F_isError(ret))
		{
			const char *why = pstrdup(LZ4F_getErrorName(ret));

			LZ4F_freeDecompressionContext(dctx);
			bad_data(MQ_CODEC_LZ4, base_offset, why);
		}
		pos += in;
		dst->len += out;
		if (in == 0 && out == 0)
			break;				/* no progress: the input is cut off */
	}
	LZ4F_freeDecompressionContext(dctx);
	if (ret != 0)
		bad_data(MQ_CODEC_LZ4, base_offset, "the frame ends early");
}

/* ------------------------------------------------------------------------
 * zstd
 * ------------------------------------------------------------------------ */

static void
zstd_compress(const char *src, Size len, StringInfo dst)
{
	size_t		bound = ZSTD_compressBound(len);
	size_t		n;

	enlargeStringInfo(dst, (int) bound);
	n = ZSTD_compress(dst->data + dst->len, bound, src, len, ZSTD_CLEVEL_DEFAULT);
	if (ZSTD_isError(n))
		elog(ERROR, "mqlog: zstd compression failed: %s", ZSTD_getErrorName(n));
	dst->len += n;
}

static void
zstd_decompress(const char *src, Size len, StringInfo dst, int64 base_offset, Size limit)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer in = {src, len, 0};
	size_t		ret = 1;

	if (ds == NULL)
		elog(ERROR, "mqlog: could not initialize zstd decompression");
	ZSTD_initDStream(ds);

	/*
	 * ret is 0 when a frame is complete and everything it holds has been
	 * written out; more input may start another frame.  An output that
	 * fills the buffer exactly must not be taken for more to come.
	 */
	while (in.pos < in.size || ret != 0)
	{
		ZSTD_outBuffer out;
		Size		room = room_for(dst, ZSTD_DStreamOutSize(), limit);

		if (room == 0)
		{
			ZSTD_freeDStream(ds);
			too_large(MQ_CODEC_ZSTD, base_offset, limit);
		}
		out.dst = dst->data + dst->len;
		out.size = room;
		out.pos = 0;
		ret = ZSTD_decompressStream(ds, &out, &in);
		if (ZSTD_isError(ret))
		{
			const char *why = pstrdup(ZSTD_getErrorName(ret));

			ZSTD_freeDStream(ds);
			bad_data(MQ_CODEC_ZSTD, base_offset, why);
		}
		dst->len += out.pos;
		/* all input read and the output not full: nothing more can come */
		if (in.pos == in.size && out.pos < out.size)
			break;
	}
	ZSTD_freeDStream(ds);
	if (ret != 0)
		bad_data(MQ_CODEC_ZSTD, base_offset, "the frame ends early");
}

/* ------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------ */

/* Append src compressed with codec to dst. */
void
MqCompress(MqCodec codec, const char *src, Size len, StringInfo dst)
{
	switch (codec)
	{
		case MQ_CODEC_GZIP:
			gzip_compress(src, len, dst);
			break;
		case MQ_CODEC_SNAPPY:
			snappy_compress_xerial(src, len, dst);
			break;
		case MQ_CODEC_LZ4:
			lz4_compress(src, len, dst);
			break;
		case MQ_CODEC_ZSTD:
			zstd_compress(src, len, dst);
			break;
		case MQ_CODEC_NONE:
			appendBinaryStringInfo(dst, src, len);
			break;
	}
	dst->data[dst->len] = '\0';
}

/*
 * Append src decompressed to dst; bad data is an error naming the offset,
 * and so is output that would make dst hold more than limit bytes (at
 * most MaxAllocSize - 1).
 */
void
MqDecompress(MqCodec codec, const char *src, Size len, StringInfo dst, int64 base_offset,
			 Size limit)
{
	Assert(limit < MaxAllocSize);
	switch (codec)
	{
		case MQ_CODEC_GZIP:
			gzip_decompress(src, len, dst, base_offset, limit);
			break;
		case MQ_CODEC_SNAPPY:
			snappy_decompress(src, len, dst, base_offset, limit);
			break;
		case MQ_CODEC_LZ4:
			lz4_decompress(src, len, dst, base_offset, limit);
			break;
		case MQ_CODEC_ZSTD:
			zstd_decompress(src, len, dst, base_offset, limit);
			break;
		case MQ_CODEC_NONE:
			if (len > limit - Min((Size) dst->len, limit))
				too_large(codec, base_offset, limit);
			appendBinaryStringInfo(dst, src, len);
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("the batch at offset " INT64_FORMAT " names unknown compression codec %d",
							base_offset, (int) codec)));
	}
}
