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
import uuid
from pathlib import Path

import pytest

from evaluator.containment import confine

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests/fixtures/kernels/hostile"
SECRET = "sk-containment-" + uuid.uuid4().hex
NEEDS_FULL = pytest.mark.skipif(
    not confine.probe().full, reason=f"containment here is {confine.probe().label}"
)


def _judge_hostile(tmp: Path, mode: str, names: list[str]) -> dict:
    """Judge hostile kernels in one evaluation (a subprocess holding a fake API key), each
    followed by an honest one, with live TCP and UDP listeners and a decoy process to signal."""
    kernels = tmp / "kernels" / "add__Tensor"
    kernels.mkdir(parents=True)
    original = "def add__Tensor_kernel_impl(a, b, alpha=1):\n    raise NotImplementedError\n"
    (kernels / "add__Tensor_implementation_v1.py").write_text(original)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    decoy = subprocess.Popen(["sleep", "600"])
    probe_id = uuid.uuid4().hex[:12]
    home_secret = Path.home() / f".atenforge_probe_{probe_id}"
    home_secret.write_text(SECRET)
    env = dict(os.environ)
    env |= {
        "OPENAI_API_KEY": SECRET,
        "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        "ATENFORGE_PROBE_ID": probe_id,
        "ATENFORGE_PROBE_TCP": str(tcp.getsockname()[1]),
        "ATENFORGE_PROBE_UDP": str(udp.getsockname()[1]),
        "ATENFORGE_PROBE_DIR": str(tmp / "kernels"),
        "ATENFORGE_PROBE_PID": str(decoy.pid),
    }
    files = [str(HOSTILE / f"{name}.py") for name in names]
    try:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests/containment_driver.py"),
                mode,
                str(tmp / "s"),
                *files,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        decoy_survived = decoy.poll() is None
    finally:
        decoy.kill()
        home_secret.unlink()
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
    for path in (
        Path.home() / f"atenforge_pwned_{probe_id}",
        Path(f"/tmp/atenforge_pwned_{probe_id}"),
    ):
        if path.exists():
            path.unlink()
            raise AssertionError(f"a hostile kernel wrote {path}")
    return {
        "verdicts": verdicts,
        "probe_id": probe_id,
        "kernel_file": kernels / "add__Tensor_implementation_v1.py",
        "original": original,
        "tcp_saw": tcp_saw,
        "udp_saw": udp_saw,
        "decoy_survived": decoy_survived,
    }


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every hostile kernel, judged once by the fork server."""
    names = sorted(p.stem for p in HOSTILE.glob("*.py"))
    return _judge_hostile(tmp_path_factory.mktemp("containment"), "fork", names)


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
def test_private_files_in_home_are_unreadable(hostile_run: dict) -> None:
    row = _check(hostile_run, "read_home", "rejected", "sandbox_violation:read")
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
def test_silencing_the_leftover_report_is_tampering(hostile_run: dict) -> None:
    row = _check(hostile_run, "silence_leftover_report", "rejected", "sandbox_violation:process")
    assert any(f.startswith("harness_tampering:evaluator.containment.process_tree") for f in row["flags"]), row
    assert row["escaped_pids"] and not any(_alive(int(p)) for p in row["escaped_pids"])


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
    assert "eval.sandbox.max_data_mib" in row["reason"], row["reason"]


@NEEDS_FULL
@pytest.mark.slow
def test_disk_fill_stops_at_the_file_size_cap(hostile_run: dict) -> None:
    row = _check(hostile_run, "disk_fill", "error", "exception")
    assert "File too large" in row["reason"], row["reason"]
    assert "eval.sandbox.max_file_mib" in row["reason"], row["reason"]
    assert row["fill_bytes"] <= 64 << 20


def test_agent_process_is_not_dumpable() -> None:
    """What `agent.run` does first: other processes of the user lose its /proc/<pid>/environ."""
    code = (
        "import ctypes; from evaluator.containment.confine import make_undumpable; make_undumpable(); "
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"  # PR_GET_DUMPABLE
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "0"
    assert "make_undumpable()" in (ROOT / "agent/run.py").read_text()


@NEEDS_FULL
@pytest.mark.slow
def test_signals_to_outside_processes_are_blocked(hostile_run: dict) -> None:
    _check(hostile_run, "signal_outside", "rejected", "sandbox_violation:signal")
    assert hostile_run["decoy_survived"]


@NEEDS_FULL
@pytest.mark.slow
def test_fresh_interpreter_mode_is_confined_the_same_way(tmp_path: Path) -> None:
    """`eval.sandbox.mode = "fresh"` starts candidates through `python -m evaluator.harness`."""
    run = _judge_hostile(tmp_path, "fresh", ["read_environ", "escaped_grandchild", "write_tmp"])
    row = _check(run, "read_environ", "rejected", "sandbox_violation:proc")
    assert SECRET not in row["stdout"]
    _check(run, "write_tmp", "rejected", "sandbox_violation:write")
    row = _check(run, "escaped_grandchild", "rejected", "sandbox_violation:process")
    assert row["escaped_pids"] and not any(_alive(int(p)) for p in row["escaped_pids"])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------- as an unprivileged user


@pytest.mark.slow
def test_unprivileged_user_is_confined_too() -> None:
    """`python -m evaluator.confine --check` as uid 65534: no capabilities to drop, so Landlock,
    seccomp and the user + PID namespaces carry the weight. A decoy process of the same user
    holds a fake secret; every attempt (its environ, $HOME, /tmp, TCP, UDP, a signal to it, an
    escaped grandchild) must be blocked. Uses a system python3 with pyseccomp and the evaluator
    package copied to a folder that user can read, as the test's own interpreter and the checkout
    may live where it cannot."""
    import pyseccomp

    python = next(
        (p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), None
    )
    if os.geteuid() != 0 or not shutil.which("setpriv") or python is None:
        pytest.skip("needs root (to switch to uid 65534), setpriv and a system python3")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run([*as_nobody, python, "-c", "import ctypes"], capture_output=True).returncode:
        pytest.skip(f"uid 65534 cannot run {python}")
    deps = Path(tempfile.mkdtemp(prefix="atenforge_unpriv_"))  # tmp_path's parents are private
    try:
        shutil.copy(pyseccomp.__file__, deps)
        # the checkout itself may sit under a folder only root can enter (a mktemp -d clone)
        shutil.copytree(ROOT / "evaluator", deps / "evaluator")
        for folder, _, files in os.walk(deps):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        env = {"PATH": os.defpath, "HOME": "/nonexistent", "PYTHONPATH": str(deps)}
        proc = subprocess.run(
            [*as_nobody, python, "-m", "evaluator.containment.confine", "--check", "--json"],
            capture_output=True, text=True, timeout=120, cwd="/", env=env,
        )  # fmt: skip
    finally:
        shutil.rmtree(deps, ignore_errors=True)
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-2000:])
    result = json.loads(proc.stdout)
    assert result["containment"] == "full", result
    assert result["_missing"] == [], result
    assert {"network", "proc", "signal", "write"} <= set(result["_violations"]), result
    assert result["_tree"], "the leftover grandchild was not reported"


# ---------------------------------------------------------------- reporting and refusing


def test_run_json_environment_says_how_far_candidates_are_confined() -> None:
    from evaluator.reports.runfolder import environment_info

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


_NO_NAMESPACE = """
import json, os, sys, time
from evaluator.containment import process_tree as confine_tree
job = sys.argv[1]


def no_namespaces():  # as on a machine where unprivileged user namespaces are disabled
    raise OSError(1, "Operation not permitted")


def target():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(os.path.join(job, "pid"), "w").write(str(os.getpid()))
            time.sleep(300)
        os._exit(0)
    os.wait()
    while not os.path.exists(os.path.join(job, "pid")):
        time.sleep(0.01)
    return 3


def report(event):
    open(os.path.join(job, "report"), "a").write(json.dumps(event) + "\\n")


confine_tree._unshare_pid_namespace = no_namespaces
confine_tree.run_contained(target, 400, report)
"""


def test_without_a_pid_namespace_the_subreaper_still_reports_and_kills_escapees(
    tmp_path: Path,
) -> None:
    """The fallback: the sandbox process becomes a child subreaper, so a setsid() grandchild
    comes back to it when the candidate ends; it is reported and killed."""
    proc = subprocess.run(
        [sys.executable, "-c", _NO_NAMESPACE, str(tmp_path)], cwd=ROOT, timeout=60
    )
    assert proc.returncode == 3  # the candidate's own exit code
    events = [json.loads(line) for line in (tmp_path / "report").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["process"]
    assert not _alive(int((tmp_path / "pid").read_text()))


def test_mkdir_of_an_existing_directory_is_no_violation_but_a_new_one_is(tmp_path: Path) -> None:
    """Inductor's C++ builder calls mkdir(exist_ok=True) on the current directory: that can only
    fail with EEXIST, so it is not evidence; making a new directory outside the writable ones is."""
    outside = tmp_path / "outside"
    outside.mkdir()
    script = f"""
import json, os
from evaluator.containment.watch import ViolationWatch
seen = []
ViolationWatch([], [{str(tmp_path / 'scratch')!r}], seen.append).install()
os.makedirs({str(outside)!r}, exist_ok=True)
print(json.dumps(seen))
os.mkdir({str(outside / 'new')!r})
print(json.dumps(seen))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    first, second = (json.loads(line) for line in out.stdout.splitlines()[:2])
    assert first == []
    assert [e["kind"] for e in second] == ["write"]
