"""Framed messages over a socket between the verifier and the runner.

One message is an 8-byte little-endian header length, a JSON header, then the raw bytes of every
blob the header lists in `blob_sizes`. Values travel as JSON trees (`encode_tree`): tensors become
`{"tensor": i, ...}` records whose bytes are blob i (the whole backing storage, so strides and
offsets survive), and the few torch objects an ATen call takes as arguments (dtype, device, layout,
memory format) travel by name. Nothing is ever unpickled: the receiver rebuilds only what it
allows, and `recv` refuses a header or a payload over its caps before reading it.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import torch

_LEN = struct.Struct("<Q")
MAX_HEADER_BYTES = 8 << 20


class ChannelError(Exception):
    """The peer closed the channel, timed out, or sent something malformed or too large."""


def send(sock: socket.socket, header: dict[str, Any], blobs: list[memoryview]) -> None:
    header = dict(header, blob_sizes=[b.nbytes for b in blobs])
    data = json.dumps(header).encode()
    sock.sendall(_LEN.pack(len(data)) + data)
    for blob in blobs:
        if blob.nbytes:
            sock.sendall(blob)


def _read_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except (OSError, TimeoutError) as exc:
            raise ChannelError(f"channel read failed: {exc}") from None
        if k == 0:
            raise ChannelError("the peer closed the channel")
        got += k
    return buf


def recv(sock: socket.socket, max_payload_bytes: int) -> tuple[dict[str, Any], list[bytearray]]:
    (n,) = _LEN.unpack(bytes(_read_exact(sock, _LEN.size)))
    if n > MAX_HEADER_BYTES:
        raise ChannelError(f"header of {n} bytes exceeds {MAX_HEADER_BYTES}")
    try:
        header = json.loads(bytes(_read_exact(sock, n)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChannelError(f"malformed header: {exc}") from None
    if not isinstance(header, dict):
        raise ChannelError("header is not an object")
    sizes = header.get("blob_sizes")
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise ChannelError("malformed blob_sizes")
    if sum(sizes) > max_payload_bytes:
        raise ChannelError(f"payload of {sum(sizes)} bytes exceeds the cap {max_payload_bytes}")
    return header, [_read_exact(sock, s) for s in sizes]


def _storage_bytes(t: torch.Tensor) -> memoryview:
    storage = t.untyped_storage()
    if storage.device.type != "cpu":
        storage = storage.cpu()
    raw = torch.empty(0, dtype=torch.uint8).set_(storage)
    return memoryview(raw.numpy()).cast("B")


def encode_tree(value: Any, blobs: list[memoryview]) -> Any:
    """A JSON tree for `value`, appending tensor storages to `blobs`. A tensor that is not exactly
    `torch.Tensor`, or any other object, travels as `{"foreign": type name}` without its data."""
    if type(value) is torch.Tensor:
        if value.device.type not in ("cpu", "cuda"):
            return {"foreign": f"tensor on {value.device.type}"}
        blobs.append(_storage_bytes(value))
        return {
            "tensor": len(blobs) - 1,
            "dtype": str(value.dtype).removeprefix("torch."),
            "size": list(value.size()),
            "stride": list(value.stride()),
            "offset": value.storage_offset(),
            "device": value.device.type,
        }
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is complex:
        return {"complex": [value.real, value.imag]}
    if isinstance(value, torch.dtype):
        return {"dtype_obj": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device_obj": str(value)}
    if isinstance(value, torch.memory_format | torch.layout):
        kind = "memory_format" if isinstance(value, torch.memory_format) else "layout"
        return {kind: str(value).removeprefix("torch.")}
    if type(value) in (list, tuple, torch.Size):
        key = "list" if type(value) is list else "tuple"
        return {key: [encode_tree(v, blobs) for v in value]}
    if type(value) is dict:
        return {"dict": {str(k): encode_tree(v, blobs) for k, v in value.items()}}
    return {"foreign": type(value).__name__[:80]}


class Foreign:
    """Stands for something the runner returned that is not a plain tensor or a plain value."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<foreign {self.what}>"


_DTYPES = {
    str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)
}
_NAMED = {
    "memory_format": {
        str(m).removeprefix("torch."): m
        for m in (
            torch.contiguous_format,
            torch.channels_last,
            torch.channels_last_3d,
            torch.preserve_format,
        )
    },
    "layout": {str(v).removeprefix("torch."): v for v in (torch.strided, torch.sparse_coo)},
}
MAX_DIMS = 16
MAX_DEPTH = 8


def decode_tree(tree: Any, blobs: list[bytearray], device: str, depth: int = 0) -> Any:
    """Rebuild a value sent by `encode_tree`. Raises ChannelError on anything malformed; a foreign
    record becomes a `Foreign` placeholder for the caller to judge."""
    if depth > MAX_DEPTH:
        raise ChannelError("value nested too deep")
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is not dict or len(tree) < 1:
        raise ChannelError(f"malformed value {type(tree).__name__}")
    if "tensor" in tree:
        return _decode_tensor(tree, blobs, device)
    (key, body), *rest = tree.items()
    if rest:
        raise ChannelError("malformed value record")
    if key in ("list", "tuple") and type(body) is list:
        items = [decode_tree(v, blobs, device, depth + 1) for v in body]
        return items if key == "list" else tuple(items)
    if key == "dict" and type(body) is dict:
        return {str(k): decode_tree(v, blobs, device, depth + 1) for k, v in body.items()}
    if key == "complex" and type(body) is list and len(body) == 2:
        if all(type(v) in (int, float) for v in body):
            return complex(body[0], body[1])
    if key == "foreign" and type(body) is str:
        return Foreign(body[:80])
    if key == "dtype_obj" and body in _DTYPES:
        return _DTYPES[body]
    if key == "device_obj" and type(body) is str and body.split(":")[0] in ("cpu", "cuda"):
        return torch.device(body)
    if key in _NAMED and body in _NAMED[key]:
        return _NAMED[key][body]
    raise ChannelError(f"unknown value record {key!r}")


def _ints(value: Any, n: int | None = None) -> list[int]:
    if type(value) is not list or len(value) > MAX_DIMS or (n is not None and len(value) != n):
        raise ChannelError("malformed size or stride")
    if not all(type(v) is int and 0 <= v < (1 << 48) for v in value):
        raise ChannelError("size or stride out of range")
    return value


def _decode_tensor(rec: dict[str, Any], blobs: list[bytearray], device: str) -> torch.Tensor:
    idx = rec.get("tensor")
    if type(idx) is not int or not 0 <= idx < len(blobs):
        raise ChannelError("tensor record names no blob")
    dtype = _DTYPES.get(rec.get("dtype"))  # type: ignore[arg-type]
    if dtype is None:
        raise ChannelError(f"unknown dtype {rec.get('dtype')!r}")
    size = _ints(rec.get("size"))
    stride = _ints(rec.get("stride"), len(size))
    offset = rec.get("offset")
    if type(offset) is not int or offset < 0:
        raise ChannelError("malformed storage offset")
    blob = blobs[idx]
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if len(blob) % itemsize:
        raise ChannelError("storage size is not a whole number of elements")
    needed = (
        0
        if 0 in size
        else offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    )
    if needed * itemsize > len(blob):
        raise ChannelError("tensor view runs past its storage")
    raw = (
        torch.frombuffer(blob, dtype=torch.uint8)
        if len(blob)
        else torch.empty(0, dtype=torch.uint8)
    )
    if device != "cpu" and rec.get("device") == "cuda":
        # the whole storage moves, then the view is rebuilt on it: layouts stay as sent
        # (gaps, offsets, stride-0 dims), which `Tensor.to` would make contiguous
        raw = raw.to(device)
    return torch.empty(0, dtype=dtype, device=raw.device).set_(
        raw.untyped_storage(), offset, size, stride
    )
