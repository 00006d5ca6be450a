"""Decodes what `optim train/compare --log --tensorboard` wrote (tests/test_step_log.sh),
independently of the C code: JSON lines with the json module; TensorBoard event files
as TFRecords (uint64 length, masked CRC-32C of it, data, masked CRC-32C of the data,
CRC-32C computed here bit by bit) holding Event protobufs read with a wire-format reader
written here (event.proto: wall_time 1, step 2, file_version 3, summary 5; summary.proto:
Summary.value 1, Value.tag 1, Value.simple_value 2).

usage: step_log_check.py OUT JSONL TBDIR LABEL FIRST_STEP EPOCH [BATCH]
OUT is the command's standard output: its "N training" count and its epoch line
(with val_loss) give the step count and the epoch's loss and metrics that the steps
must agree with. TBDIR "-": no event file to check.
"""
import glob
import json
import math
import os
import re
import struct
import sys
import time


def fail(msg):
    sys.exit("FAIL: " + msg)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


if crc32c(b"123456789") != 0xE3069283:
    fail("the checker's own CRC-32C is wrong")


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    at, out = 0, []
    while at < len(data):
        if len(data) - at < 12:
            fail(f"{path}: truncated header at byte {at}")
        head = data[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[at + 8:at + 12])
        if hc != masked(crc32c(head)):
            fail(f"{path}: length CRC at byte {at}")
        body = data[at + 12:at + 12 + n]
        (dc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        if len(body) != n or dc != masked(crc32c(body)):
            fail(f"{path}: data CRC at byte {at}")
        out.append(body)
        at += 16 + n
    return out


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of one message."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            fail(f"wire type {wire}")
        out.append((num, wire, v))
    return out


def event(b):
    e = {}
    for num, wire, v in fields(b):
        if (num, wire) == (1, 1):
            e["wall_time"] = struct.unpack("<d", v)[0]
        elif (num, wire) == (2, 0):
            e["step"] = v - (1 << 64) if v >= 1 << 63 else v
        elif (num, wire) == (3, 2):
            e["file_version"] = v.decode()
        elif (num, wire) == (5, 2):
            vals = [f for f in fields(v)]
            if len(vals) != 1 or vals[0][:2] != (1, 2):
                fail(f"summary fields {vals}")
            val = dict(((n, w), x) for n, w, x in fields(vals[0][2]))
            e["tag"] = val[(1, 2)].decode()
            e["value"] = struct.unpack("<f", val[(2, 5)])[0]
        else:
            fail(f"unexpected Event field {num} (wire type {wire})")
    return e


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-30


def check_jsonl(path, label, first, steps, epoch):
    keys = ["optimizer", "step", "epoch", "batch", "loss", "learning_rate", "grad_norm",
            "update_ratio", "seconds"]
    rows = [json.loads(line) for line in open(path)]
    rows = [r for r in rows if r["optimizer"] == label]
    if len(rows) < first + steps:
        fail(f"{path}: {len(rows)} lines of {label}, expected at least {first + steps}")
    rows = rows[first:first + steps]
    last = 0
    for k, r in enumerate(rows):
        if list(r) != keys:
            fail(f"keys {list(r)}")
        if r["step"] != first + k + 1 or r["batch"] != k + 1 or r["epoch"] != epoch:
            fail(f"line {k + 1}: step {r['step']}, batch {r['batch']}, epoch {r['epoch']}")
        for key in keys[4:]:
            if not isinstance(r[key], (int, float)) or not math.isfinite(r[key]):
                fail(f"step {r['step']}: {key} = {r[key]}")
        if not (r["loss"] > 0 and r["grad_norm"] > 0 and 0 < r["update_ratio"] < 1):
            fail(f"step {r['step']}: implausible {r}")
        if r["seconds"] < last:
            fail(f"step {r['step']}: seconds go back")
        last = r["seconds"]
    return rows


def check_events(d, jsonl, label, epoch, epoch_logs):
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    if len(files) != 1:
        fail(f"{d}: event files {files}")
    name = os.path.basename(files[0]).split(".")
    if len(name) < 5 or not name[3].isdigit():
        fail(f"file name {files[0]}")
    evs = [event(b) for b in records(files[0])]
    if evs[0].get("file_version") != "brain.Event:2" or evs[0].get("step") != 0:
        fail(f"first event {evs[0]}")
    now = time.time()
    for e in evs:
        if not now - 86400 < e["wall_time"] <= now + 1:
            fail(f"wall_time {e['wall_time']}")
    rows = [json.loads(line) for line in open(jsonl)]
    rows = [r for r in rows if r["optimizer"] == label]
    steps = {}
    for e in evs[1:]:
        steps.setdefault(e["tag"], {})[e["step"]] = e["value"]
    for tag in ["loss", "learning_rate", "grad_norm", "update_ratio"]:
        got = steps.get(tag, {})
        if sorted(got) != [r["step"] for r in rows]:
            fail(f"{tag}: steps {sorted(got)[:5]}..., the JSON lines have {len(rows)}")
        for r in rows:
            if not close(got[r["step"]], r[tag], 1e-6):
                fail(f"{tag} at step {r['step']}: {got[r['step']]} vs {r[tag]}")
    for name, (want, tol) in epoch_logs.items():
        got = steps.get("epoch_" + name, {})
        if list(got) != [epoch] or abs(got[epoch] - want) > tol:
            fail(f"epoch_{name}: {got}, expected {want} (within {tol}) at step {epoch}")


def main(out, jsonl, tbdir, label, first, epoch, batch=128):
    text = open(out).read()
    m = re.search(r"(\d+) training", text)
    lines = [l for l in text.splitlines() if " - val_loss: " in l]
    if not m or len(lines) < 1:
        fail(f"no training count or epoch line in {out}")
    n = int(m.group(1))
    steps = (n + batch - 1) // batch
    shown = dict((k, float(v)) for k, v in re.findall(r"(\w+): ([-0-9.]+)", lines[-1]))
    if not lines[-1].startswith(f"{steps}/{steps} - "):
        fail(f"epoch line {lines[-1]!r}, expected {steps} steps")
    rows = check_jsonl(jsonl, label, first, steps, epoch)
    sizes = [batch] * (steps - 1) + [n - batch * (steps - 1)]
    mean = sum(r["loss"] * b for r, b in zip(rows, sizes)) / n
    if abs(mean - shown["loss"]) > 5.1e-5:
        fail(f"the steps' losses average {mean}, the epoch line says {shown['loss']}")
    if tbdir != "-":
        logs = {"loss": (mean, 1e-6 * mean)}
        for k in ["accuracy", "val_loss", "val_accuracy"]:
            logs[k] = (shown[k], 5.1e-5)
        check_events(tbdir, jsonl, label, epoch, logs)
    print(f"ok: {label}: {steps} steps from {first + 1}, mean loss {mean:.6f}")


main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
