"""Helpers of the Python package's tests: the `optim` command, safetensors
files, and the configs of the replay set (tests/test_replay_all.c with
tests/replay_configs.inc). ctest sets OPTIM_CLI, OPTIM_SOURCE_DIR and
OPTIM_BUILD_DIR (cmake/python.cmake)."""
import ast
import json
import os
import re
import subprocess

import numpy as np
import pytest

SOURCE = os.environ.get("OPTIM_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("OPTIM_BUILD_DIR", os.path.join(SOURCE, "build"))
CLI = os.environ.get("OPTIM_CLI", os.path.join(BUILD, "optim"))

ST_DTYPE = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16,
            "I32": np.int32, "I64": np.int64}
ST_NAME = {np.dtype(v).str: k for k, v in ST_DTYPE.items() if k != "BF16"}


def write_st(path, tensors):
    """A safetensors file of {name: array, or (uint16 array, "BF16")}."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a, dtype = a if isinstance(a, tuple) else (a, None)
        a = np.asarray(a, order="C")  # ascontiguousarray would make a scalar 1-d
        data = a.tobytes()
        header[name] = {"dtype": dtype or ST_NAME[a.dtype.str], "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_st(path):
    """{name: array} of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], ST_DTYPE[e["dtype"]]).reshape(tuple(e["shape"]))
    return out


def run_cli(*args, check=True):
    r = subprocess.run([CLI] + list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("optim %s: %s" % (" ".join(args), r.stderr))
    return r


def check_config(tmp_path, config):
    """What `optim check` prints for config (a dict), as a dict."""
    p = tmp_path / "check.json"
    p.write_text(json.dumps(config))
    return json.loads(run_cli("check", str(p)).stdout)


def replay_configs():
    """Every config of the replay set, in its order."""
    with open(os.path.join(SOURCE, "tests", "test_replay_all.c")) as f:
        text = f.read()
    with open(os.path.join(SOURCE, "tests", "replay_configs.inc")) as f:
        text = text.replace('#include "replay_configs.inc"', f.read())
    body = text[text.index("CONFIGS[] = {"):]
    body = body[:body.index("\n};")]
    return [ast.literal_eval(s) for s in re.findall(r'"(?:[^"\\\n]|\\.)*"', body)]


def builtin_lines():
    """tests/conformance/builtins.txt: (class, generation, config dict) per line."""
    out = []
    with open(os.path.join(SOURCE, "tests", "conformance", "builtins.txt")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9]+) ([a-z0-9]+) ?(.*)$", line.rstrip("\n"))
            if m:
                out.append((m.group(1), m.group(2), json.loads(m.group(3) or "{}")))
    return out


@pytest.fixture
def cli():
    if not os.path.exists(CLI):
        pytest.skip("no optim command at %s" % CLI)
    return CLI
