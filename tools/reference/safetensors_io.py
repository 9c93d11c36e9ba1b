# SPDX-License-Identifier: MIT
"""Minimal safetensors reader/writer built on numpy + json.

File layout:
  8 bytes   little-endian u64 N, the header length
  N bytes   JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
            (padded with spaces to a multiple of 8)
  ...       raw little-endian tensor data; offsets are relative to the first byte after the header

Supported dtypes: F32, F16 and BF16 (BF16 is read into float32, and written from float32 by
round-to-nearest-even truncation of the float32 bits).
"""

import json
import struct

import numpy as np

_NP_TO_ST = {
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
}
_ST_TO_NP = {
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
}


def _f32_to_bf16_bits(a):
    """float32 array -> uint16 array of bfloat16 bits (round to nearest even)."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype("<u2")
    nan = np.isnan(a)
    if nan.any():
        out = out.copy()
        out[nan] = 0x7FC0
    return out


def _bf16_bits_to_f32(bits):
    return (bits.astype("<u4") << 16).view("<f4")


def save(path, tensors, metadata=None, bf16=()):
    """Write `tensors` (dict name -> np.ndarray of float32 or float16) to `path`.

    `metadata` is an optional dict of str -> str stored as "__metadata__".
    Names listed in `bf16` (float32 arrays) are stored as BF16.
    Tensors are written in sorted name order.
    """
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        if name in bf16:
            if arr.dtype != np.float32:
                raise TypeError(f"{name}: BF16 output needs a float32 array, got {arr.dtype}")
            data = _f32_to_bf16_bits(arr).tobytes()
            dtype = "BF16"
        else:
            if arr.dtype not in _NP_TO_ST:
                raise TypeError(f"{name}: unsupported dtype {arr.dtype} (use float32 or float16)")
            dtype = _NP_TO_ST[arr.dtype]
            data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": [int(s) for s in arr.shape],
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((-len(hbytes)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for b in blobs:
            f.write(b)


def read_header(path):
    """Return (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    return header, metadata, 8 + n


def load(path, with_metadata=False):
    """Read a safetensors file into a dict name -> np.ndarray.

    F32 and F16 keep their dtype; BF16 is widened to float32.
    With with_metadata=True returns (tensors, metadata).
    """
    header, metadata, start = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        raw = f.read()
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = info["dtype"]
        if dtype == "BF16":
            arr = _bf16_bits_to_f32(np.frombuffer(raw[b:e], dtype="<u2"))
        elif dtype in _ST_TO_NP:
            arr = np.frombuffer(raw[b:e], dtype=_ST_TO_NP[dtype])
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        expected = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if arr.size != expected:
            raise ValueError(f"{path}: tensor {name} has {arr.size} elements, shape {list(shape)} needs {expected}")
        out[name] = arr.reshape(shape).copy()
    return (out, metadata) if with_metadata else out


def load_dir(directory):
    """Load and merge every *.safetensors file in a checkpoint directory."""
    import glob
    import os

    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"no .safetensors files in {directory}")
    merged = {}
    for fn in files:
        for name, arr in load(fn).items():
            if name in merged:
                raise ValueError(f"tensor {name} appears in more than one file of {directory}")
            merged[name] = arr
    return merged
