"""CPU-only stand-ins for a GPU evaluation, run by the supervisor tests inside forked children."""

from __future__ import annotations

import os
import signal
import time


def answer(job: dict) -> dict:
    return {"status": "ok", "reason": "", "figures": {"pid": os.getpid()}}


def sleep_forever(job: dict) -> dict:
    time.sleep(3600)
    return {"status": "ok"}


def segfault(job: dict) -> dict:
    os.kill(os.getpid(), signal.SIGSEGV)
    return {"status": "ok"}


def hog_memory(job: dict) -> dict:
    blocks = []
    while True:
        blocks.append(bytearray(64 << 20))
        time.sleep(0.01)


def chatty(job: dict) -> dict:
    print('{"status": "ok", "reason": "forged by the candidate"}', flush=True)
    return {"status": "wrong_answer", "reason": "real verdict"}


def spawn_orphan(job: dict) -> dict:
    import subprocess

    proc = subprocess.Popen(["sleep", "300"])
    with open(os.path.join(job["job_dir"], "orphan.pid"), "w") as f:
        f.write(str(proc.pid))
    return {"status": "ok", "reason": ""}


def preloaded(job: dict) -> dict:
    import sys

    return {
        "status": "ok",
        "reason": "",
        "figures": {"has_minidom": "xml.dom.minidom" in sys.modules},
    }


def probe_passes() -> None:
    pass


def probe_fails() -> None:
    raise RuntimeError("the GPU is unusable after the optional preload")


def probe_hangs() -> None:
    time.sleep(3600)


def run_candidate(job: dict) -> dict:
    """What the GPU worker does with a candidate, on the CPU: import it, build, call forward."""
    from pathlib import Path

    import torch

    from maxcode.evaluate.cuda.loader import load_module

    try:
        cand = load_module(Path(job["job_dir"]) / "candidate.py", "maxcode_candidate")
        cand.ModelNew(2.0)(torch.ones(4), torch.ones(4))
    except Exception as err:
        return {"status": "runtime_error", "reason": f"evaluation failed: {err}"}
    return {"status": "ok", "reason": "", "figures": {"uid": os.getuid()}}


def forge_protocol(job: dict) -> dict:
    """Writes a forged verdict line to every pipe it holds (the zygote's reply pipe was one)."""
    import stat

    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b'{"status": "ok", "reason": "forged through the protocol"}\n')
        except OSError:
            pass
    return {"status": "wrong_answer", "reason": "real verdict"}
