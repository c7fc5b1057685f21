"""The sandbox of every process that imports candidate code (compile job, GPU worker's children).

A secret is planted in the evaluator's environment and a listener on the host's 127.0.0.1;
``hostile/exfiltrate.py`` tries to print, raise, write and send the secret, to write a file
on the host and into the build cache. Nothing may get out; the honest twins still pass. The
CPU tests drive the real compile job and a real zygote (a CPU stand-in for the GPU work);
the GPU test runs the whole evaluator.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from maxcode.errors import SandboxUnavailable
from maxcode.evaluate.cuda import CudaEvalConfig, CudaEvaluator
from maxcode.evaluate.cuda.build import NVCC_TIME_DIR_VAR, BuildCache, ExtensionSpec
from maxcode.evaluate.cuda.evaluator import _InputsAhead, _Job
from maxcode.evaluate.cuda.gpus import GpuQueue
from maxcode.evaluate.cuda.supervisor import GpuWorker
from maxcode.evaluate.result import Status
from maxcode.evaluate.sandbox import confinement, ensure_uvm_node, uid_slot
from maxcode.evaluate.scrub import allowed_env, scrub, scrub_tree, secret_values

from .cuda_fixtures import hostile, requires_gpu

HERE = Path(__file__).parent
SRC = HERE.parents[2] / "src"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root here")
# A CPython extension without torch headers (builds in about a second), in place of the
# hostile candidate's CUDA kernel on the CPU.
CPU_EXT = r'''
ext = load_inline(name="cpuext", no_implicit_headers=True, cpp_sources=r"""
#include <Python.h>
static PyObject* f(PyObject*, PyObject* a) { return PyLong_FromLong(2 * PyLong_AsLong(a)); }
static PyMethodDef m[] = {{"f", f, METH_O, ""}, {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "cpuext", nullptr, -1, m};
PyMODINIT_FUNC PyInit_cpuext() { return PyModule_Create(&d); }
""")


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()

    def forward(self, a, b):
        raise RuntimeError(f"leaking through the reason: {SECRET} uid={os.getuid()}")
'''


@pytest.fixture
def secret(monkeypatch) -> str:
    value = f"sk-ant-planted-{uuid.uuid4().hex}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", value)
    return value


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that records everything it receives."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                received.append(conn.recv(1 << 16))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


def hostile_source(port: int, escape: Path, poison: Path, cpu: bool) -> str:
    source = hostile("exfiltrate")
    source = source.replace("PORT = 0", f"PORT = {port}")
    source = source.replace('ESCAPE = ""', f"ESCAPE = {str(escape)!r}")
    source = source.replace('POISON = ""', f"POISON = {str(poison)!r}")
    if cpu:
        source = source[: source.index("cuda_source = ")] + CPU_EXT
    return source


def honest_cpu_source() -> str:
    head = "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
    head += "SECRET = 'none'\n"
    return head + CPU_EXT.replace("raise RuntimeError(", "return a + b  # (")


def files_containing(root: Path, needle: str) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and needle.encode() in path.read_bytes():
            hits.append(str(path))
    return hits


# -- the scrubber and the environment allowlist ------------------------------------------------


def test_allowed_env_keeps_the_gpu_and_drops_secrets(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x1234567")
    monkeypatch.setenv("TRITON_API_TOKEN", "tok-1234567")  # allowed prefix, secret name
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("SOME_OTHER_SETTING", "x")
    env = allowed_env({"PYTHONPATH": "/src"})
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["PYTHONPATH"] == "/src"
    assert env["HOME"] == env["TMPDIR"] == "/tmp"
    assert not {"ANTHROPIC_API_KEY", "TRITON_API_TOKEN", "SOME_OTHER_SETTING"} & set(env)


def test_scrub_replaces_secret_values_in_nested_text():
    secrets = secret_values(
        {"OPENAI_API_KEY": "sk-proj-abc123", "PATH": "/usr/bin", "X_TOKEN": "1"}
    )
    assert secrets == [("OPENAI_API_KEY", "sk-proj-abc123")]  # too short to be one: "1"
    reply = {"reason": "bad sk-proj-abc123!", "tail": ["'sk-proj-abc123'"], "n": 3}
    clean = scrub_tree(reply, secrets)
    assert "sk-proj-abc123" not in json.dumps(clean)
    assert clean["reason"] == "bad [redacted:OPENAI_API_KEY]!" and clean["n"] == 3
    assert scrub("nothing here", secrets) == "nothing here"


def test_gpu_replies_are_scrubbed_before_they_become_results(secret, tmp_path, saxpy_task):
    """Defence in depth: text a child sends back is scrubbed even if a secret got in."""

    class Worker:
        sandbox = "full"
        gpu = "0"

        def run(self, job: dict) -> dict:
            return {"status": "runtime_error", "reason": f"boom {secret}", "output_tail": secret}

    evaluator = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    evaluator._arch = "9.0"
    jobs = GpuQueue(evaluator._gpu_cond)
    job = _Job(0, saxpy_task, "", tmp_path / "j")
    jobs.put(job, None)
    jobs.close()
    evaluator._gpu_jobs(Worker(), jobs, _InputsAhead(evaluator, [job]), lambda i, r: None)
    text = json.dumps(job.result.to_dict())
    assert secret not in text and "[redacted:ANTHROPIC_API_KEY]" in job.result.reason
    assert job.result.sandbox == "full"
    assert job.result.figures["gpu_device"] == "0"


# -- the compile job ------------------------------------------------------------------------------


@needs_root
def test_compile_job_cannot_leak_write_or_connect(secret, listener, tmp_path, saxpy_task):
    port, received = listener
    cache = tmp_path / "cache"
    escape, poison = tmp_path / "escaped.txt", cache / "build" / "ext" / "planted.txt"
    # no builds read from its source: its code must run, in the compile job
    config = CudaEvalConfig(cuda_arch="9.0", host_pch=False, build_ahead=False)
    evaluator = CudaEvaluator(config, cache, gpus=[])
    assert evaluator.jail.level == "full"
    job = _Job(0, saxpy_task, hostile_source(port, escape, poison, cpu=True), cache / "runs" / "j")
    assert evaluator._compile(job) is True  # its extension builds (through the evaluator)
    log = (job.job_dir / "compile_job.err").read_text()
    assert "connect refused" in log and "refused" in log.split("write", 1)[1]
    assert not escape.exists() and not poison.exists()
    assert received == []
    assert files_containing(tmp_path, secret) == []
    assert secret not in json.dumps(job.figures)


@needs_root
def test_honest_twin_compiles_in_the_sandbox(tmp_path, saxpy_task):
    evaluator = CudaEvaluator(CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path, gpus=[])
    job = _Job(0, saxpy_task, honest_cpu_source(), tmp_path / "runs" / "j")
    assert evaluator._compile(job) is True
    assert [b["ok"] for b in job.figures["builds"]] == [True]


# -- the GPU worker's zygote and its per-candidate children ----------------------------------------


@pytest.fixture
def jailed_worker(secret, tmp_path):
    jail = confinement(tmp_path / "cache")
    (tmp_path / "runs").mkdir()
    worker = GpuWorker(
        gpu=None,
        preload=("torch",),
        extra_env={
            "PYTHONPATH": f"{SRC}{os.pathsep}{HERE}",
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),  # shared: private per child
        },
        log_path=tmp_path / "zygote.log",
        jail=jail,
        job_root=tmp_path / "runs",
    )
    worker.start()
    yield worker
    worker.close()


def run_job(worker: GpuWorker, root: Path, name: str, source: str) -> dict:
    job_dir = root / "runs" / name
    job_dir.mkdir()
    (job_dir / "candidate.py").write_text(source)
    job = {"entry": "cuda_standins:run_candidate", "job_dir": str(job_dir)}
    return worker.run({**job, "timeout_s": 60, "memory_limit_mb": 8192})


@needs_root
def test_worker_child_cannot_leak_write_or_connect(jailed_worker, secret, listener, tmp_path):
    port, received = listener
    escape, poison = tmp_path / "escaped.txt", tmp_path / "runs" / "other-job.txt"
    source = hostile_source(port, escape, poison, cpu=True).replace(
        "ext = load_inline(",
        "ext = None and load_inline(",  # the CPU stand-in builds nothing
    )
    reply = run_job(jailed_worker, tmp_path, "hostile", source)
    assert jailed_worker.sandbox == "full"
    assert reply["status"] == "runtime_error" and "uid=61" in reply["reason"]  # a dedicated uid
    assert "connect refused" in reply["output_tail"]
    assert not escape.exists() and not poison.exists()
    assert received == []
    assert secret not in json.dumps(reply)
    assert files_containing(tmp_path, secret) == []


@needs_root
def test_worker_children_get_a_fresh_tmp_each(jailed_worker, tmp_path):
    plant = "import os\nopen('/tmp/left-behind', 'w').write('x')\n" + honest_cpu_source()
    check = "import os\nassert not os.path.exists('/tmp/left-behind')\n" + honest_cpu_source()
    for name, src in (("plant", plant), ("check", check)):
        src = src.replace("ext = load_inline(", "ext = None and load_inline(")
        assert run_job(jailed_worker, tmp_path, name, src)["status"] == "ok", name


# -- the whole evaluator on the GPU -------------------------------------------------------------


# Cold, this test builds the PCH, the shared saxpy extension (host and .cu) and starts a
# zygote (about 45 s of compiling on the H100 box, then two GPU evaluations). Its own limits
# are set so that a hang turns into a result with a reason well inside the pytest limit.
GPU_TEST_LIMITS = {"compile_timeout_s": 240.0, "run_timeout_s": 120.0}


def _gpu_logs(cache: Path) -> str:
    """The tails of the GPU worker's and compile jobs' logs, for a failure message."""
    return "".join(
        f"\n--- {p.name}:\n" + p.read_text(errors="replace")[-3000:]
        for p in sorted((cache / "logs").glob("*.log"))
    )


@pytest.mark.gpu
@pytest.mark.timeout(600)
@requires_gpu
def test_evaluator_on_gpu_leaks_nothing_and_honest_twin_passes(
    secret, listener, tmp_path, saxpy_task
):
    port, received = listener
    cache = tmp_path / "cache"
    escape, poison = tmp_path / "escaped.txt", cache / "build" / "ext" / "planted.txt"
    source = hostile_source(port, escape, poison, cpu=False)
    try:
        with CudaEvaluator(CudaEvalConfig(**GPU_TEST_LIMITS), cache) as evaluator:
            bad, good = evaluator.evaluate_items(
                [(saxpy_task, source), (saxpy_task, hostile("good"))]
            )
    except Exception as err:
        pytest.fail(f"the evaluator raised {err!r}; logs:{_gpu_logs(cache)}")
    why = (
        f"good: {good.status.value} ({good.sandbox}) {good.reason} | "
        f"bad: {bad.status.value} ({bad.sandbox}) {bad.reason} | "
        f"good output: {good.figures.get('output_tail', '')} | "
        f"builds: {good.figures.get('builds', '')} | logs:{_gpu_logs(cache)}"
    )
    assert good.status is Status.OK and good.sandbox == "full", why
    assert bad.status is Status.RUNTIME_ERROR and bad.sandbox == "full", why
    assert "leaking through the reason" in bad.reason, why
    assert secret not in json.dumps([bad.to_dict(), good.to_dict()])
    assert not escape.exists() and not poison.exists() and received == []
    assert files_containing(tmp_path, secret) == []


@needs_root
def test_compilers_run_confined_with_the_allowlisted_environment(secret, tmp_path, saxpy_task):
    """The sources and flags are the candidate's: a linker told to write a map file on the
    host cannot."""
    escape = tmp_path / "escaped.map"
    source = honest_cpu_source().replace(
        'ext = load_inline(name="cpuext",',
        f'ext = load_inline(name="cpuext", extra_ldflags=["-Wl,-Map={escape}"],',
    )
    evaluator = CudaEvaluator(
        CudaEvalConfig(cuda_arch="9.0", host_pch=False), tmp_path / "cache", gpus=[]
    )
    job = _Job(0, saxpy_task, source, tmp_path / "cache" / "runs" / "map")
    assert evaluator._compile(job) is False and not escape.exists()
    assert job.result.status is Status.COMPILE_ERROR and "map" in job.result.compile_log.lower()
    assert job.result.sandbox == "full"
    assert files_containing(tmp_path, secret) == []


@needs_root
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_runs_confined_and_its_phase_times_come_back(tmp_path, monkeypatch):
    """nvcc in the launcher, with the benchmark's ``--time`` hook (failed on the H100 once:
    the CSV was written to a directory the build's uid could not write)."""
    times = tmp_path / "times"
    times.mkdir()
    monkeypatch.setenv(NVCC_TIME_DIR_VAR, str(times))
    cache = BuildCache(tmp_path / "build", "9.0", host_pch=False, jail=confinement(tmp_path))
    spec = ExtensionSpec.from_load_inline(
        name="k",
        cpp_sources="#include <Python.h>\nPyMODINIT_FUNC PyInit_k() { return nullptr; }",
        cuda_sources="__global__ void k(float* x) { x[0] = 1; }",
        no_implicit_headers=True,
    )
    outcome = cache.build(spec, timeout_s=300)
    # a CPU-only torch has no torch_cuda to link against: the compile steps are what counts
    assert outcome.ok or outcome.failed_step == "link", outcome.log
    assert outcome.steps["cuda"] > 0 and [p.name.split(".")[-2] for p in times.iterdir()] == [
        "cuda"
    ]
    assert all(p.stat().st_uid == os.geteuid() for p in (tmp_path / "build").rglob("*"))


@needs_root
def test_worker_children_write_shared_caches_only_privately(jailed_worker, tmp_path):
    """A candidate could plant compiled code in inductor's cache for a later reference."""
    write = "import os\nopen(os.environ['TORCHINDUCTOR_CACHE_DIR'] + '/planted', 'w').write('x')\n"
    src = (write + honest_cpu_source()).replace("ext = load_inline(", "ext = None and load_inline(")
    assert run_job(jailed_worker, tmp_path, "plant", src)["status"] == "ok"
    assert list((tmp_path / "inductor").iterdir()) == []


def test_a_host_without_namespaces_is_named_once_and_recorded(tmp_path, monkeypatch, capsys):
    from maxcode.evaluate import sandbox

    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    sandbox._jail_probe.cache_clear()
    try:
        first, second = confinement(tmp_path), confinement(tmp_path)
    finally:
        sandbox._jail_probe.cache_clear()
    assert first.helper is None and first.level.startswith("none: not root")
    assert first.wrap(["python3", "-c", "pass"]) == ["python3", "-c", "pass"]
    assert second.level == first.level
    assert capsys.readouterr().err.count("WITHOUT a sandbox") <= 1


def test_missing_uvm_node_is_created_before_a_confined_candidate_needs_it(tmp_path, monkeypatch):
    dev, bin_dir = tmp_path / "dev", tmp_path / "bin"
    dev.mkdir()
    bin_dir.mkdir()
    (dev / "nvidiactl").write_text("")
    tool = bin_dir / "nvidia-modprobe"  # stands in for the setuid tool: makes the node
    tool.write_text(f'#!/bin/sh\n[ "$1" = -u ] && touch {dev}/nvidia-uvm\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert ensure_uvm_node(dev) == "" and (dev / "nvidia-uvm").exists()
    (dev / "nvidia-uvm").unlink()
    tool.write_text("#!/bin/sh\necho 'no driver' >&2\nexit 1\n")
    assert "no driver" in ensure_uvm_node(dev)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "nvidia-modprobe is not on PATH" in ensure_uvm_node(dev)
    (dev / "nvidiactl").unlink()
    assert ensure_uvm_node(dev) == ""  # no NVIDIA driver at all: nothing to do


@needs_root
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU host reaches its GPU")
def test_a_gpu_unreachable_in_the_jail_steps_down_and_says_why(tmp_path):
    """Where no jail lets a child reach the GPU (here: none at all), the worker does not fail
    every candidate: it restarts unconfined and every result's sandbox level says why."""
    jail = confinement(tmp_path)
    (tmp_path / "runs").mkdir()
    worker = GpuWorker("0", ("torch",), {}, tmp_path / "worker.log")
    worker.jail, worker.job_root, worker.sandbox = jail, tmp_path / "runs", jail.level
    worker.start()
    try:
        assert worker.jail is None
        assert worker.sandbox.startswith("none: the GPU is unreachable inside the sandbox")
        assert "dedicated uid: libcuda.so.1" in worker.sandbox
        assert "the zygote's namespaces only" in worker.sandbox
    finally:
        worker.stop()


@pytest.fixture
def carried_with_a_mount_beneath(tmp_path):
    """A carried directory with a file system mounted inside it, as ``/usr`` is carried with the
    GPU driver mounted on its own at ``/usr/local/nvidia`` (the H100 box: squashfs)."""
    carried = tmp_path / "usr"
    beneath = carried / "local" / "nvidia"
    beneath.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "driver", str(beneath)], check=True)
    (beneath / "libcuda.so.1").write_text("driver")
    yield carried, beneath / "libcuda.so.1"
    subprocess.run(["umount", str(beneath)], check=True)


def launched(tmp_path: Path, argv: list[str], keep: list[Path] = ()) -> subprocess.CompletedProcess:
    """``argv`` run by the launcher as a dedicated uid, as compile jobs and the zygote run."""
    jail = confinement(tmp_path / "jail")
    with uid_slot() as uid:
        wrapped = jail.wrap(argv, keep=list(keep), uid=uid)
        return subprocess.run(
            wrapped, env=allowed_env(), capture_output=True, text=True, timeout=60
        )


def in_jailed_child(
    tmp_path: Path, printed: str, keep: list[Path] = (), as_uid: bool = True
) -> subprocess.CompletedProcess:
    """A child that calls ``jail_child`` as the zygote's children do (dropping to a dedicated uid
    unless ``as_uid`` is false), then prints the Python expression ``printed``."""
    job = tmp_path / "job"
    job.mkdir()
    child = (
        "import getpass, subprocess\n"
        "from maxcode.evaluate.sandbox import jail_child, uid_slot\n"
        "with uid_slot() as uid:\n"
        f"    jail_child({'uid' if as_uid else 'None'}, {str(job)!r}, {[str(k) for k in keep]!r}, 64)\n"
        f"    print({printed})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", child],
        env={**allowed_env(), "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_root
def test_the_launcher_keeps_mounts_beneath_a_carried_path(carried_with_a_mount_beneath, tmp_path):
    carried, library = carried_with_a_mount_beneath
    proc = launched(tmp_path, ["/bin/cat", str(library)], keep=[carried])
    assert proc.stdout == "driver", proc.stderr


@needs_root
def test_a_jailed_child_keeps_mounts_beneath_a_carried_path(carried_with_a_mount_beneath, tmp_path):
    carried, library = carried_with_a_mount_beneath
    proc = in_jailed_child(tmp_path, f"open({str(library)!r}).read()", [carried], as_uid=False)
    assert proc.stdout.strip() == "driver", proc.stderr


@pytest.fixture
def carried_under_tmp(tmp_path):
    """A carried directory under /tmp, as the build cache of a benchmark run with ``--work /tmp/...``
    or a temporary cache is: the jail once covered its fresh /tmp with a 64 KiB tmpfs then (taken
    for an untraversable ancestor), so torch.compile of the reference failed with "No space left
    on device" in every such run on the H100 (2026-11-25)."""
    if Path(tempfile.gettempdir()) != Path("/tmp") or Path("/tmp") not in tmp_path.parents:
        pytest.skip("needs the test's temporary directory under /tmp")
    carried = tmp_path / "cache"
    carried.mkdir()
    return carried


WRITE_ONE_MIB = "head -c 1048576 /dev/zero > /tmp/big && wc -c < /tmp/big"


@needs_root
def test_the_launcher_leaves_the_private_tmp_its_size_with_a_carried_path_under_tmp(
    carried_under_tmp, tmp_path
):
    proc = launched(tmp_path, ["/bin/sh", "-c", WRITE_ONE_MIB], keep=[carried_under_tmp])
    assert proc.stdout.strip() == "1048576", proc.stderr


@needs_root
def test_the_launcher_gives_its_dedicated_uid_a_writable_dev_shm(tmp_path):
    """Python's semaphores and torch's shared memory live in /dev/shm; the launcher's private one
    was root's 0700 tmpfs, so a compile job running as the dedicated uid got "Permission denied"."""
    proc = launched(
        tmp_path, ["/bin/sh", "-c", "head -c 1000 /dev/zero > /dev/shm/x && wc -c < /dev/shm/x"]
    )
    assert proc.stdout.strip() == "1000", proc.stderr


@needs_root
def test_a_jailed_child_keeps_its_private_tmp_its_size_with_a_carried_path_under_tmp(
    carried_under_tmp, tmp_path
):
    write = f"subprocess.run(['/bin/sh', '-c', {WRITE_ONE_MIB!r}], capture_output=True, text=True).stdout"
    proc = in_jailed_child(tmp_path, write, [carried_under_tmp])
    assert proc.stdout.strip() == "1048576", proc.stderr


@needs_root
def test_a_jailed_child_can_name_its_user(tmp_path):
    """The dedicated uid has no passwd entry: getpass.getuser() raised KeyError there, and so did
    torch.compile of every reference on the H100 ("getpwuid(): uid not found: 61333")."""
    proc = in_jailed_child(tmp_path, "getpass.getuser()")
    assert proc.stdout.strip() == "sandbox", proc.stderr


def test_a_carried_directory_that_does_not_exist_yet_is_an_error(tmp_path):
    """The GPU zygote once started before the build cache existed: the jail left it out, and
    every build made later was invisible to the candidates' processes (the H100, 2026-11-24)."""
    with pytest.raises(ValueError, match="must exist before the launch"):
        confinement(tmp_path / "cache").wrap(["/bin/true"], keep=[tmp_path / "build"])


@pytest.fixture
def host_without_namespaces(monkeypatch):
    from maxcode.evaluate import sandbox

    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    sandbox._jail_probe.cache_clear()
    yield
    sandbox._jail_probe.cache_clear()


def test_a_required_full_sandbox_refuses_a_host_that_cannot_give_it(
    host_without_namespaces, tmp_path
):
    required = CudaEvaluator(CudaEvalConfig(require_full_sandbox=True), tmp_path / "a")
    with pytest.raises(SandboxUnavailable, match=r"require_full_sandbox.*none: not root"):
        required.jail  # noqa: B018 - the property probes the host
    best_effort = CudaEvaluator(CudaEvalConfig(), tmp_path / "b")
    assert best_effort.jail.level.startswith("none: not root")
