"""OS-level containment of candidates: hostile kernels that compute relu correctly and also try to
read secrets, write files, reach the network, leave processes behind or hog resources.

Each must get the right verdict, the harmful effect must not happen, and the next candidate in
the same evaluation must still pass. The evaluation runs in a subprocess whose environment holds
a fake API key (as `agent.run`'s does). As root here; an unprivileged uid is tested on the
confinement primitives (the interpreter's packages may be unreadable to another user).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from evaluator import confine

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests/fixtures/kernels/hostile"
SECRET = "sk-containment-" + uuid.uuid4().hex
NEEDS_FULL = pytest.mark.skipif(
    not confine.probe().full, reason=f"containment here is {confine.probe().label}"
)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory):
    """Judge every hostile kernel once (fork mode), with live TCP and UDP listeners."""
    tmp = tmp_path_factory.mktemp("containment")
    kernels = tmp / "kernels" / "add__Tensor"
    kernels.mkdir(parents=True)
    original = "def add__Tensor_kernel_impl(a, b, alpha=1):\n    raise NotImplementedError\n"
    (kernels / "add__Tensor_implementation_v1.py").write_text(original)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    probe_id = uuid.uuid4().hex[:12]
    env = dict(os.environ)
    env |= {
        "OPENAI_API_KEY": SECRET,
        "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        "ATENFORGE_PROBE_ID": probe_id,
        "ATENFORGE_PROBE_TCP": str(tcp.getsockname()[1]),
        "ATENFORGE_PROBE_UDP": str(udp.getsockname()[1]),
        "ATENFORGE_PROBE_DIR": str(tmp / "kernels"),
    }
    files = sorted(str(p) for p in HOSTILE.glob("*.py"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests/containment_driver.py"), "fork", str(tmp / "s"), *files],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = {row["kernel"]: row for row in json.loads(proc.stdout.splitlines()[-1])}
    tcp.setblocking(False)
    udp.setblocking(False)
    try:
        tcp.accept()
        tcp_saw = True
    except BlockingIOError:
        tcp_saw = False
    try:
        udp_saw: bytes | None = udp.recv(100)
    except BlockingIOError:
        udp_saw = None
    tcp.close()
    udp.close()
    yield {
        "verdicts": verdicts,
        "probe_id": probe_id,
        "kernel_file": kernels / "add__Tensor_implementation_v1.py",
        "original": original,
        "tcp_saw": tcp_saw,
        "udp_saw": udp_saw,
    }
    for path in (Path.home() / f"atenforge_pwned_{probe_id}", Path(f"/tmp/atenforge_pwned_{probe_id}")):
        path.unlink(missing_ok=True)


def _check(run: dict, kernel: str, status: str, flag: str | None) -> dict:
    row = run["verdicts"][kernel]
    assert row["status"] == status, row
    if flag is not None:
        assert flag in row["flags"], row
    assert row["next_status"] == "passed", row["next_reason"]
    return row


@NEEDS_FULL
@pytest.mark.slow
def test_ancestor_environ_is_unreadable(hostile_run: dict) -> None:
    row = _check(hostile_run, "read_environ", "rejected", "sandbox_violation:proc")
    assert SECRET not in row["stdout"] and "LEAKED" not in row["stdout"]


@NEEDS_FULL
@pytest.mark.slow
def test_writes_outside_the_scratch_dir_are_denied(hostile_run: dict) -> None:
    probe_id = hostile_run["probe_id"]
    _check(hostile_run, "write_home", "rejected", "sandbox_violation:write")
    assert not (Path.home() / f"atenforge_pwned_{probe_id}").exists()
    _check(hostile_run, "write_tmp", "rejected", "sandbox_violation:write")
    assert not Path(f"/tmp/atenforge_pwned_{probe_id}").exists()
    _check(hostile_run, "write_kernels", "rejected", "sandbox_violation:write")
    assert hostile_run["kernel_file"].read_text() == hostile_run["original"]


@NEEDS_FULL
@pytest.mark.slow
def test_tcp_and_udp_reach_nothing(hostile_run: dict) -> None:
    _check(hostile_run, "tcp_connect", "rejected", "sandbox_violation:network")
    _check(hostile_run, "udp_send", "rejected", "sandbox_violation:network")
    assert not hostile_run["tcp_saw"]
    assert hostile_run["udp_saw"] is None


@NEEDS_FULL
@pytest.mark.slow
def test_escaped_grandchild_does_not_survive(hostile_run: dict) -> None:
    row = _check(hostile_run, "escaped_grandchild", "rejected", "sandbox_violation:process")
    assert row["escaped_pids"], "the grandchild never ran"
    for pid in row["escaped_pids"]:
        assert not _alive(int(pid)), f"escaped pid {pid} survived"


@NEEDS_FULL
@pytest.mark.slow
def test_fork_bomb_stops_at_the_process_cap(hostile_run: dict) -> None:
    row = _check(hostile_run, "fork_bomb", "rejected", "sandbox_violation:process")
    assert "fork failed after" in row["stdout"], row["stdout"][-500:]
    assert int(row["stdout"].split("fork failed after", 1)[1].split()[0]) < 301


@NEEDS_FULL
@pytest.mark.slow
def test_memory_hog_is_an_error(hostile_run: dict) -> None:
    row = _check(hostile_run, "memory_hog", "error", "exception")
    assert "allocate memory" in row["reason"], row["reason"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------- as an unprivileged user

_UNPRIVILEGED = textwrap.dedent(
    """
    import json, os, socket, sys, types
    sys.path.insert(0, sys.argv[1])
    from evaluator import confine, confine_tree
    job, ancestor = sys.argv[2], int(sys.argv[3])
    events = []

    def candidate():
        limits = types.SimpleNamespace(max_data_mib=1024, max_open_files=256, max_file_mib=64,
                                       max_processes=301)
        status = confine.confine_current_process(confine.build_policy(job, "cpu", limits), events.append)
        seen = {"missing": status.missing}
        try:
            seen["environ"] = open(f"/proc/{ancestor}/environ", "rb").read().decode(errors="replace")
        except OSError as exc:
            seen["environ"] = type(exc).__name__
        for name, path in (("tmp", "/tmp/atenforge_unpriv_" + os.path.basename(job)),
                           ("job", os.path.join(job, "ok.txt"))):
            try:
                open(path, "w").write("x")
                seen[name] = "written"
            except OSError as exc:
                seen[name] = type(exc).__name__
        try:
            socket.create_connection(("127.0.0.1", int(sys.argv[4])), timeout=2)
            seen["tcp"] = "connected"
        except OSError as exc:
            seen["tcp"] = type(exc).__name__
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open(os.path.join(job, "escaped.pid"), "w").write(os.readlink("/proc/self"))
                import time; time.sleep(300)
            os._exit(0)
        os.wait()
        import time
        while not os.path.exists(os.path.join(job, "escaped.pid")):
            time.sleep(0.01)
        seen["kinds"] = sorted(e["kind"] for e in events)
        open(os.path.join(job, "seen.json"), "w").write(json.dumps(seen))
        return 0

    def report(event):
        open(os.path.join(job, "tree.json"), "a").write(json.dumps(event) + "\\n")

    confine_tree.run_contained(candidate, 301, report)
    """
)


@pytest.mark.slow
def test_unprivileged_user_is_confined_too() -> None:
    """The same exploits as uid 65534 (no capabilities to drop: Landlock, the user namespace and
    the PID namespace carry the weight). Uses a system python, as the test's own interpreter may
    live where that user cannot read."""
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None)
    if os.geteuid() != 0 or not shutil.which("setpriv") or python is None:
        pytest.skip("needs root (to switch to uid 65534), setpriv and a system python3")
    probe = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", "import ctypes"],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"uid 65534 cannot run {python}")
    job = Path(tempfile.mkdtemp(prefix="atenforge_unpriv_"))  # tmp_path's parents are private
    os.chmod(job, 0o777)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    ancestor = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"],
        env={"OPENAI_API_KEY": SECRET, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    try:
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
             _UNPRIVILEGED, str(ROOT), str(job), str(ancestor.pid), str(tcp.getsockname()[1])],
            capture_output=True, text=True, timeout=120, cwd=job,
        )  # fmt: skip
    finally:
        ancestor.kill()
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads((job / "seen.json").read_text())
    assert SECRET not in seen["environ"], seen
    assert seen["tmp"] == "PermissionError" and seen["job"] == "written", seen
    assert seen["tcp"] == "PermissionError", seen
    assert {"proc", "write", "network"} <= set(seen["kinds"]), seen
    tree = [json.loads(line) for line in (job / "tree.json").read_text().splitlines()]
    assert [e["kind"] for e in tree] == ["process"]
    assert not _alive(int((job / "escaped.pid").read_text()))
    tcp.setblocking(False)
    with pytest.raises(BlockingIOError):
        tcp.accept()
    tcp.close()
    assert not Path(f"/tmp/atenforge_unpriv_{job.name}").exists()
    shutil.rmtree(job, ignore_errors=True)


# ---------------------------------------------------------------- reporting and refusing


def test_run_json_environment_says_how_far_candidates_are_confined() -> None:
    from evaluator.runfolder import environment_info

    assert environment_info("cpu")["containment"] == confine.probe().label
    assert environment_info("cpu", confine=False)["containment"].startswith("off")


def test_require_containment_refuses_to_run_unconfined(tmp_path: Path) -> None:
    """`--require-containment` with confinement unavailable (here: switched off in the config)
    stops before any candidate runs: one line, exit 2, no run folder."""
    config = tmp_path / "unconfined.toml"
    config.write_text("[eval.sandbox]\nconfine = false\n")
    kernels = tmp_path / "kernels"
    shutil.copytree(ROOT / "tests/fixtures/kernels/corpus/relu__default", kernels / "relu__default")
    proc = subprocess.run(
        [sys.executable, "-m", "agent.run", "--evaluate-only", "--ops", "relu.default",
         "--kernels-dir", str(kernels), "--config", str(config), "--log-dir", str(tmp_path / "logs"),
         "--device", "cpu", "--require-containment"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--require-containment" in lines[0] and "off" in lines[0], lines
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())
