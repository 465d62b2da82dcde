"""The verifier's side of the runner channel treats what it receives as hostile: caps, malformed
records, views past their storage, foreign objects, self-clearing flags, unsigned results lines."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import struct

import pytest
import torch

from evaluator.judge import channel
from evaluator.judge.channel import ChannelError, Foreign
from evaluator.judge.outputs import clean_flags, decode_reply, output_flags
from evaluator.judge.results_file import ResultWriter
from evaluator.judging.job_log import JobState


def _roundtrip(value):
    blobs: list[memoryview] = []
    tree = channel.encode_tree(value, blobs)
    return channel.decode_tree(json.loads(json.dumps(tree)), [bytearray(b) for b in blobs], "cpu")


def test_strided_and_offset_tensors_and_torch_objects_survive_the_trip() -> None:
    base = torch.arange(40, dtype=torch.float32)
    strided = base.view(5, 8).t()[1:]  # non-contiguous with a storage offset
    value = [
        strided,
        {"dtype": torch.float16, "memory_format": torch.channels_last},
        (1, 2.5, None, 1 + 2j, float("inf")),
    ]
    got = _roundtrip(value)
    assert torch.equal(got[0], strided) and got[0].stride() == strided.stride()
    assert got[1] == {"dtype": torch.float16, "memory_format": torch.channels_last}
    assert got[2] == (1, 2.5, None, 1 + 2j, float("inf"))


def test_subclasses_and_objects_travel_as_foreign_without_data() -> None:
    class Sub(torch.Tensor):
        pass

    got = _roundtrip([torch.ones(3).as_subclass(Sub), object()])
    assert all(isinstance(g, Foreign) for g in got)
    assert output_flags(got[0], torch.ones(3)) == ["non_tensor_output:Sub"]


def test_a_view_past_its_storage_is_refused() -> None:
    rec = {
        "tensor": 0,
        "dtype": "float32",
        "size": [4, 4],
        "stride": [4, 1],
        "offset": 0,
        "device": "cpu",
    }
    with pytest.raises(ChannelError, match="past its storage"):
        channel.decode_tree(rec, [bytearray(4 * 15)], "cpu")


@pytest.mark.parametrize(
    "rec",
    [
        {"tensor": 0, "dtype": "no_such", "size": [1], "stride": [1], "offset": 0},
        {"tensor": 5, "dtype": "float32", "size": [1], "stride": [1], "offset": 0},
        {"tensor": 0, "dtype": "float32", "size": [-1], "stride": [1], "offset": 0},
        {"tensor": 0, "dtype": "float32", "size": [1], "stride": [1, 1], "offset": 0},
        {"pickle": "cos\nsystem\n"},
        {
            "list": [
                {
                    "list": [
                        {
                            "list": [
                                {
                                    "list": [
                                        {
                                            "list": [
                                                {"list": [{"list": [{"list": [{"list": [1]}]}]}]}
                                            ]
                                        }
                                    ]
                                }
                            ]
                        }
                    ]
                }
            ]
        },
    ],
)
def test_malformed_records_are_refused(rec) -> None:
    with pytest.raises(ChannelError):
        channel.decode_tree(rec, [bytearray(4)], "cpu")


def test_an_oversized_payload_is_refused_before_it_is_read() -> None:
    a, b = socket.socketpair()
    header = json.dumps({"kind": "result", "blob_sizes": [1 << 40]}).encode()
    a.sendall(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ChannelError, match="exceeds the cap"):
        channel.recv(b, 1 << 20)
    a.sendall(struct.pack("<Q", 1 << 40))
    with pytest.raises(ChannelError, match="header"):
        channel.recv(b, 1 << 20)


def test_runner_flags_can_only_accuse() -> None:
    assert clean_flags(["aten_fallback:aten.add", "passed", "interpreter_bf16", 3]) == [
        "aten_fallback:aten.add"
    ]


def test_inputs_sent_back_with_another_shape_are_a_protocol_breach() -> None:
    blobs: list[memoryview] = []
    header = {
        "kind": "result",
        "flags": [],
        "launches": 1,
        "error_type": None,
        "out": channel.encode_tree(torch.ones(3), blobs),
        "inputs": channel.encode_tree([[torch.ones(2)], {}], blobs),
    }
    reply = decode_reply(header, [bytearray(b) for b in blobs], (torch.ones(3),), {}, "cpu")
    assert reply.error_type == "RunnerProtocol"
    assert any(f.startswith("runner_protocol") for f in reply.flags)


def test_results_lines_without_the_key_do_not_count(tmp_path) -> None:
    key = b"k" * 32
    path = tmp_path / "results.jsonl"
    writer = ResultWriter(str(path), key)
    writer.write({"event": "prepared", "n": 1})
    line = path.read_bytes().splitlines()[0]
    with path.open("ab") as fh:
        fh.write(b'{"event": "done"}\n')  # unsigned
        fh.write(line + b"\n")  # a replay of a signed line
        body = b'{"event": "done", "seq": 1}'
        mac = hmac.new(b"x" * 32, body, hashlib.sha256).hexdigest().encode()
        fh.write(body[:-1] + b', "mac": "' + mac + b'"}\n')  # signed with another key
    writer.write({"event": "done"})
    state = JobState(key=key)
    state.read(path)
    assert [e["event"] for e in state.events] == ["prepared", "done"]
    assert state.forged == 3
