/* TensorBoard event files by hand (tfevents.h): protobuf's wire format for
 * the fields of tensorboard/compat/proto/event.proto (Event: wall_time = 1,
 * step = 2, file_version = 3, summary = 5) and summary.proto (Summary:
 * value = 1; Summary.Value: tag = 1, simple_value = 2), each record framed
 * as TFRecord. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tfevents.h"

/* Protobuf wire types. */
enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

typedef struct pbuf {
    unsigned char *p;
    size_t n, cap;
    int overflow;
} pbuf;

static void put_byte(pbuf *b, unsigned v)
{
    if (b->n < b->cap) b->p[b->n] = (unsigned char)v;
    else b->overflow = 1;
    b->n++;
}

static void put_varint(pbuf *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) put_byte(b, (unsigned)(v & 0x7F) | 0x80);
    put_byte(b, (unsigned)v);
}

static void put_key(pbuf *b, unsigned field, unsigned wire) { put_varint(b, field << 3 | wire); }

static void put_le(pbuf *b, uint64_t bits, int bytes)
{
    for (int i = 0; i < bytes; i++) put_byte(b, (unsigned)(bits >> (8 * i)) & 0xFF);
}

static void put_double(pbuf *b, unsigned field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(b, field, WIRE_FIXED64);
    put_le(b, bits, 8);
}

static void put_float(pbuf *b, unsigned field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(b, field, WIRE_FIXED32);
    put_le(b, bits, 4);
}

static void put_bytes(pbuf *b, unsigned field, const void *data, size_t n)
{
    put_key(b, field, WIRE_LEN);
    put_varint(b, n);
    for (size_t i = 0; i < n; i++) put_byte(b, ((const unsigned char *)data)[i]);
}

size_t optim_tool_tfevent_encode(unsigned char *buf, size_t cap, double wall_time, int64_t step,
                                 const char *file_version, const char *tag, float value)
{
    pbuf b = {buf, 0, cap, 0};
    put_double(&b, 1, wall_time);
    put_key(&b, 2, WIRE_VARINT);
    put_varint(&b, (uint64_t)step); /* int64: negative values as ten bytes */
    if (file_version) {
        put_bytes(&b, 3, file_version, strlen(file_version));
    } else {
        unsigned char val[512], sum[528];
        pbuf v = {val, 0, sizeof val, 0};
        put_bytes(&v, 1, tag, strlen(tag));
        put_float(&v, 2, value);
        pbuf s = {sum, 0, sizeof sum, v.overflow};
        put_bytes(&s, 1, val, v.n);
        if (s.overflow || s.n > sizeof sum) return 0;
        put_bytes(&b, 5, sum, s.n);
    }
    return b.overflow ? 0 : b.n;
}

int optim_tool_tfrecord_write(FILE *f, const void *data, size_t n)
{
    unsigned char head[12], tail[4];
    for (int i = 0; i < 8; i++) head[i] = (unsigned char)((uint64_t)n >> (8 * i));
    uint32_t c = optim_tool_crc32c_mask(optim_tool_crc32c(head, 8));
    for (int i = 0; i < 4; i++) head[8 + i] = (unsigned char)(c >> (8 * i));
    c = optim_tool_crc32c_mask(optim_tool_crc32c(data, n));
    for (int i = 0; i < 4; i++) tail[i] = (unsigned char)(c >> (8 * i));
    if (fwrite(head, 1, 12, f) != 12 || fwrite(data, 1, n, f) != n || fwrite(tail, 1, 4, f) != 4)
        return -1;
    return 0;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mkdir -p: each prefix of dir ending at a '/', then dir. */
static int make_dirs(const char *dir, char *msg, size_t cap)
{
    char p[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof p) {
        snprintf(msg, cap, "--tensorboard '%.400s': expected a directory path", dir);
        return -1;
    }
    memcpy(p, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char keep = p[i];
        p[i] = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && (errno != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) {
            snprintf(msg, cap, "--tensorboard %.200s: cannot create directory %.200s: %s", dir, p,
                     errno == EEXIST ? "a file is in the way" : strerror(errno));
            return -1;
        }
        p[i] = keep;
    }
    return 0;
}

/* DIR/events.out.tfevents.<seconds>.<host>[.k], created exclusively. */
static FILE *create_file(tfevents *w, const char *dir, double t)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (int k = 1; k < 100; k++) {
        int len = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s", dir,
                           (long long)t, host);
        if (k > 1 && len > 0 && (size_t)len < sizeof w->path)
            snprintf(w->path + len, sizeof w->path - (size_t)len, ".%d", k);
        FILE *f = fopen(w->path, "wbx");
        if (f || errno != EEXIST) return f;
    }
    return NULL;
}

int optim_tool_tfevents_open(tfevents *w, const char *dir, char *msg, size_t cap)
{
    w->f = NULL;
    if (make_dirs(dir, msg, cap)) return -1;
    double t = wall_now();
    unsigned char buf[64];
    size_t n = optim_tool_tfevent_encode(buf, sizeof buf, t, 0, "brain.Event:2", NULL, 0);
    if (!(w->f = create_file(w, dir, t))) {
        snprintf(msg, cap, "--tensorboard %.100s: cannot create %.300s: %s", dir, w->path,
                 strerror(errno));
        return -1;
    }
    if (optim_tool_tfrecord_write(w->f, buf, n) == 0 && fflush(w->f) == 0) return 0;
    snprintf(msg, cap, "--tensorboard %.400s: write error: %s", w->path, strerror(errno));
    fclose(w->f);
    w->f = NULL;
    return -1;
}

int optim_tool_tfevents_scalar(tfevents *w, int64_t step, const char *tag, double value, char *msg,
                               size_t cap)
{
    unsigned char buf[600];
    size_t n =
        optim_tool_tfevent_encode(buf, sizeof buf, wall_now(), step, NULL, tag, (float)value);
    if (n == 0) {
        snprintf(msg, cap, "--tensorboard %.400s: tag '%.40s' is too long", w->path, tag);
        return -1;
    }
    if (optim_tool_tfrecord_write(w->f, buf, n) == 0) return 0;
    snprintf(msg, cap, "--tensorboard %.400s: write error: %s", w->path, strerror(errno));
    return -1;
}

int optim_tool_tfevents_flush(tfevents *w, char *msg, size_t cap)
{
    if (fflush(w->f) == 0 && !ferror(w->f)) return 0;
    snprintf(msg, cap, "--tensorboard %.400s: write error: %s", w->path, strerror(errno));
    return -1;
}

int optim_tool_tfevents_close(tfevents *w, char *msg, size_t cap)
{
    if (!w->f) return 0;
    int bad = ferror(w->f);
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    if (!bad) return 0;
    snprintf(msg, cap, "--tensorboard %.400s: write error: %s", w->path, strerror(errno));
    return -1;
}
