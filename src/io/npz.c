/*
 * The zip of an .npz file (optim/npy.h): the end of central directory
 * record (ZIP64's too, which np.savez may write), each central directory
 * entry, its local header, and the member's bytes, stored or raw deflate
 * (zlib, windowBits -15), checked against the entry's CRC-32 and sizes.
 *
 * Every offset and size read from the file is checked against the bytes
 * actually there before use (APPNOTE.TXT 4.3). A deflated member may
 * claim at most 1032 times its compressed size (deflate's largest ratio),
 * so a small file cannot make the reader allocate much.
 */
#include "io/npy_impl.h"

#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct zip {
    const unsigned char *p;
    size_t len;
    const char *src;
    uint64_t entries, cd_at, cd_size, cd_end; /* cd_end: where the central directory may end */
} zip;

typedef struct entry {
    char name[256];
    uint32_t crc, method, flags;
    uint64_t csize, usize, local;
} entry;

/* The end of central directory record: the last PK\5\6 whose comment
 * length reaches exactly the end of the file. */
static int find_eocd(const zip *z, size_t *at)
{
    if (z->len < 22) return 0;
    size_t lo = z->len - 22 > 65535 ? z->len - 22 - 65535 : 0;
    for (size_t i = z->len - 22 + 1; i-- > lo;)
        if (optim__le32(z->p + i) == 0x06054b50 && i + 22 + optim__le16(z->p + i + 20) == z->len)
            return *at = i, 1;
    return 0;
}

static int zip64_eocd(zip *z, size_t eocd, optim_error *err)
{
    if (eocd < 20 || optim__le32(z->p + eocd - 20) != 0x07064b50)
        return optim__err(err, OPTIM_EFORMAT, "%s: zip64 end of central directory locator missing",
                          z->src);
    uint64_t at = optim__le64(z->p + eocd - 12);
    if (at > eocd - 20 || eocd - 20 - at < 56 || optim__le32(z->p + at) != 0x06064b50)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: zip64 end of central directory at %llu is outside the file", z->src,
                          (unsigned long long)at);
    if (optim__le32(z->p + at + 16) || optim__le32(z->p + at + 20))
        return optim__err(err, OPTIM_ENOTSUP, "%s: split (multi-disk) zip", z->src);
    z->entries = optim__le64(z->p + at + 32);
    z->cd_size = optim__le64(z->p + at + 40);
    z->cd_at = optim__le64(z->p + at + 48);
    z->cd_end = at;
    return OPTIM_OK;
}

static int directory(zip *z, optim_error *err)
{
    size_t e;
    if (!find_eocd(z, &e))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: zip end of central directory record not found (truncated?)", z->src);
    const unsigned char *r = z->p + e;
    if (optim__le16(r + 4) || optim__le16(r + 6))
        return optim__err(err, OPTIM_ENOTSUP, "%s: split (multi-disk) zip", z->src);
    z->entries = optim__le16(r + 10), z->cd_size = optim__le32(r + 12);
    z->cd_at = optim__le32(r + 16), z->cd_end = e;
    int rc;
    if ((z->entries == 0xFFFF || z->cd_size == 0xFFFFFFFF || z->cd_at == 0xFFFFFFFF) &&
        (rc = zip64_eocd(z, e, err)))
        return rc;
    if (z->cd_at > z->cd_end || z->cd_size > z->cd_end - z->cd_at)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: central directory (offset %llu, %llu bytes) outside the file's %zu",
                          z->src, (unsigned long long)z->cd_at, (unsigned long long)z->cd_size,
                          z->len);
    if (z->entries > z->cd_size / 46)
        return optim__err(err, OPTIM_EFORMAT, "%s: %llu entries cannot fit %llu directory bytes",
                          z->src, (unsigned long long)z->entries, (unsigned long long)z->cd_size);
    return OPTIM_OK;
}

/* ZIP64's extended information field (0x0001) in extra[0 .. n): the
 * values that the entry set to 0xFFFFFFFF, in the order usize, csize, local. */
static int zip64_extra(const zip *z, const unsigned char *x, size_t n, entry *en, optim_error *err)
{
    uint64_t *want[3] = {en->usize == 0xFFFFFFFF ? &en->usize : NULL,
                         en->csize == 0xFFFFFFFF ? &en->csize : NULL,
                         en->local == 0xFFFFFFFF ? &en->local : NULL};
    while (n >= 4) {
        size_t id = optim__le16(x), size = optim__le16(x + 2);
        if (size > n - 4) break;
        if (id == 1) {
            size_t at = 4;
            for (int i = 0; i < 3; i++)
                if (want[i]) {
                    if (at + 8 > size + 4) break;
                    *want[i] = optim__le64(x + at), at += 8, want[i] = NULL;
                }
        }
        x += 4 + size, n -= 4 + size;
    }
    if (want[0] || want[1] || want[2])
        return optim__err(err, OPTIM_EFORMAT, "%s: member '%s': zip64 sizes missing", z->src,
                          en->name);
    return OPTIM_OK;
}

/* The central directory entry at *at (advanced past it). */
static int read_entry(const zip *z, uint64_t *at, entry *en, optim_error *err)
{
    uint64_t end = z->cd_at + z->cd_size;
    const unsigned char *r = z->p + *at;
    if (end - *at < 46 || optim__le32(r) != 0x02014b50)
        return optim__err(err, OPTIM_EFORMAT, "%s: bad central directory entry at offset %llu",
                          z->src, (unsigned long long)*at);
    size_t nlen = optim__le16(r + 28), xlen = optim__le16(r + 30), clen = optim__le16(r + 32);
    if (end - *at - 46 < nlen + xlen + clen)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: central directory entry at offset %llu runs past the directory",
                          z->src, (unsigned long long)*at);
    if (nlen >= sizeof en->name || memchr(r + 46, 0, nlen))
        return optim__err(err, OPTIM_EFORMAT, "%s: member name at offset %llu too long or has NUL",
                          z->src, (unsigned long long)*at);
    memcpy(en->name, r + 46, nlen);
    en->name[nlen] = '\0';
    en->flags = optim__le16(r + 8), en->method = optim__le16(r + 10);
    en->crc = optim__le32(r + 16), en->csize = optim__le32(r + 20);
    en->usize = optim__le32(r + 24), en->local = optim__le32(r + 42);
    *at += 46 + nlen + xlen + clen;
    return zip64_extra(z, r + 46 + nlen, xlen, en, err);
}

/* Where en's data begins, after its local header; checked to end before the directory. */
static int data_of(const zip *z, const entry *en, uint64_t *data, optim_error *err)
{
    const unsigned char *r = z->p + en->local;
    if (en->local > z->cd_at || z->cd_at - en->local < 30 || optim__le32(r) != 0x04034b50)
        return optim__err(err, OPTIM_EFORMAT, "%s: member '%s': no local header at offset %llu",
                          z->src, en->name, (unsigned long long)en->local);
    uint64_t at = en->local + 30 + optim__le16(r + 26) + optim__le16(r + 28);
    if (at > z->cd_at || en->csize > z->cd_at - at)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: member '%s': %llu bytes at offset %llu run past the data (%llu)",
                          z->src, en->name, (unsigned long long)en->csize, (unsigned long long)at,
                          (unsigned long long)z->cd_at);
    *data = at;
    return OPTIM_OK;
}

static int inflate_member(const zip *z, const entry *en, const unsigned char *in,
                          unsigned char *out, optim_error *err)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -15) != Z_OK)
        return optim__err(err, OPTIM_ENOMEM, "%s: cannot start zlib", z->src);
    int rc = Z_OK;
    uint64_t in_left = en->csize, out_left = en->usize;
    s.next_in = (unsigned char *)in, s.next_out = out;
    while (rc == Z_OK) {
        uInt ci = in_left > 1u << 30 ? 1u << 30 : (uInt)in_left;
        uInt co = out_left > 1u << 30 ? 1u << 30 : (uInt)out_left;
        s.avail_in = ci, s.avail_out = co;
        rc = inflate(&s, Z_NO_FLUSH);
        in_left -= ci - s.avail_in, out_left -= co - s.avail_out;
        if (rc == Z_BUF_ERROR && (in_left || out_left) && (ci != s.avail_in || co != s.avail_out))
            rc = Z_OK;
    }
    inflateEnd(&s);
    if (rc != Z_STREAM_END || out_left)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: member '%s': deflate data corrupt or shorter than its size %llu",
                          z->src, en->name, (unsigned long long)en->usize);
    return OPTIM_OK;
}

/* en's uncompressed bytes into *out (malloc'd), CRC checked. */
static int member_bytes(const zip *z, const entry *en, unsigned char **out, optim_error *err)
{
    uint64_t at = 0;
    int rc;
    if (en->flags & 1)
        return optim__err(err, OPTIM_ENOTSUP, "%s: member '%s' is encrypted", z->src, en->name);
    if (en->method != 0 && en->method != 8)
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: member '%s': compression method %u (only stored and deflate)",
                          z->src, en->name, (unsigned)en->method);
    if ((rc = data_of(z, en, &at, err))) return rc;
    if ((en->method == 0 && en->usize != en->csize) ||
        (en->method == 8 && en->usize / 1032 > en->csize + 1) || en->usize > SIZE_MAX - 8)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: member '%s': size %llu impossible for %llu bytes stored", z->src,
                          en->name, (unsigned long long)en->usize, (unsigned long long)en->csize);
    unsigned char *b = malloc((size_t)en->usize + 1);
    if (!b)
        return optim__err(err, OPTIM_ENOMEM, "%s: member '%s': out of memory", z->src, en->name);
    if (en->method == 0) memcpy(b, z->p + at, (size_t)en->usize);
    else if ((rc = inflate_member(z, en, z->p + at, b, err))) return free(b), rc;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t k = 0; k < en->usize; k += 1u << 30)
        crc = crc32(crc, b + k, (uInt)(en->usize - k < 1u << 30 ? en->usize - k : 1u << 30));
    if (crc != en->crc) {
        free(b);
        return optim__err(err, OPTIM_EFORMAT, "%s: member '%s': CRC-32 %08lx, the entry says %08lx",
                          z->src, en->name, (unsigned long)crc, (unsigned long)en->crc);
    }
    *out = b;
    return OPTIM_OK;
}

static int add_member(optim_npy *f, const zip *z, entry *en, optim_error *err)
{
    size_t n = strlen(en->name);
    if (n < 4 || strcmp(en->name + n - 4, ".npy") != 0)
        return optim__err(err, OPTIM_EFORMAT, "%s: member '%s' is not a .npy file", z->src,
                          en->name);
    en->name[n - 4] = '\0';
    if (optim_npy_find(f, en->name))
        return optim__err(err, OPTIM_EFORMAT, "%s: array '%s' appears twice", z->src, en->name);
    unsigned char *b = NULL;
    int rc = member_bytes(z, en, &b, err);
    if (rc) return rc;
    rc = optim__npy_add(f, b, (size_t)en->usize, z->src, en->name, err);
    free(b);
    return rc;
}

int optim__npz_parse(optim_npy *f, const unsigned char *p, size_t len, const char *src,
                     optim_error *err)
{
    zip z = {p, len, src, 0, 0, 0, 0};
    int rc = directory(&z, err);
    uint64_t at = z.cd_at;
    for (uint64_t i = 0; i < z.entries && !rc; i++) {
        entry en;
        if (!(rc = read_entry(&z, &at, &en, err))) rc = add_member(f, &z, &en, err);
    }
    return rc;
}
