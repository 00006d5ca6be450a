/* TensorBoard event files, written by hand (no protobuf library): the
 * TFRecord framing with masked CRC32C (crc32c.c) and the few fields of
 * tensorboard's event.proto and summary.proto a scalar needs (tfevents.c).
 * Internal to tools/; tests/test_tfevents.c decodes them back. */
#ifndef OPTIM_TOOLS_TFEVENTS_H
#define OPTIM_TOOLS_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial and final
 * XOR 0xFFFFFFFF): crc32c("123456789") = 0xE3069283. */
uint32_t optim_tool_crc32c(const void *data, size_t n);
/* TFRecord's mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t optim_tool_crc32c_mask(uint32_t crc);

/* Encodes one Event into buf: wall_time (field 1, double), step (field 2,
 * varint), then file_version (field 3) when it is not NULL, else a summary
 * (field 5) holding one Summary.Value {tag (1), simple_value (2, float)}.
 * Returns the length, 0 when cap is too small. */
size_t optim_tool_tfevent_encode(unsigned char *buf, size_t cap, double wall_time, int64_t step,
                                 const char *file_version, const char *tag, float value);

/* Writes one TFRecord: uint64 length, masked CRC32C of those 8 bytes, the
 * data, masked CRC32C of the data (all little-endian). 0, or -1 with errno. */
int optim_tool_tfrecord_write(FILE *f, const void *data, size_t n);

typedef struct tfevents {
    FILE *f; /* NULL: closed */
    char path[4096];
} tfevents;

/* Creates dir (and its parents) if needed and DIR/events.out.tfevents.<unix
 * seconds>.<host> (with .2, .3, ... when that exists), whose first record is
 * the file_version "brain.Event:2" event. 0, or -1 with a message in msg. */
int optim_tool_tfevents_open(tfevents *w, const char *dir, char *msg, size_t cap);
/* A scalar summary at step, stamped with the current time. */
int optim_tool_tfevents_scalar(tfevents *w, int64_t step, const char *tag, double value, char *msg,
                               size_t cap);
int optim_tool_tfevents_flush(tfevents *w, char *msg, size_t cap);
/* Closes (checking the close); a closed writer is a no-op. */
int optim_tool_tfevents_close(tfevents *w, char *msg, size_t cap);

#endif
