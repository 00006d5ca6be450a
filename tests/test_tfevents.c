/* tools/crc32c.c and tools/tfevents.c (TensorBoard event files written by
 * hand): CRC-32C against published vectors (RFC 3720 B.4, and "123456789"),
 * computed here a second way (bit at a time); the TFRecord framing read
 * back with its masked CRCs; each Event decoded by a protobuf wire-format
 * reader written here, with the field numbers of tensorboard's event.proto
 * (wall_time 1, step 2, file_version 3, summary 5) and summary.proto
 * (Summary.value 1, Value.tag 1, Value.simple_value 2). */
#include "../tools/tfevents.c" /* first: it sets _POSIX_C_SOURCE */

#include "../tools/crc32c.c"

#include <math.h>
#include <stdlib.h>

#include "optim/optim.h"
#include "testutil.h"

static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
    }
    return ~c;
}

OPTIM_TEST(test_crc32c_vectors)
{
    unsigned char b[32];
    assert_eq(optim_tool_crc32c("123456789", 9), 0xE3069283u);
    assert_eq(optim_tool_crc32c("", 0), 0u);
    memset(b, 0, sizeof b);
    assert_eq(optim_tool_crc32c(b, 32), 0x8A9136AAu);
    memset(b, 0xFF, sizeof b);
    assert_eq(optim_tool_crc32c(b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    assert_eq(optim_tool_crc32c(b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    assert_eq(optim_tool_crc32c(b, 32), 0x113FDB5Cu);
    unsigned char r[257];
    for (int i = 0; i < 257; i++) r[i] = (unsigned char)(i * 37 + 11);
    for (size_t n = 0; n <= sizeof r; n += 17)
        assert_eq(optim_tool_crc32c(r, n), crc_bitwise(r, n));
    /* the mask: rotate right by 15, add 0xa282ead8 (mod 2^32) */
    assert_eq(optim_tool_crc32c_mask(0), 0xa282ead8u);
    assert_eq(optim_tool_crc32c_mask(1), 0xa282ead8u + (1u << 17));
    assert_eq(optim_tool_crc32c_mask(0x8000u), 0xa282ead8u + 1u);
    assert_eq(optim_tool_crc32c_mask(0xFFFFFFFFu), 0xa282ead7u);
}

/* ---- a protobuf wire-format reader --------------------------------------------------- */

typedef struct rd {
    const unsigned char *p, *end;
} rd;

static uint64_t varint(rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        assert_true(r->p < r->end);
        unsigned char c = *r->p++;
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) return v;
    }
    fail_msg("varint longer than 10 bytes");
    return 0;
}

static uint64_t le(rd *r, int bytes)
{
    assert_true(r->end - r->p >= bytes);
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += bytes;
    return v;
}

static rd sub(rd *r)
{
    uint64_t n = varint(r);
    assert_true(n <= (uint64_t)(r->end - r->p));
    rd s = {r->p, r->p + n};
    r->p += n;
    return s;
}

typedef struct event {
    double wall_time;
    int64_t step;
    char version[64], tag[600];
    float value;
    int has_summary;
} event;

static void read_value(rd v, event *e)
{
    while (v.p < v.end) {
        uint64_t key = varint(&v);
        if (key == (1 << 3 | 2)) { /* tag: string */
            rd t = sub(&v);
            memcpy(e->tag, t.p, (size_t)(t.end - t.p));
            e->tag[t.end - t.p] = '\0';
        } else {
            assert_eq(key, 2 << 3 | 5); /* simple_value: fixed32 float */
            uint32_t bits = (uint32_t)le(&v, 4);
            memcpy(&e->value, &bits, 4);
        }
    }
}

static event decode(const unsigned char *p, size_t n)
{
    event e;
    memset(&e, 0, sizeof e);
    rd r = {p, p + n};
    while (r.p < r.end) {
        uint64_t key = varint(&r);
        if (key == (1 << 3 | 1)) { /* wall_time: fixed64 double */
            uint64_t bits = le(&r, 8);
            memcpy(&e.wall_time, &bits, 8);
        } else if (key == (2 << 3 | 0)) { /* step: int64 varint */
            e.step = (int64_t)varint(&r);
        } else if (key == (3 << 3 | 2)) { /* file_version */
            rd s = sub(&r);
            memcpy(e.version, s.p, (size_t)(s.end - s.p));
        } else {
            assert_eq(key, 5 << 3 | 2); /* summary: Summary */
            rd s = sub(&r);
            assert_eq(varint(&s), 1 << 3 | 2); /* Summary.value: Value */
            read_value(sub(&s), &e);
            assert_true(s.p == s.end); /* one value */
            e.has_summary = 1;
        }
    }
    return e;
}

OPTIM_TEST(test_event_encoding)
{
    unsigned char buf[700];
    size_t n = optim_tool_tfevent_encode(buf, sizeof buf, 1234.5, 0, "brain.Event:2", NULL, 0);
    /* by hand: 09 <8 bytes of 1234.5> 10 00 1a 0d "brain.Event:2" */
    assert_eq(n, 9 + 2 + 2 + 13);
    assert_eq(buf[0], 0x09), assert_eq(buf[9], 0x10), assert_eq(buf[10], 0);
    assert_eq(buf[11], 0x1a), assert_eq(buf[12], 13);
    event e = decode(buf, n);
    assert_same(e.wall_time, 1234.5);
    assert_string_equal(e.version, "brain.Event:2");
    const int64_t steps[4] = {1, 300, (int64_t)1 << 40, -1};
    const float values[4] = {0.25f, -3.5e-7f, 1e30f, INFINITY};
    for (int i = 0; i < 4; i++) {
        n = optim_tool_tfevent_encode(buf, sizeof buf, 1.7e9 + i, steps[i], NULL, "grad_norm",
                                      values[i]);
        assert_gt(n, 0);
        e = decode(buf, n);
        assert_same(e.wall_time, 1.7e9 + i);
        assert_eq(e.step, steps[i]);
        assert_string_equal(e.tag, "grad_norm");
        assert_same(e.value, values[i]);
        assert_true(e.has_summary);
    }
    char tag[300];
    memset(tag, 'a', sizeof tag - 1), tag[sizeof tag - 1] = '\0';
    n = optim_tool_tfevent_encode(buf, sizeof buf, 0, 7, NULL, tag, 2); /* two-byte lengths */
    e = decode(buf, n);
    assert_string_equal(e.tag, tag);
    assert_eq(optim_tool_tfevent_encode(buf, 10, 0, 7, NULL, "loss", 2), 0); /* too small */
}

/* Reads one TFRecord from f, checking both CRCs; the data's length or -1 at EOF. */
static long read_record(FILE *f, unsigned char *data, size_t cap)
{
    unsigned char head[12], tail[4];
    size_t got = fread(head, 1, 12, f);
    if (got == 0) return -1;
    assert_eq(got, 12);
    uint64_t n = 0;
    uint32_t c = 0, d = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)head[i] << (8 * i);
    for (int i = 0; i < 4; i++) c |= (uint32_t)head[8 + i] << (8 * i);
    uint32_t hc = crc_bitwise(head, 8);
    assert_eq(c, ((hc >> 15) | (hc << 17)) + 0xa282ead8u);
    assert_true(n <= cap);
    assert_eq(fread(data, 1, (size_t)n, f), n);
    assert_eq(fread(tail, 1, 4, f), 4);
    for (int i = 0; i < 4; i++) d |= (uint32_t)tail[i] << (8 * i);
    uint32_t dc = crc_bitwise(data, (size_t)n);
    assert_eq(d, ((dc >> 15) | (dc << 17)) + 0xa282ead8u);
    return (long)n;
}

OPTIM_TEST(test_event_file)
{
    char dir[] = "/tmp/optim_tfevents_XXXXXX", nested[128], msg[512];
    assert_non_null(mkdtemp(dir));
    snprintf(nested, sizeof nested, "%s/a/b", dir);
    tfevents w;
    assert_int_equal(optim_tool_tfevents_open(&w, nested, msg, sizeof msg), 0);
    char prefix[200];
    snprintf(prefix, sizeof prefix, "%s/events.out.tfevents.", nested);
    assert_int_equal(strncmp(w.path, prefix, strlen(prefix)), 0);
    for (int s = 1; s <= 3; s++)
        assert_int_equal(optim_tool_tfevents_scalar(&w, s, "loss", 1.0 / s, msg, sizeof msg), 0);
    assert_int_equal(optim_tool_tfevents_close(&w, msg, sizeof msg), 0);
    tfevents w2; /* a second file in the same second gets its own name */
    assert_int_equal(optim_tool_tfevents_open(&w2, nested, msg, sizeof msg), 0);
    assert_string_not_equal(w2.path, w.path);
    assert_int_equal(optim_tool_tfevents_close(&w2, msg, sizeof msg), 0);
    FILE *f = fopen(w.path, "rb");
    assert_non_null(f);
    unsigned char data[700];
    long n = read_record(f, data, sizeof data);
    event e = decode(data, (size_t)n);
    assert_string_equal(e.version, "brain.Event:2");
    assert_false(e.has_summary);
    for (int s = 1; s <= 3; s++) {
        e = decode(data, (size_t)read_record(f, data, sizeof data));
        assert_eq(e.step, s);
        assert_string_equal(e.tag, "loss");
        assert_same(e.value, (float)(1.0 / s));
    }
    assert_eq(read_record(f, data, sizeof data), -1);
    fclose(f);
    /* a file where a directory must go */
    char blocked[160];
    snprintf(blocked, sizeof blocked, "%s/a/b/%s/x", dir, strrchr(w.path, '/') + 1);
    assert_int_equal(optim_tool_tfevents_open(&w, blocked, msg, sizeof msg), -1);
    assert_contains(msg, "cannot create directory");
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) { return optim_test_run(); }
