#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/ (committed; rerun after
changing tests/replay_configs.inc). Only the standard library."""
import gzip, json, os, random, struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def configs():
    with open(os.path.join(HERE, "..", "replay_configs.inc")) as f:
        lines = [json.loads(l.strip().rstrip(",")) for l in f if l.strip() and not l.lstrip().startswith("//")]
    return lines


def safetensors(tensors):
    header, data = {}, b""
    for name, (dtype, shape, raw) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def idx(type_code, fmt, dims, values):
    head = bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + b"".join(struct.pack(">" + fmt, v) for v in values)


def main():
    for i, c in enumerate(configs()):
        put("config", "replay_%02d.json" % i, c.encode())
    for name in ["adam", "sgd", "lion", "ftrl", "adafactor"]:
        put("config", "bare_%s.json" % name, json.dumps(name).encode())
    put("config", "legacy_lr.json", b'{"class_name": "SGD", "config": {"lr": 0.1, "decay": 0.01}}')
    put("safetensors", "empty.st", safetensors({}))
    put("safetensors", "mixed.st", safetensors({
        "a": ("F32", [2, 3], struct.pack("<6f", *range(6))),
        "b/m": ("F64", [], struct.pack("<d", 1.5)),
        "0/a/indices": ("I64", [2], struct.pack("<2q", 0, 1)),
        "i32": ("I32", [0, 4], b""),
    }))
    put("safetensors", "metadata.st", safetensors({"__metadata__": ("F32", [], b"")}).replace(
        b'{"dtype": "F32", "shape": [], "data_offsets": [0, 0]}', b'{"format": "pt"}'))
    plain = idx(0x08, "B", [2, 2, 2], range(8))
    put("idx", "u8.idx", plain)
    put("idx", "u8.idx.gz", gzip.compress(plain, mtime=0))
    put("idx", "f32.idx", idx(0x0D, "f", [3], [1.0, -2.5, 3.25]))
    put("idx", "f64.idx", idx(0x0E, "d", [2], [1e300, -0.0]))
    put("idx", "i16.idx", idx(0x0B, "h", [1, 2], [-7, 300]))
    put("idx", "i32.idx", idx(0x0C, "i", [2], [-1, 2**31 - 1]))
    put("idx", "i8.idx", idx(0x09, "b", [0], []))
    rng = random.Random(12)
    for i in range(24):
        put("apply", "random_%02d.bin" % i, bytes([i]) + bytes(rng.randrange(256) for _ in range(120)))


main()
