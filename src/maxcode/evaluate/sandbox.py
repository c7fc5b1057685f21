"""Run one untrusted program under limits, isolated as far as this machine allows.

The work is done by a small compiled launcher (``sandbox_helper.cpp``) so that a run costs
about a millisecond over a bare ``subprocess`` call. As root it gives every run a fresh
mount, network, pid, IPC and UTS namespace, a size-capped private tmpfs as ``/tmp`` and
cwd, empty read-only mounts over hidden paths (tests with expected outputs, caches, the
project), a dedicated unprivileged uid per concurrent run (so ``RLIMIT_NPROC`` counts only
that run's processes and a fork bomb stops at the limit), and the kernel kills every process
left in the pid namespace when the run ends. Without root it keeps the rlimits, the scrubbed
environment and process-group kill, and :func:`isolation_statement` says what is missing.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import json
import os
import random
import re
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

HELPER_SOURCE = Path(__file__).with_name("sandbox_helper.cpp")
HELPER_LINKING = (["-static"], ["-static-libstdc++", "-static-libgcc"])  # tried in order
SCRUBBED_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"}
UID_BASE = 61000  # dedicated uids 61000..61511, one per concurrent run on the machine
UID_SLOTS = 512
# Fixed paths: every process on the machine must see the same locks.
SLOT_LOCK_DIR = Path("/tmp/maxcode-sandbox-uids")
CPU_LOCK_DIR = Path("/tmp/maxcode-sandbox-cpus")
MEMORY_MESSAGES = (b"bad_alloc", b"Cannot allocate memory", b"out of memory", b"mmap failed")


class SandboxError(RuntimeError):
    """The sandbox itself could not run (not the candidate failing); the message says why."""


@dataclass(frozen=True)
class Limits:
    """Per-run limits; defaults follow PIE (500 MB address space)."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 500
    output_bytes: int = 16 << 20
    stderr_bytes: int = 64 << 10
    file_bytes: int = 16 << 20
    tmpfs_mb: int = 64
    processes: int = 16

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_mb", "output_bytes", "file_bytes", "tmpfs_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox limit {name} must be > 0, got {getattr(self, name)}")
        if self.processes < 1:
            raise ValueError(f"sandbox limit processes must be >= 1, got {self.processes}")


@dataclass
class RunOutcome:
    """How one sandboxed run ended, with what it printed (capped)."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    output_limited: bool
    wall_s: float
    cpu_s: float
    maxrss_kb: int
    stdout: bytes
    stderr: bytes

    def memory_exceeded(self, limit_mb: int) -> bool:
        """The program died after an allocation failed under the address-space limit.

        Seen as an allocator message on stderr (C++ ``bad_alloc``) or, for C code that
        writes through a failed ``malloc``, as a crash with resident memory near the limit.
        """
        crashed = self.signal is not None or (self.exit_code or 0) != 0
        near_limit = self.maxrss_kb >= 0.8 * limit_mb * 1024
        return crashed and (near_limit or any(m in self.stderr for m in MEMORY_MESSAGES))


def build_helper(cache_dir: Path) -> Path:
    """Compile the launcher once per source version; safe when processes race (atomic rename).

    Linked statically where the C library allows it: loading libstdc++ at every launch
    would cost about a millisecond.
    """
    recipe = json.dumps(HELPER_LINKING).encode()
    digest = hashlib.sha256(HELPER_SOURCE.read_bytes() + recipe).hexdigest()[:16]
    # absolute: the launcher is started from each run's private working directory
    out = Path(cache_dir).resolve() / "sandbox" / f"mcbox-{digest}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    errors = []
    for link in HELPER_LINKING:
        cmd = ["g++", "-O2", "-std=c++17", *link, "-o", str(tmp), str(HELPER_SOURCE)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            os.replace(tmp, out)
            return out
        errors.append(f"{' '.join(link)}: {proc.stderr.strip()[:1000]}")
    tmp.unlink(missing_ok=True)
    raise SandboxError(
        f"could not build the sandbox launcher from {HELPER_SOURCE} with g++ "
        f"({'; '.join(errors)}); install g++ (>= 9) or fix the compiler on PATH"
    )


@functools.cache
def _probe(helper: str) -> str:
    """Why full isolation is unavailable ("" when it works), detected once per process."""
    if os.geteuid() != 0:
        return "not root"
    r, w = os.pipe()
    try:
        with uid_slot() as slot:  # a free uid: a busy one could fail the probe
            uid = str(slot)
            proc = subprocess.run(
                [helper, "--status-fd", str(w), "--uid", uid, "--gid", uid, "--", "/bin/true"],
                pass_fds=(w,),
                env=SCRUBBED_ENV,
                capture_output=True,
                timeout=30,
            )
    finally:
        os.close(w)
        status = _read_all(r)
    if proc.returncode == 0 and "exit=0 " in status:
        return ""
    error = status.split("setup_error=", 1)[-1].strip() or proc.stderr.decode(errors="replace")
    return f"launcher probe failed: {error.strip()[:200]}"


def isolation_statement(missing: str) -> str:
    """One line recorded with every result: the isolation actually in force.

    ``missing`` says why namespaces and the dedicated uid are unavailable ("" if they work).
    """
    common = "rlimits(cpu,as,fsize,nofile,core), scrubbed env, stdout/stderr caps, wall-time kill"
    if not missing:
        return (
            "namespaces(mount,net,pid,ipc,uts): no network, private size-capped /tmp as cwd, "
            "hidden tests/caches/project, all processes killed at exit; dedicated uid with "
            f"RLIMIT_NPROC; {common}"
        )
    return (
        f"NO namespaces ({missing}): network reachable, filesystem readable/writable as the "
        "calling user, RLIMIT_NPROC shared with that user, process-group kill only; " + common
    )


class Sandbox:
    """Runs programs with :meth:`run`; one instance can be shared by threads.

    ``PROGRAM`` in an argv stands for the copy of ``copy_program`` in the run's private
    directory, so the same argv works with and without namespaces.
    """

    PROGRAM = "{program}"

    def __init__(self, cache_dir: Path, hide: Sequence[Path] = ()):
        self.helper = build_helper(cache_dir)
        missing = _probe(str(self.helper))
        self.namespaces = not missing  # namespaces and a dedicated uid per run, or neither
        self.isolation = isolation_statement(missing)
        self.level = f"none: {missing}" if missing else "full"  # for EvalResult.sandbox
        self.hide = tuple(str(Path(p).resolve()) for p in hide)

    def run(
        self,
        argv: Sequence[str],
        limits: Limits,
        stdin_path: Path | None = None,
        hide: Sequence[Path] = (),
        cpu: int | None = None,
        copy_program: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> RunOutcome:
        """Run ``argv`` under ``limits``; ``copy_program`` is first copied into its private cwd."""
        with self._slot() as uid, self._workdir() as workdir:
            program = f"{workdir}/prog"
            argv = [a.replace(self.PROGRAM, program) for a in argv]
            cmd = [str(self.helper), "--wall-ms", str(int(limits.wall_s * 1000))]
            cmd += ["--cpu-s", str(limits.cpu_s), "--as-bytes", str(limits.memory_mb << 20)]
            cmd += ["--fsize-bytes", str(limits.file_bytes), "--nproc", str(limits.processes)]
            cmd += ["--tmpfs-bytes", str(limits.tmpfs_mb << 20)]
            cmd += ["--stdin", str(stdin_path or "/dev/null"), "--workdir", workdir]
            if cpu is not None:
                cmd += ["--cpu", str(cpu)]
            if uid is not None:
                cmd += ["--uid", str(uid), "--gid", str(uid)]
            if not self.namespaces:
                cmd.append("--no-ns")
            if copy_program is not None:
                cmd += ["--copy", str(copy_program)]
            for p in (*self.hide, *(str(Path(h).resolve()) for h in hide)):
                cmd += ["--hide", p]
            return self._launch(cmd, argv, limits, pass_fds)

    def _launch(
        self, cmd: list[str], argv: Sequence[str], limits: Limits, pass_fds: Sequence[int]
    ) -> RunOutcome:
        status_r, status_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [*cmd, "--status-fd", str(status_w), "--", *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(status_w, *pass_fds),
                env=SCRUBBED_ENV,
                start_new_session=True,
            )
        except OSError as err:
            os.close(status_r)
            os.close(status_w)
            raise SandboxError(f"could not start the sandbox launcher {cmd[0]}: {err}") from err
        os.close(status_w)
        try:
            stdout, stderr, limited = _read_capped(proc, limits)
        finally:
            if proc.poll() is None:
                _kill(proc)
            proc.wait()
            status = _read_all(status_r)
        return _outcome(status, stdout, stderr, limited, cmd[0])

    @contextmanager
    def _workdir(self) -> Iterator[str]:
        """The program's cwd: the launcher's private tmpfs, else a fresh temp dir (no root)."""
        if self.namespaces:
            yield "/tmp"
            return
        with tempfile.TemporaryDirectory(prefix="mcbox-") as workdir:
            yield workdir

    @contextmanager
    def _slot(self) -> Iterator[int | None]:
        if not self.namespaces:
            yield None
            return
        with uid_slot() as uid:
            yield uid


@contextmanager
def uid_slot() -> Iterator[int]:
    """A uid no other concurrent run (in any process on this machine) is using."""
    SLOT_LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    start = random.randrange(UID_SLOTS)
    for i in range(UID_SLOTS):
        uid = UID_BASE + (start + i) % UID_SLOTS
        fd = os.open(SLOT_LOCK_DIR / f"{uid}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)  # releases the lock
        return
    raise SandboxError(
        f"all {UID_SLOTS} sandbox uids are busy; lower the number of parallel evaluators"
    )


@contextmanager
def cpu_slot(cpus: Sequence[int]) -> Iterator[int]:
    """A CPU no other evaluation on this machine (any process) is timing on; waits if none.

    Pinning each running evaluation to its own CPU keeps timed programs from sharing a core,
    across all evaluators of all processes (several Snakemake jobs included).
    """
    if not cpus:
        raise ValueError("cpu_slot needs at least one CPU")
    CPU_LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
    fds = {c: os.open(CPU_LOCK_DIR / f"{c}.lock", os.O_CREAT | os.O_RDWR, 0o600) for c in cpus}
    chosen = None
    try:
        while chosen is None:
            for cpu in random.sample(list(cpus), len(cpus)):
                try:
                    fcntl.flock(fds[cpu], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                chosen = cpu
                break
            else:
                time.sleep(0.005)
        yield chosen
    finally:
        for fd in fds.values():
            os.close(fd)  # closing the held one releases its lock


def _read_capped(proc: subprocess.Popen, limits: Limits) -> tuple[bytes, bytes, bool]:
    """Collect stdout/stderr up to their caps; kill on overflow or past the backstop deadline."""
    caps = {proc.stdout: limits.output_bytes, proc.stderr: limits.stderr_bytes}
    chunks: dict = {proc.stdout: [], proc.stderr: []}
    sizes = {proc.stdout: 0, proc.stderr: 0}
    deadline = time.monotonic() + limits.wall_s + 5.0  # the launcher enforces wall_s itself
    limited = False
    with selectors.DefaultSelector() as sel:
        for f in caps:
            sel.register(f, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(proc)
                break
            for key, _ in sel.select(timeout=left):
                data = os.read(key.fd, 1 << 16)
                f = key.fileobj
                if not data:
                    sel.unregister(f)
                    continue
                room = caps[f] - sizes[f]
                chunks[f].append(data[:room] if room > 0 else b"")
                sizes[f] += len(data)
                if sizes[f] > caps[f] and f is proc.stdout:
                    limited = True
                    _kill(proc)
    for f in caps:
        f.close()
    return b"".join(chunks[proc.stdout]), b"".join(chunks[proc.stderr]), limited


def _kill(proc: subprocess.Popen) -> None:
    """Kill the launcher; its init dies with it (PDEATHSIG) and takes the namespace along."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _read_all(fd: int) -> str:
    parts = []
    while chunk := os.read(fd, 4096):
        parts.append(chunk)
    os.close(fd)
    return b"".join(parts).decode(errors="replace")


def _outcome(status: str, stdout: bytes, stderr: bytes, limited: bool, helper: str) -> RunOutcome:
    lines = status.strip().splitlines()
    line = lines[-1] if lines else ""  # init's report comes last
    fields = dict(kv.split("=", 1) for kv in line.split(" setup_error=")[0].split() if "=" in kv)
    errors = [ln.split(" setup_error=", 1)[1] for ln in lines if " setup_error=" in ln]
    setup_error = next((e for e in errors if e), "")
    if setup_error and not limited:
        raise SandboxError(f"sandbox launcher {helper} failed to set up the run: {setup_error}")
    if not fields:
        if limited:  # killed for output before init reported
            return RunOutcome(None, signal.SIGKILL, False, True, 0.0, 0.0, 0, stdout, stderr)
        raise SandboxError(f"sandbox launcher {helper} ended without a status line: {status!r}")
    code, sig = int(fields["exit"]), int(fields["signal"])
    return RunOutcome(
        exit_code=code if code >= 0 else None,
        signal=sig or None,
        timed_out=fields["timeout"] == "1",
        output_limited=limited,
        wall_s=int(fields["wall_ns"]) / 1e9,
        cpu_s=(int(fields["user_us"]) + int(fields["sys_us"])) / 1e6,
        maxrss_kb=int(fields["maxrss_kb"]),
        stdout=stdout,
        stderr=stderr,
    )


# -- long-lived processes that import candidate code (the CUDA zygote, compile jobs) ----------

# The fresh tmpfs mounts a jail makes, 0700 until chowned to the dedicated uid: never covered
# as untraversable (a 64 KiB cover over /tmp, when a carried path lay under it, left candidates
# and torch.compile no room: "No space left on device").
FRESH_PRIVATE = frozenset({"/tmp", "/dev/shm"})
JAIL_TMPFS_MB = 8192  # a cap on the private /tmp, not a reservation (tmpfs grows on use)
JAIL_NPROC = 16384  # threads count: torch starts one pool per core


@dataclass(frozen=True)
class Confinement:
    """How a Python process that imports candidate code is launched.

    ``wrap`` puts an argv under the launcher with every mount read-only, a private ``/tmp``
    and ``/dev/shm``, no network (its own empty network namespace), its own pid, IPC and
    UTS namespaces, and only ``writable`` directories writable; ``level`` is recorded with
    every result: ``full``, or ``none: <why>`` when this host allows no namespaces (the
    argv then runs as it is, with the allowlisted environment only).
    """

    helper: str | None
    level: str

    def wrap(
        self,
        argv: Sequence[str],
        writable: Sequence[Path] = (),
        keep: Sequence[Path] = (),
        uid: int | None = None,
        workdir: Path | None = None,
    ) -> list[str]:
        """``workdir``: the cwd inside (default: the private ``/tmp``)."""
        if self.helper is None:
            return list(argv)
        cmd = [self.helper, "--ro-root", "--stdin", "-", "--status-fd", "2"]
        cmd += ["--workdir", str(workdir or "/tmp")]
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        fsize = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        cmd += ["--wall-ms", "0", "--cpu-s", "0", "--as-bytes", "0"]
        cmd += ["--fsize-bytes", str(fsize if fsize != resource.RLIM_INFINITY else 1 << 40)]
        cmd += ["--nofile", str(min(nofile, 1 << 20)), "--nproc", str(JAIL_NPROC)]
        cmd += ["--tmpfs-bytes", str(JAIL_TMPFS_MB << 20)]
        if uid is not None:
            cmd += ["--uid", str(uid), "--gid", str(uid)]
        for p in writable:
            cmd += ["--writable", str(Path(p).resolve())]
        for p in carried_paths(keep):
            cmd += ["--keep", p]
        program = argv[0] if "/" in argv[0] else shutil.which(argv[0]) or argv[0]
        return [*cmd, "--", program, *argv[1:]]  # the launcher execs without a PATH search


# The launcher's status line (on stderr for confined processes): how the program ended.
STATUS_LINE = re.compile(r"^exit=(-?\d+) signal=(\d+) timeout=\d .*setup_error=(.*)$", re.M)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 40`` for a real-time signal Python has no name for."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


# The exit status confined_returncode gives when the program never ran or never reported.
LAUNCH_FAILED = 111


def confined_returncode(stderr: str) -> tuple[int, str]:
    """(the program's exit status as ``Popen.returncode`` has it, stderr without the status
    lines): the launcher itself exits 0 whenever it could report."""
    found = STATUS_LINE.findall(stderr)
    rest = STATUS_LINE.sub("", stderr).rstrip("\n")
    if not found:
        return LAUNCH_FAILED, rest + "\nsandbox launcher gave no status"
    errors = [setup_error.strip() for _, _, setup_error in found if setup_error.strip()]
    if errors:
        return LAUNCH_FAILED, rest + f"\nsandbox setup failed: {errors[0]}"
    code, sig, _ = found[-1]
    return (-int(sig) if int(sig) else int(code)), rest


def carried_paths(extra: Sequence[Path] = ()) -> list[str]:
    """Directories a confined Python needs to see: ``extra``, this interpreter and its import
    path (they may lie under ``/tmp``, which the jail replaces, or under a home only root may
    enter); never ``/`` or an ancestor of ``/tmp``, which would cover the private one."""
    missing = [str(p) for p in extra if not Path(p).is_dir()]
    if missing:  # dropped silently, it would be absent inside: a cache made later stays unseen
        raise ValueError(f"sandbox: carried directories must exist before the launch: {missing}")
    out: list[str] = []
    interpreter = (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)))
    for p in (*extra, *interpreter, *sys.path):
        if not p:
            continue
        path = Path(p).resolve()
        if path.is_dir() and not Path("/tmp").is_relative_to(path) and str(path) not in out:
            out.append(str(path))
    return out


@functools.cache
def _jail_probe(helper: str) -> str:
    """Why a confined process cannot be started here ("" when it can), checked once."""
    if os.geteuid() != 0:
        return "not root, so no mount/network namespaces or dedicated uid"
    with uid_slot() as uid:
        argv = Confinement(helper, "full").wrap(["/bin/true"], uid=uid)
        proc = subprocess.run(argv, env=SCRUBBED_ENV, capture_output=True, timeout=60)
    status = proc.stderr.decode(errors="replace")
    if proc.returncode == 0 and "exit=0 " in status:
        return ""
    return "launcher probe failed: " + status.split("setup_error=")[-1].strip()[:200]


def confinement(cache_dir: Path) -> Confinement:
    """The strongest confinement this host allows; a host without it is named once, in the log."""
    helper = str(build_helper(cache_dir))
    missing = _jail_probe(helper)
    if missing:
        say_once(f"candidate code runs WITHOUT a sandbox on this host: {missing}")
        return Confinement(None, f"none: {missing}")
    return Confinement(helper, "full")


@functools.cache
def say_once(message: str) -> None:
    print(f"maxcode: {message}", file=sys.stderr)


# Linux constants (uapi): not in the os module of Python 3.11.
CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV = 0x1, 0x2, 0x4
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS = 38


def ensure_uvm_node(dev: Path = Path("/dev")) -> str:
    """Make ``/dev/nvidia-uvm`` exist before a confined process needs it ("" when it does,
    else why not).

    The driver creates that node on the first CUDA use, through the setuid
    ``nvidia-modprobe``; a candidate running as a dedicated uid with ``no_new_privs`` under a
    read-only ``/dev`` cannot, and CUDA then reports no device at all. So the evaluator
    (unconfined) creates it first, as ``nvidia-smi`` and root's first CUDA call would."""
    if not (dev / "nvidiactl").exists() or (dev / "nvidia-uvm").exists():
        return ""
    tool = shutil.which("nvidia-modprobe")
    if tool is None:
        return f"{dev / 'nvidia-uvm'} is missing and nvidia-modprobe is not on PATH"
    proc = subprocess.run([tool, "-u", "-c=0"], capture_output=True, text=True, timeout=60)
    if (dev / "nvidia-uvm").exists():
        return ""
    return f"{dev / 'nvidia-uvm'} is missing; nvidia-modprobe -u said: {proc.stderr.strip()[:200]}"


def gpu_nodes_open_to_all() -> bool:
    """Whether a dedicated uid can still open the GPU (``/dev/nvidia*`` read-write for others)."""
    nodes = [p for p in Path("/dev").glob("nvidia*") if p.is_char_device()]
    return all(p.stat().st_mode & 0o006 == 0o006 for p in nodes)


def jail_child(
    uid: int | None,
    writable: Path,
    keep: Sequence[str],
    tmpfs_mb: int,
    private: Sequence[str] = (),
) -> None:
    """Per-candidate steps in a freshly forked child of a confined zygote.

    Right after ``fork`` the child has one thread, which ``unshare`` needs (the zygote has
    imported torch and runs several). The child gets its own mount namespace with a fresh
    ``/tmp`` and ``/dev/shm`` (nothing left by an earlier candidate), ``keep`` read-only
    (the zygote's writable job root among them), ``writable`` (its job directory) the only
    writable place, an empty private tmpfs over each ``private`` directory (shared caches:
    the child sees its own, empty and writable, at the path every library already knows),
    and then, when ``uid`` is given, drops root for that uid with no new privileges, so it
    cannot undo any of it.
    """
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sandbox: {what}: {os.strerror(err)}")

    def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
        enc = [None if x is None else x.encode() for x in (src, target, fstype)]
        check(libc.mount(*enc, flags, data.encode() or None), f"mount {target}")

    carried = sorted({*keep, str(writable)}, key=len)
    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in carried}  # mounts of this namespace
    opts = f"size={tmpfs_mb << 20},mode=0700"
    mount("sandbox", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("sandbox-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    covered: set[str] = set()
    for p in carried if uid is not None else ():
        for parent in reversed(Path(p).parents):
            if str(parent) in FRESH_PRIVATE or str(parent) == "/" or not parent.exists():
                continue  # the fresh /tmp and /dev/shm are the uid's own (chowned below)
            if parent.stat().st_mode & stat.S_IXOTH == 0:
                if str(parent) not in covered:
                    mount("cover", str(parent), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
                    covered.add(str(parent))
                break
    for p in carried:
        os.makedirs(p, exist_ok=True)
        mount(f"/proc/self/fd/{fds[p]}", p, None, MS_BIND | MS_REC)  # keeps mounts beneath
        ro = 0 if p == str(writable) else MS_RDONLY
        mount(None, p, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | ro)
        os.close(fds[p])
    for p in private:
        os.makedirs(p, exist_ok=True)  # under /tmp; elsewhere the parent made it
        mount("private", p, "tmpfs", MS_NOSUID | MS_NODEV, opts)
    if uid is None:
        return
    for p in (str(writable), "/tmp", "/dev/shm", *private):
        os.chown(p, uid, uid)
    resource.setrlimit(resource.RLIMIT_NPROC, (JAIL_NPROC, JAIL_NPROC))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
