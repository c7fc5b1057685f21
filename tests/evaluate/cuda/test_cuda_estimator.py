"""The estimator process: one torch import, a fork per reference, an answer for every request."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from maxcode.evaluate.cuda.estimator import Estimator, gpu_memory_estimates_mb
from maxcode.evaluate.sandbox import Confinement, confinement
from maxcode.evaluate.scrub import allowed_env

SRC = str(Path(__file__).resolve().parents[3] / "src")

LINEAR = """
import torch
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1024, {width})
    def forward(self, x):
        return self.fc(x)
def get_inputs():
    return [torch.randn(4096, 1024)]
def get_init_inputs():
    return []
"""

# A reference that changes torch for whoever runs after it in the same process.
MEDDLER = LINEAR.format(width=512).replace(
    "def get_inputs():", "torch.Tensor.element_size = lambda self: 1000\ndef get_inputs():"
)
SPINNER = LINEAR.format(width=512).replace(
    "def get_inputs():", "def get_inputs():\n    while True:\n        pass"
)


class Answers:
    """Collects the estimator's answers by request name."""

    def __init__(self) -> None:
        self.got: dict[str, object] = {}
        self.at: dict[str, float] = {}
        self.done = threading.Condition()

    def for_(self, name: str):
        def answer(value: object) -> None:
            with self.done:
                self.got[name], self.at[name] = value, time.monotonic()
                self.done.notify_all()

        return answer

    def wait(self, names: list[str], timeout_s: float) -> None:
        with self.done:
            assert self.done.wait_for(lambda: set(names) <= set(self.got), timeout_s), self.got


@pytest.fixture
def estimator(tmp_path):
    env = allowed_env({"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": SRC})
    made = Estimator(confinement(tmp_path), env, tmp_path / "estimator.log", reference_timeout_s=3)
    yield made
    made.close()


def expected(tmp_path: Path, source: str) -> list[float]:
    (tmp_path / "ref.py").write_text(source)
    return list(gpu_memory_estimates_mb(tmp_path / "ref.py"))


def test_each_reference_gets_its_own_estimate_and_cannot_change_the_next(estimator, tmp_path):
    """The second reference is estimated after one that patched torch in its process: a fork
    each, so the patch is gone (in one process it would count 1000 bytes an element)."""
    answers = Answers()
    estimator.ask(MEDDLER, answers.for_("meddler"))
    answers.wait(["meddler"], 120)
    estimator.ask(LINEAR.format(width=256), answers.for_("plain"))
    answers.wait(["plain"], 60)
    assert answers.got["plain"] == pytest.approx(expected(tmp_path, LINEAR.format(width=256)))
    assert answers.got["meddler"] != answers.got["plain"]


def test_a_reference_that_never_ends_is_answered_none_and_holds_no_one_up(estimator, tmp_path):
    answers = Answers()
    estimator.ask(LINEAR.format(width=8), answers.for_("warm"))  # the process's start
    answers.wait(["warm"], 120)
    t0 = time.monotonic()
    estimator.ask(SPINNER, answers.for_("spinner"))
    estimator.ask(LINEAR.format(width=512), answers.for_("after"))
    answers.wait(["spinner", "after"], 30)
    assert answers.got["spinner"] is None
    assert answers.at["spinner"] - t0 < 3 + 5  # its alarm, not the evaluator's margin
    assert answers.at["after"] < answers.at["spinner"]  # not queued behind it
    assert answers.got["after"] == pytest.approx(expected(tmp_path, LINEAR.format(width=512)))


def test_what_is_pending_when_the_process_dies_is_answered_and_it_starts_again(estimator, tmp_path):
    answers = Answers()
    estimator.ask(LINEAR.format(width=8), answers.for_("warm"))
    answers.wait(["warm"], 120)
    estimator.ask(SPINNER, answers.for_("spinner"))
    os.killpg(estimator._proc.pid, signal.SIGKILL)
    answers.wait(["spinner"], 30)
    assert answers.got["spinner"] is None
    estimator.ask(LINEAR.format(width=64), answers.for_("again"))
    answers.wait(["again"], 120)
    assert answers.got["again"] == pytest.approx(expected(tmp_path, LINEAR.format(width=64)))


def test_a_reference_sees_no_secret_of_the_evaluators_environment(estimator, tmp_path):
    """The probe's output width says whether it saw the secret: 16 if so, 8 if not."""
    os.environ["MAXCODE_TEST_SECRET"] = "hunter2"
    try:
        probe = LINEAR.replace("import torch", "import os, torch").format(
            width="16 if os.environ.get('MAXCODE_TEST_SECRET') else 8"
        )
        answers = Answers()
        estimator.ask(probe, answers.for_("probe"))
        answers.wait(["probe"], 120)
    finally:
        del os.environ["MAXCODE_TEST_SECRET"]
    assert answers.got["probe"] == pytest.approx(expected(tmp_path, LINEAR.format(width=8)))
    assert answers.got["probe"] != pytest.approx(expected(tmp_path, LINEAR.format(width=16)))


def test_many_tasks_asked_at_once_each_get_their_own_answer(estimator, tmp_path):
    """Replies come in the order the forks finish, several in one read: each goes to the
    request it answers."""
    widths = [8 * (i + 1) for i in range(12)]
    answers = Answers()
    for width in widths:
        estimator.ask(LINEAR.format(width=width), answers.for_(str(width)))
    answers.wait([str(w) for w in widths], 120)
    for width in widths:
        assert answers.got[str(width)] == pytest.approx(
            expected(tmp_path, LINEAR.format(width=width))
        )


class NotReading(Confinement):
    """A launcher whose process never reads its requests (an estimator stuck starting)."""

    def wrap(self, argv, *args, **kwargs):
        return ["sleep", "600"]


def test_a_process_that_does_not_read_never_blocks_the_asker(tmp_path):
    """Requests far beyond a pipe's buffer go to a process that reads none: asking returns at
    once, and closing answers every one of them."""
    stuck = Estimator(NotReading(None, "none: test"), {}, tmp_path / "log")
    answers = Answers()
    big = "#" * (1 << 20)
    t0 = time.monotonic()
    for i in range(8):
        stuck.ask(big, answers.for_(str(i)))
    assert time.monotonic() - t0 < 5
    stuck.close()
    answers.wait([str(i) for i in range(8)], 10)
    assert set(answers.got.values()) == {None}
