"""Which GPUs the CUDA evaluator and the rollouts use, and the environment of every process on them.

One GPU worker per visible device (``visible_gpus``); one compile pool shared by all of them,
sized so each GPU worker keeps a core (``compile_pool_size``); one GPU per rollout, taken
from a per-host slot lock (``gpu_slot``), so N rollouts on N GPUs never share one even
though Snakemake's ``--resources gpu=N`` only counts them. NVLink multicast stays off in
every process started here: the evaluator needs no NCCL, and multicast objects have been
seen to fail on the lent multi-GPU hosts.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from maxcode.evaluate.cuda.figures import nvidia_smi

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def with_multicast_off(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with NVLink multicast switched off for NCCL, torch symmetric memory and NVSHMEM."""
    return {**env, **MULTICAST_OFF}


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """Device entries to start one GPU worker each on, as CUDA_VISIBLE_DEVICES names them.

    With CUDA_VISIBLE_DEVICES set, its entries in order (indices, ``GPU-<uuid>`` or
    ``MIG-<uuid>``), stopping where CUDA stops: at the first empty or invalid entry, so
    ``""`` and ``"-1"`` mean no GPU; a repeated entry gets one worker. Unset: every device
    nvidia-smi lists, by index.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        count = 0
        while nvidia_smi(count):
            count += 1
        return [str(i) for i in range(count)]
    out: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            break
        if entry not in out:
            out.append(entry)
    return out


def compile_pool_size(configured: int, gpu_workers: int, cpus: int | None = None) -> int:
    """Parallel compile jobs feeding all GPU workers of one evaluator.

    ``configured`` (CudaEvalConfig.compile_workers) wins when set. Otherwise every core but one
    per GPU worker: each worker's timed calls launch kernels from its host thread, and a
    compiler on that core delays the launches (compiles also run niced). One pool for all
    workers, not one per GPU, so a GPU whose candidates compile slowly does not leave cores
    idle while another GPU's queue is empty.
    """
    if configured:
        return configured
    cpus = cpus or os.cpu_count() or 1
    return max(1, cpus - gpu_workers)


@contextmanager
def gpu_slot(slots_dir: Path, devices: list[str], poll_s: float = 0.5) -> Iterator[str]:
    """Hold one of ``devices`` for the duration: an exclusive lock per device and host.

    A rollout job pins CUDA_VISIBLE_DEVICES to the device it holds. Locks are files under
    ``slots_dir/<host>/``, held by an open descriptor, so a killed job frees its GPU at once
    and a shared file system never makes two hosts wait for each other. When every device
    is held (more GPU jobs than GPUs), waits for the first to come free.
    """
    if not devices:
        raise RuntimeError(
            "no GPU visible to hold for this job; run CUDA rollouts on a machine with an NVIDIA GPU "
            "(or check CUDA_VISIBLE_DEVICES)"
        )
    folder = Path(slots_dir) / socket.gethostname()
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        for device in devices:
            fd = os.open(folder / f"gpu-{device}.lock", os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield device
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        time.sleep(poll_s)


@contextmanager
def pinned_gpu(slots_dir: Path) -> Iterator[str | None]:
    """For one rollout job: hold one visible GPU and make it the only one this process sees.

    Snakemake's ``--resources gpu=N`` runs at most N GPU jobs at once but does not say which
    GPU each gets; the slot lock does, and CUDA_VISIBLE_DEVICES pins the job's evaluator to
    it. Yields the device entry (recorded in the rollout's records), or None when no GPU is
    visible (the evaluator then says so itself if it needs one).
    """
    devices = visible_gpus()
    if not devices:
        yield None
        return
    with gpu_slot(slots_dir, devices) as device:
        previous = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = device
        try:
            yield device
        finally:
            if previous is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = previous
