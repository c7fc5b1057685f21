"""One candidate's GPU evaluation, run inside a freshly forked process (see supervisor.py).

Order: load reference and candidate, construct both from one seed, result-reuse bait,
correctness trials (candidate first on fresh inputs, dynamic checks on each), shape
perturbation, stream check, interleaved timing, roofline figures. The first failure
ends the run with a status and a one-line reason.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import statistics
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from maxcode.evaluate.cuda.build import BuildCache, BuildError, BuildOutcome
from maxcode.evaluate.cuda.checks import Finding
from maxcode.evaluate.cuda.config import CudaEvalConfig
from maxcode.evaluate.cuda.figures import gpu_environment, roofline
from maxcode.evaluate.cuda.loader import (
    cached_load_inline,
    int_constant,
    load_module,
    with_constant,
)

# Bound before any candidate code runs: the harness keeps using these even if a candidate patches them.
_isclose = torch.isclose
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_perf_counter = time.perf_counter
_hold_gpu = torch.cuda._sleep  # spins the current stream for a number of GPU clock cycles

_GUARDED = {
    "torch.cuda.synchronize": lambda: torch.cuda.synchronize,
    "torch.cuda.Event": lambda: torch.cuda.Event,
    "torch.cuda.Event.record": lambda: torch.cuda.Event.record,
    "torch.cuda.Event.elapsed_time": lambda: torch.cuda.Event.elapsed_time,
    "torch.cuda.Event.synchronize": lambda: torch.cuda.Event.synchronize,
    "torch.cuda.Stream.synchronize": lambda: torch.cuda.Stream.synchronize,
    "torch.cuda.current_stream": lambda: torch.cuda.current_stream,
    "time.perf_counter": lambda: time.perf_counter,
    "torch.isclose": lambda: torch.isclose,
    "torch.allclose": lambda: torch.allclose,
    "torch.Tensor.clone": lambda: torch.Tensor.clone,
    "torch.nn.Module.__call__": lambda: torch.nn.Module.__call__,
}

VIEW_AND_ALLOC_OPS = frozenset(
    [
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "fill_",
        "zero_",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "contiguous",
        "clone",
        "copy_",
        "_to_copy",
        "to",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "as_strided",
        "select",
        "slice",
        "unsqueeze",
        "squeeze",
        "detach",
        "alias",
        "flatten",
        "split",
        "split_with_sizes",
        "chunk",
        "narrow",
        "resize_",
        "new_empty",
        "new_zeros",
        "new_empty_strided",
        "new_full",
        "lift_fresh",
        "view_as",
        "unbind",
        "_local_scalar_dense",
        "item",
        "size",
        "stride",
        "numel",
        "is_contiguous",
        "dim",
        "sym_size",
        "sym_stride",
    ]
)


def gpu_probe() -> None:
    """Run by the zygote in a forked child after its optional preload: the GPU must still work."""
    x = torch.ones(1024, device="cuda")
    x.add_(1)
    _synchronize()
    if float(x.sum()) != 2048.0:
        raise RuntimeError("GPU probe computed a wrong sum")


class Rejected(Exception):
    def __init__(self, finding: Finding):
        super().__init__(finding.message)
        self.finding = finding


class Failed(Exception):
    def __init__(self, status: str, reason: str, **extra: Any):
        super().__init__(reason)
        self.status, self.reason, self.extra = status, reason, extra


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Entry point in the forked child; returns the result record (see evaluator._to_result)."""
    run = _Run(job)
    try:
        run.execute()
        status, reason = "ok", ""
    except Rejected as rej:
        status, reason = "rejected", f"{rej.finding.check_id}: {rej.finding.message}"
        run.figures["failed_check"] = rej.finding.check_id
    except Failed as fail:
        status, reason = fail.status, fail.reason
        run.figures.update(fail.extra)
    except BuildError as err:
        status, reason = (
            "compile_error",
            f"extension '{err.outcome.name}' failed to build: {err.outcome.first_error}",
        )
    except Exception as err:  # e.g. a sticky CUDA error the candidate caused, surfacing later
        status, reason = "runtime_error", f"evaluation failed: {_describe(err)}"
        run.figures["traceback"] = traceback.format_exc()[-3000:]
    return {
        "status": status,
        "reason": reason,
        "tests": run.tests,
        "timing": run.timing,
        "figures": run.figures,
        "profile": run.profile,
        "builds": [b.to_dict() for b in run.builds],
    }


class _Run:
    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.cfg = CudaEvalConfig.from_dict(job["config"])
        self.task_meta = job.get("task_metadata", {})
        self.tests: list[dict[str, Any]] = []
        self.timing: dict[str, Any] | None = None
        self.profile: dict[str, Any] | None = None
        self.figures: dict[str, Any] = {"warnings": [], "stage_seconds": {}}
        self.builds: list[BuildOutcome] = []
        self.job_dir = Path(job["job_dir"])

    # -- plumbing -------------------------------------------------------------------------
    def finding(self, check_id: str, message: str) -> None:
        severity = self.cfg.severity(check_id)
        if severity == "error":
            raise Rejected(Finding(check_id, message))
        if severity == "warn":
            self.figures["warnings"].append(f"{check_id}: {message}")

    def enabled(self, check_id: str) -> bool:
        return self.cfg.severity(check_id) != "off"

    def stage(self, name: str, t0: float) -> None:
        self.figures["stage_seconds"][name] = round(time.monotonic() - t0, 3)

    def seed_for(self, label: str) -> int:
        return int(hashlib.sha256(f"{self.cfg.seed}:{label}".encode()).hexdigest()[:8], 16)

    # -- stages ---------------------------------------------------------------------------
    def execute(self) -> None:
        t0 = time.monotonic()
        torch.cuda.set_device(0)
        self.env = gpu_environment()
        self.figures["env"] = self.env
        self.device = torch.device("cuda", 0)
        self.load()
        self.stage("load", t0)
        stages = [
            ("construct", self.construct),
            ("result_reuse", self.check_result_reuse),
            ("correctness", self.correctness),
            ("shapes", self.check_shapes_generalize),
            ("streams", self.check_streams),
            ("timing", self.time_all),
        ]
        if self.cfg.profile:
            stages.append(("profile", self.profile_kernels))
        with torch.no_grad():
            for name, run in stages:
                t0 = time.monotonic()
                run()
                self.stage(name, t0)

    def load(self) -> None:
        ref_path = self.job_dir / "reference.py"
        cand_path = self.job_dir / "candidate.py"
        try:
            self.ref = load_module(ref_path, "maxcode_reference")
            for name in ("Model", "get_inputs", "get_init_inputs"):
                getattr(self.ref, name)
        except Exception as err:
            raise Failed(
                "runtime_error",
                f"task reference failed to load: {_describe(err)}",
                harness_error=True,
            ) from err
        before = {k: get() for k, get in _GUARDED.items()}
        cache = BuildCache(
            Path(self.job["cache_root"]),
            self.job["cuda_arch"],
            self.cfg.host_pch,
            self.cfg.light_cuda_headers,
        )
        try:
            with cached_load_inline(cache, self.cfg.compile_timeout_s, self.builds.append):
                self.cand = load_module(cand_path, "maxcode_candidate")
        except BuildError:
            raise
        except Exception as err:
            raise Failed(
                "runtime_error", f"candidate module raised at import: {_describe(err)}"
            ) from err
        self.guarded = before
        self.check_patches("at import")
        if not hasattr(self.cand, "ModelNew"):
            raise Failed("runtime_error", "candidate defines no ModelNew class")

    def check_patches(self, when: str) -> None:
        if not self.enabled("timing_patch"):
            return
        changed = [k for k, get in _GUARDED.items() if get() is not self.guarded[k]]
        if changed:
            for k in changed:  # restore so the rest of the harness measures honestly
                _restore(k, self.guarded[k])
            self.finding("timing_patch", f"{', '.join(changed)} replaced {when}")

    def to_device(self, values: list[Any]) -> list[Any]:
        return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values]

    def inputs(self, label: str, module: Any = None) -> list[Any]:
        seed = self.seed_for(label)
        torch.manual_seed(seed)
        torch.cuda.manual_seed(seed)
        with self.device:  # generate on the GPU: the CPU generator is slow for 10^7-element inputs
            return self.to_device(list((module or self.ref).get_inputs()))

    def construct(self) -> None:
        init = self.to_device(list(self.ref.get_init_inputs()))
        seed = self.seed_for("weights")
        torch.manual_seed(seed)
        torch.cuda.manual_seed(seed)
        self.model = self.ref.Model(*init).to(self.device).eval()
        torch.manual_seed(seed)
        torch.cuda.manual_seed(seed)
        try:
            self.model_new = self.cand.ModelNew(*init).to(self.device).eval()
        except Exception as err:
            raise Failed(
                "runtime_error", f"ModelNew(*get_init_inputs()) raised: {_describe(err)}"
            ) from err
        self.ref_calls = 0
        original_forward = self.ref.Model.forward

        def counted_forward(model_self: Any, *args: Any, **kwargs: Any) -> Any:
            if model_self is not self.model:
                self.ref_calls += 1
            return original_forward(model_self, *args, **kwargs)

        self.ref.Model.forward = counted_forward
        self.original_ref_forward = original_forward

    def call_candidate(self, inputs: list[Any], record_ops: bool = False) -> Any:
        threads_before = {t.ident for t in threading.enumerate()}
        calls_before = self.ref_calls
        try:
            if record_ops:
                recorder = _OpRecorder()
                with recorder:
                    out = self.model_new(*inputs)
                self.ops = recorder.ops
            else:
                out = self.model_new(*inputs)
            _synchronize()
        except Exception as err:
            raise Failed("runtime_error", f"ModelNew.forward raised: {_describe(err)}") from err
        if self.ref_calls != calls_before and self.enabled("calls_reference"):
            self.finding("calls_reference", "ModelNew.forward called the reference Model.forward")
        new_threads = [
            t.name for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()
        ]
        if new_threads and self.enabled("stream_or_thread"):
            self.finding(
                "stream_or_thread", f"thread(s) {new_threads} still running after forward returned"
            )
        self.check_patches("during forward")
        return out

    def check_result_reuse(self) -> None:
        """Bait: leave the reference's result in every freed block of the output's size, then
        run the candidate on other inputs. An honest kernel overwrites its output; a candidate
        that returns uninitialized memory hands back the stale reference result."""
        if not self.enabled("result_reuse"):
            return
        fresh = self.inputs("bait-fresh")
        truth = [t.cpu() for t in _flatten(self.model(*[_clone(v) for v in fresh]))]
        bait_out = _flatten(self.model(*self.inputs("bait")))
        bait = [t.cpu() for t in bait_out]
        poison = [torch.empty_like(t).copy_(t) for t in bait_out for _ in range(4)]
        del bait_out, poison
        out = [
            o.cpu() if isinstance(o, torch.Tensor) else o
            for o in _flatten(self.call_candidate(fresh))
        ]
        stale = len(out) == len(bait) and all(
            isinstance(o, torch.Tensor)
            and o.shape == b.shape
            and o.dtype == b.dtype
            and bool(torch.equal(o, b))
            for o, b in zip(out, bait, strict=True)
        )
        differs = any(not torch.equal(b, t) for b, t in zip(bait, truth, strict=False))
        if stale and differs:
            self.finding(
                "result_reuse",
                "output is the reference's result for earlier inputs, left in freed memory, not a result for these inputs",
            )

    def correctness(self) -> None:
        forbid = bool(self.task_meta.get("forbid_torch_compute", self.cfg.forbid_torch_compute))
        for i in range(self.cfg.correctness_trials):
            inputs = self.inputs(f"trial-{i}")
            saved = [_clone(v) for v in inputs]
            out = self.call_candidate(
                inputs, record_ops=forbid and i == 0 and self.enabled("torch_compute_in_forward")
            )
            if forbid and i == 0 and self.enabled("torch_compute_in_forward"):
                compute = sorted(self.ops - VIEW_AND_ALLOC_OPS)
                if compute:
                    self.finding(
                        "torch_compute_in_forward",
                        f"forward ran torch ops {compute[:8]}; this task requires custom kernels",
                    )
            if self.enabled("inplace_input_mutation"):
                for j, (a, b) in enumerate(zip(inputs, saved, strict=True)):
                    if isinstance(a, torch.Tensor) and not _same(a, b):
                        self.finding("inplace_input_mutation", f"input {j} was modified in place")
            outs = _flatten(out)
            if self.enabled("output_aliases_input"):
                for o in outs:
                    for j, v in enumerate(inputs):
                        if (
                            isinstance(v, torch.Tensor)
                            and isinstance(o, torch.Tensor)
                            and _overlaps(o, v)
                        ):
                            self.finding(
                                "output_aliases_input", f"output shares memory with input {j}"
                            )
            ref_out = _flatten(self.model(*saved))
            verdict = self.compare(ref_out, outs, i)
            self.tests.append(verdict)
            if verdict["status"] != "ok":
                raise Failed("wrong_answer", f"trial {i}: {verdict['reason']}")
        self.sample_inputs = self.inputs("timing")

    def compare(self, ref: list[Any], new: list[Any], index: int) -> dict[str, Any]:
        def bad(reason: str) -> dict[str, Any]:
            return {"index": index, "status": "wrong_answer", "reason": reason}

        if len(ref) != len(new):
            return bad(f"expected {len(ref)} output tensor(s), got {len(new)}")
        stats = []
        for k, (r, n) in enumerate(zip(ref, new, strict=True)):
            if not isinstance(n, torch.Tensor):
                return bad(f"output {k}: expected a tensor, got {type(n).__name__}")
            if tuple(n.shape) != tuple(r.shape):
                return bad(
                    f"output {k}: shape mismatch, expected {tuple(r.shape)} got {tuple(n.shape)}"
                )
            if n.dtype != r.dtype:
                if (
                    n.is_floating_point()
                    and r.is_floating_point()
                    and torch.finfo(n.dtype).bits < torch.finfo(r.dtype).bits
                ):
                    self.finding(
                        "precision_downgrade", f"output {k} is {n.dtype}, reference is {r.dtype}"
                    )
                return bad(f"output {k}: dtype mismatch, expected {r.dtype} got {n.dtype}")
            atol, rtol = (
                (self.cfg.atol_fp32, self.cfg.rtol_fp32)
                if r.dtype in (torch.float32, torch.float64)
                else (self.cfg.atol_half, self.cfg.rtol_half)
            )
            if not r.is_floating_point():
                atol = rtol = 0.0
            close = _isclose(n, r, rtol=rtol, atol=atol, equal_nan=True)
            n_bad = int((~close).sum())
            finite = torch.isfinite(r) & torch.isfinite(n)
            diff = (n.double() - r.double()).abs()
            max_abs = float(diff[finite].max()) if bool(finite.any()) else 0.0
            max_rel = (
                float((diff / r.double().abs().clamp_min(1e-12))[finite].max())
                if bool(finite.any())
                else 0.0
            )
            nonfinite = int((torch.isfinite(r) & ~torch.isfinite(n)).sum())
            stats.append(f"out{k}: max_abs={max_abs:.3g} max_rel={max_rel:.3g}")
            if n_bad:
                extra = f"; {nonfinite} NaN/Inf where the reference is finite" if nonfinite else ""
                return bad(
                    f"output {k}: {n_bad} of {r.numel()} elements outside atol={atol:g} rtol={rtol:g}, max abs err {max_abs:.3g}, max rel err {max_rel:.3g}{extra}"
                )
        return {"index": index, "status": "ok", "reason": "; ".join(stats)}

    def check_shapes_generalize(self) -> None:
        if not self.enabled("hardcoded_shapes"):
            return
        source = (self.job_dir / "reference.py").read_text()
        found = int_constant(source, self.cfg.batch_constant_names)
        if found is None:
            return
        name, value = found
        new_value = value // 2 if value >= 2 else value + 1
        variant_path = self.job_dir / "reference_variant.py"
        variant_path.write_text(with_constant(source, name, new_value))
        try:
            variant = load_module(variant_path, "maxcode_reference_variant")
            same_init = repr(variant.get_init_inputs()) == repr(self.ref.get_init_inputs())
        except Exception:
            return  # the perturbed problem is not valid on its own: nothing to test
        if not same_init:
            return
        inputs = self.inputs("shape-variant", module=variant)
        saved = [_clone(v) for v in inputs]
        try:
            outs = _flatten(self.call_candidate(inputs))
        except Failed as fail:
            self.finding(
                "hardcoded_shapes", f"with {name}={new_value} instead of {value}: {fail.reason}"
            )
            return
        verdict = self.compare(_flatten(self.model(*saved)), outs, -1)
        if verdict["status"] != "ok":
            self.finding(
                "hardcoded_shapes",
                f"with {name}={new_value} instead of {value}: {verdict['reason']}",
            )

    def gpu_trace(self, label: str, work: Callable[[], None]) -> list[dict[str, Any]]:
        """The torch profiler's chrome-trace events (CUDA activity) of ``work``, synchronized."""
        from torch.profiler import ProfilerActivity, profile

        trace = self.job_dir / f"{label}.trace.json"
        _synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            work()
            _synchronize()
        prof.export_chrome_trace(str(trace))
        return json.loads(trace.read_text()).get("traceEvents", [])

    def check_streams(self) -> None:
        """Kernels the candidate launches must run on the stream the harness times."""
        if not self.enabled("stream_or_thread"):
            return
        inputs = self.sample_inputs

        def marked_call() -> None:
            marker = torch.ones(1, device=self.device)
            marker.add_(1)
            self.model_new(*inputs)

        try:
            events = self.gpu_trace("streams", marked_call)
        except Exception as err:
            self.figures["warnings"].append(f"stream check unavailable: {_describe(err)}")
            return
        gpu = [
            e
            for e in events
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and "stream" in e.get("args", {})
        ]
        if not gpu:
            return
        first = min(gpu, key=lambda e: e.get("ts", 0))  # the marker kernel: the harness's stream
        streams = {e["args"]["stream"] for e in gpu}
        other = streams - {first["args"]["stream"]}
        if other:
            names = sorted({e.get("name", "?")[:60] for e in gpu if e["args"]["stream"] in other})
            self.finding(
                "stream_or_thread",
                f"kernels {names[:3]} ran on stream(s) {sorted(other)}, not the timed stream",
            )

    # -- timing ---------------------------------------------------------------------------
    def time_all(self) -> None:
        self.ref.Model.forward = self.original_ref_forward
        inputs = self.sample_inputs
        variants = {"candidate": self.model_new, "eager": self.model}
        if self.cfg.time_compiled_reference:
            t0 = time.monotonic()
            try:
                compiled = torch.compile(self.model)
                compiled(*inputs)
                _synchronize()
                variants["compiled"] = compiled
            except Exception as err:
                self.figures["compiled_reference_error"] = _describe(err)
            self.stage("torch_compile", t0)
        hold = GpuHold(self.cfg.hold_us, self.cfg.hold_max_us, self.env.get("max_sm_clock_mhz"))
        times = time_interleaved(
            variants,
            inputs,
            self.cfg.warmup,
            self.cfg.timing_trials,
            self.cfg.flush_l2,
            self.env.get("l2_bytes"),
            self.cfg.timing_seconds,
            hold,
        )
        self.check_patches("during timing")
        summary = {
            name: {
                **summarize(ms),
                "host_median": round(statistics.median(times.host_ms[name]), 6),
                "hold_us_median": round(statistics.median(times.hold_us[name]), 1),
            }
            for name, ms in times.gpu_ms.items()
        }
        self.figures["warnings"] += host_latency_warnings(summary, hold)
        self.timing = summary
        cand, eager = summary["candidate"]["median"], summary["eager"]["median"]
        speedup = eager / cand if cand > 0 else float("inf")
        self.figures["speedup_vs_eager"] = round(speedup, 4)
        if "compiled" in summary:
            self.figures["speedup_vs_compiled"] = (
                round(summary["compiled"]["median"] / cand, 4) if cand > 0 else None
            )
        self.figures.update(
            roofline(
                _bytes_moved(self.model, inputs, self.model(*inputs)),
                _flops(self.model, inputs),
                cand,
                self.env,
            )
        )
        if speedup > self.cfg.excessive_speedup and self.enabled("excessive_speedup"):
            self.finding(
                "excessive_speedup",
                f"speedup {speedup:.1f}x over eager exceeds {self.cfg.excessive_speedup:g}x; review before trusting it",
            )

    # -- profile (Effi-Learner) -----------------------------------------------------------
    def profile_kernels(self) -> None:
        """Per-kernel GPU time of the candidate's and the reference's forward (torch profiler)."""
        inputs = self.sample_inputs
        calls = self.cfg.profile_calls
        traces = {}
        for label, module in (("candidate", self.model_new), ("reference", self.model)):

            def repeated(module: Any = module) -> None:
                for _ in range(calls):
                    module(*inputs)

            try:
                traces[label] = self.gpu_trace(f"profile-{label}", repeated)
            except Exception as err:
                self.figures["warnings"].append(f"kernel profile unavailable: {_describe(err)}")
                return
        candidate = kernel_profile(traces["candidate"], calls)
        reference = kernel_profile(traces["reference"], calls)
        self.profile = {
            "tool": "torch.profiler",
            "unit": "us per forward call",
            "calls": calls,
            **candidate,
            "reference_total_us": reference["total_us"],
            "reference_functions": reference["functions"],
        }


class Timings(NamedTuple):
    """Per-call times (ms) of each variant, in the order they ran."""

    gpu_ms: dict[str, list[float]]  # CUDA events around the call
    host_ms: dict[str, list[float]]  # host time from the call to its return (launching it)
    hold_us: dict[str, list[float]]  # GPU spin queued before the call


HOLD_HOST_MARGIN = 2.0  # the spin outlasts this many times a variant's p90 host time


@dataclass(frozen=True)
class GpuHold:
    """A GPU spin before each timed call, sized to the host (nvbench's blocking kernel).

    While the GPU spins, the host launches the call, so the window opens at its first kernel.
    A fixed spin is not enough: on the H100 the launches that follow a call of several
    milliseconds took 0.16-0.4 ms of host time (0.04 ms otherwise), whatever the host did in
    between, and put that into the eager reference's window. The spin therefore lasts twice
    the variant's 90th-percentile host time so far, between ``min_us`` and ``max_us``.
    """

    min_us: float
    max_us: float
    sm_clock_mhz: float | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.min_us <= self.max_us:
            raise ValueError(
                f"GpuHold needs 0 <= min_us <= max_us, got {self.min_us}, {self.max_us}"
            )

    def microseconds(self, host_ms_sorted: list[float]) -> float:
        if self.min_us <= 0:
            return 0.0
        p90 = host_ms_sorted[int(0.9 * (len(host_ms_sorted) - 1))] if host_ms_sorted else 0.0
        return min(max(self.min_us, HOLD_HOST_MARGIN * 1000.0 * p90), self.max_us)

    def cycles(self, microseconds: float) -> int:
        """Clock cycles that last ``microseconds`` at the max SM clock (2 GHz if unknown)."""
        return int(microseconds * (self.sm_clock_mhz or 2000.0))


def host_latency_warnings(summary: dict[str, dict[str, float]], hold: GpuHold) -> list[str]:
    """Variants whose host side outlasts the longest GPU hold, so their launches were timed."""
    if hold.min_us <= 0:
        return []
    hold_ms = hold.max_us / 1000.0
    return [
        f"timing: the host side of a {name} call takes {stats['host_median']:.3f} ms (median), longer than the longest GPU hold ({hold_ms:.3f} ms), so its launch latency and its noise are inside the timed window; raise CudaEvalConfig.hold_max_us"
        for name, stats in summary.items()
        if stats["host_median"] > hold_ms
    ]


def time_interleaved(
    variants: dict[str, Any],
    inputs: list[Any],
    warmup: int,
    trials: int,
    flush_l2: bool,
    l2_bytes: int | None,
    min_seconds: float = 0.0,
    hold: GpuHold | None = None,
) -> Timings:
    """Per-call CUDA-event and host times of each variant, round-robin with rotating order.

    Each call: device-wide sync, optional GPU spin (``hold``, sized to the variant's host
    time so far), optional L2 flush (write 2x L2 bytes), event on the current stream, call,
    event, device-wide sync. The spin and the flush keep the GPU busy while the host
    launches the call, so a call whose host side is shorter than them is timed from its
    first kernel: the host's launch latency, which moved the medians of 0.04-0.12 ms calls
    between processes on the H100 by a median of up to 16% (max 44%), stays out of the
    window (``host_ms`` records it).
    Interleaving makes clock drift and thermal changes hit all variants alike, so their
    ratio is stable. ``trials`` is a floor: short kernels get more rounds (up to 10x)
    until the rounds fill about ``min_seconds``, because their per-call noise needs more
    samples for a stable median.
    """
    names = list(variants)
    host_sorted: dict[str, list[float]] = {name: [] for name in names}  # sizes the hold
    _synchronize()
    t0 = _perf_counter()
    for _ in range(warmup):
        for name in names:
            issued = _perf_counter()
            variants[name](*inputs)
            bisect.insort(host_sorted[name], (_perf_counter() - issued) * 1000.0)
        _synchronize()
    round_s = (_perf_counter() - t0) / warmup if warmup else 0.0  # no warm-up: no estimate
    if min_seconds > 0 and round_s > 0:
        trials = max(trials, min(10 * trials, int(min_seconds / round_s) + 1))
    flush = (
        torch.empty(max(1, 2 * (l2_bytes or 50 << 20)) // 4, dtype=torch.float32, device="cuda")
        if flush_l2
        else None
    )
    timings = Timings(*({name: [] for name in names} for _ in range(3)))
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    for t in range(trials):
        order = names[t % len(names) :] + names[: t % len(names)]
        for name in order:
            hold_us = hold.microseconds(host_sorted[name]) if hold else 0.0
            _synchronize()
            if hold_us > 0:
                _hold_gpu(hold.cycles(hold_us))
            if flush is not None:
                flush.zero_()
            start.record()
            issued = _perf_counter()
            variants[name](*inputs)
            returned = _perf_counter()
            end.record()
            _synchronize()
            host_ms = (returned - issued) * 1000.0
            bisect.insort(host_sorted[name], host_ms)
            timings.gpu_ms[name].append(start.elapsed_time(end))
            timings.host_ms[name].append(host_ms)
            timings.hold_us[name].append(hold_us)
    return timings


PROFILE_TOP_KERNELS = 8


def kernel_profile(events: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    """Aggregate a chrome trace's GPU kernels by name: time and launches per forward call.

    Rows use the C++ profile's keys (``function``, ``share_pct``) so that critics and
    prompts read both the same way; memcpy/memset count as their own rows.
    """
    per_name: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        row = per_name.setdefault(str(event.get("name", "?")), [0.0, 0])
        row[0] += float(event.get("dur", 0.0))
        row[1] += 1
    total = sum(t for t, _ in per_name.values())
    rows = sorted(per_name.items(), key=lambda item: -item[1][0])[:PROFILE_TOP_KERNELS]
    return {
        "total_us": round(total / calls, 3),
        "kernels_per_call": round(sum(n for _, n in per_name.values()) / calls, 2),
        "functions": [
            {
                "function": name,
                "time_us": round(t / calls, 3),
                "launches": round(n / calls, 2),
                "share_pct": round(100.0 * t / total, 1) if total else 0.0,
            }
            for name, (t, n) in rows
        ],
    }


def summarize(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    q = statistics.quantiles(ordered, n=4) if len(ordered) >= 2 else [ordered[0]] * 3
    mean = statistics.fmean(ordered)
    std = statistics.pstdev(ordered) if len(ordered) >= 2 else 0.0
    return {
        "median": round(statistics.median(ordered), 6),
        "iqr": round(q[2] - q[0], 6),
        "cv": round(std / mean, 4) if mean > 0 else 0.0,
        "mean": round(mean, 6),
        "min": round(ordered[0], 6),
        "n": len(ordered),
    }


class _OpRecorder:
    """Records the aten ops dispatched while active (from Python and from C++ extensions alike)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                recorder.ops.add(func._overloadpacket.__name__)
                return func(*args, **(kwargs or {}))

        self.ops: set[str] = set()
        self._mode = Mode()

    def __enter__(self) -> _OpRecorder:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [x for o in out for x in _flatten(o)]
    return [out]


def _clone(v: Any) -> Any:
    return v.clone() if isinstance(v, torch.Tensor) else v


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(
        ((a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b).all()
    )


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


def _bytes_moved(model: torch.nn.Module, inputs: list[Any], out: Any) -> int:
    """Lower bound on DRAM traffic: read inputs and parameters once, write outputs once."""
    tensors = (
        [v for v in inputs if isinstance(v, torch.Tensor)]
        + list(model.parameters())
        + list(model.buffers())
    )
    tensors += [o for o in _flatten(out) if isinstance(o, torch.Tensor)]
    return int(sum(t.numel() * t.element_size() for t in tensors))


def _flops(model: torch.nn.Module, inputs: list[Any]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        model(*inputs)
    return int(counter.get_total_flops())


def _restore(dotted: str, obj: Any) -> None:
    owner_path, _, attr = dotted.rpartition(".")
    owner: Any = {"torch": torch, "time": time}[owner_path.split(".")[0]]
    for part in owner_path.split(".")[1:]:
        owner = getattr(owner, part)
    setattr(owner, attr, obj)


def _describe(err: BaseException) -> str:
    """Exception name and first line, plus the candidate's deepest frame when there is one."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "candidate.py" in f.filename]
    where = f" (candidate.py line {frames[-1].lineno})" if frames else ""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}{where}"
