"""CPU-only stand-ins for a GPU evaluation, run by the supervisor tests inside forked children."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


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


def nap(job: dict) -> dict:
    """GPU-free work of a known length, side by side with others."""
    t0 = time.time()
    time.sleep(float(job.get("seconds", 1.0)))
    return {"status": "ok", "reason": "", "figures": {"span": [t0, time.time()]}}


def _nap_in(stretch: str, job: dict) -> dict:
    """Sleeps inside a gate stretch; figures: when it ran. It asks for the stretch after
    ``delay`` seconds, or once the file ``after`` exists (another job wrote it on entering
    its own stretch: an order that holds however loaded the machine), and writes the file
    ``entered`` once inside."""
    from maxcode.evaluate.cuda.supervisor import child_gate

    time.sleep(float(job.get("delay", 0.0)))
    if job.get("after"):
        deadline = time.time() + 60
        while not os.path.exists(job["after"]) and time.time() < deadline:
            time.sleep(0.01)
    with getattr(child_gate(), stretch)():
        if job.get("entered"):
            open(job["entered"], "w").close()
        start = time.time()
        time.sleep(float(job.get("seconds", 1.0)))
        end = time.time()
    return {"status": "ok", "reason": "", "figures": {"span": [start, end]}}


def exclusive_nap(job: dict) -> dict:
    """What a timing does: GPU work with the GPU alone."""
    return _nap_in("exclusive", job)


def shared_nap(job: dict) -> dict:
    """What a correctness trial does: GPU work beside other children's."""
    return _nap_in("shared", job)


def ticker(job: dict) -> dict:
    """Free work that notes the time every 10 ms for ``seconds`` of its own running time."""
    ticks = []
    ran = 0.0
    last = time.time()
    while ran < float(job.get("seconds", 2.0)):
        time.sleep(0.01)
        now = time.time()
        ran += min(now - last, 0.02)  # a long gap is time it stood still, not time it ran
        last = now
        ticks.append(now)
    return {"status": "ok", "reason": "", "figures": {"ticks": ticks}}


def exclusive_then_die(job: dict) -> dict:
    from maxcode.evaluate.cuda.supervisor import child_gate

    with child_gate().exclusive():
        os._exit(7)
    return {"status": "ok"}


def pipes_held(job: dict) -> dict:
    """The pipes this child holds: its own gate's two ends, nothing of a neighbour's."""
    import stat

    fifos = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISFIFO(os.fstat(int(name)).st_mode):
                fifos.append(int(name))
        except OSError:
            pass
    maps = Path("/proc/self/maps").read_text()
    return {"status": "ok", "reason": "", "figures": {"fifos": len(fifos), "maps": maps}}


def hog_the_gate(job: dict) -> dict:
    """A hostile child: takes the GPU exclusively, asks out of turn, never gives it back."""
    from maxcode.evaluate.cuda import supervisor

    gate = supervisor.child_gate()
    os.write(gate.request_fd, supervisor.ENTER_EXCLUSIVE)
    os.read(gate.grant_fd, 1)
    os.write(gate.request_fd, supervisor.ENTER_SHARED * 3 + supervisor.ENTER_EXCLUSIVE)
    time.sleep(3600)
    return {"status": "ok"}


def write_next_to_itself(job: dict) -> dict:
    """What some real candidates do at import: write a file into the working directory."""
    Path("generated_kernel.cu").write_text("// written at import\n")
    return {"status": "ok", "reason": "", "figures": {"cwd": os.getcwd()}}


def inputs_made_ahead(job: dict) -> dict:
    """What a candidate's process got of its task's inputs made ahead by the zygote."""
    import torch

    from maxcode.evaluate.cuda.trial_inputs import take_premade

    torch.set_num_threads(1)
    premade = take_premade()
    if premade is None:
        return {"status": "ok", "figures": {"made_ahead": None}}
    firsts = [float(sealed.load()[0].flatten()[0]) for sealed in premade.trials]
    return {"status": "ok", "figures": {"made_ahead": {"seeds": premade.seeds, "firsts": firsts}}}
