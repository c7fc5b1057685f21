"""Tunable parameters of each template: the values they may take, sensible defaults for a
stage's sizes, and which moves answer which bottleneck.
"""

from __future__ import annotations

import itertools
import math

from maxcode.policy.offline_cuda.families import Stage

# Values per parameter and template variant.
SPACES: dict[str, dict[str, tuple[int, ...]]] = {
    "elementwise": {
        "threads": (64, 128, 256, 512, 1024),
        "ept": (1, 2, 4, 8),
        "vec": (1, 2, 4),
        "blocks_per_sm": (0, 4, 8, 16, 32),
    },
    "reduction-row": {
        "tpr": (32, 64, 128, 256, 512, 1024),
        "rpb": (1, 2, 4, 8),
        "unroll": (1, 2, 4),
        "cache": (0, 1),
        "welford": (0, 1),
    },
    "reduction-split": {
        "threads": (128, 256, 512, 1024),
        "vec": (1, 4),
        "chunks_per_sm": (1, 2, 4, 8),
    },
    "reduction-strided": {
        "bx": (32, 64, 128, 256),
        "by": (1, 2, 4, 8, 16),
        "unroll": (1, 2, 4),
    },
    "library": {},
    # A convolution through cuDNN with input and weight in channels-last memory (NHWC /
    # NDHWC, as torch.compile lays them out). Its result stays channels-last where only
    # elementwise kernels of ours read it (they transpose it on the fly); elsewhere it is made
    # contiguous again where a kernel of ours reads it.
    "library-conv": {"channels_last": (0, 1)},
    # chunks_per_sm: 0 one block per channel; > 0 each channel split across blocks (Welford)
    "stats": {
        "threads": (128, 256, 512, 1024),
        "welford": (0, 1),
        "chunks_per_sm": (0, 1, 2, 4, 8),
    },
    "scan": {"threads": (128, 256, 512, 1024)},
    # tf32x3: 0 the FP32 SIMT template (gemm.cu.j2), 1 tensor cores at FP32 accuracy
    # (3xTF32 split precision, gemm_3xtf32.cu.j2: warp tiles of 64 or 32 x 32, no tm / tn).
    "gemm": {
        "bm": (32, 64, 128),
        "bn": (32, 64, 128),
        "bk": (8, 16, 32),
        "tm": (2, 4, 8),
        "tn": (2, 4, 8),
        "tf32x3": (0, 1),
    },
}
# Bottleneck class -> (parameter, direction): +1 larger values, -1 smaller, 0 any change.
CUES: dict[str, dict[str, tuple[tuple[str, int], ...]]] = {
    "memory": {
        "stats": (("threads", 1), ("welford", 1), ("chunks_per_sm", 1)),
        "scan": (("threads", 1),),
        "elementwise": (("vec", 1), ("ept", 1)),
        "reduction-row": (("cache", 1), ("unroll", 1), ("tpr", 1), ("welford", 1)),
        "reduction-split": (("vec", 1), ("chunks_per_sm", 1)),
        "reduction-strided": (("unroll", 1), ("bx", 1)),
        "gemm": (("bm", 1), ("bn", 1), ("bk", 1)),
    },
    "latency": {
        "stats": (("threads", 0), ("chunks_per_sm", 0)),
        "scan": (("threads", 0),),
        "elementwise": (("threads", 0), ("blocks_per_sm", 0)),
        "reduction-row": (("tpr", 0), ("rpb", 0)),
        "reduction-split": (("threads", 0), ("chunks_per_sm", 0)),
        "reduction-strided": (("by", 1), ("bx", 0)),
        "gemm": (("bm", -1), ("bn", -1)),
    },
    "compute": {
        "elementwise": (("ept", 1),),
        "reduction-row": (("unroll", 1),),
        "reduction-split": (("threads", 1),),
        "reduction-strided": (("unroll", 1),),
        "gemm": (("tm", 1), ("tn", 1), ("tf32x3", 1)),
        "library-conv": (("channels_last", 0),),
    },
}
TWO_PASS = ("softmax", "log_softmax", "layer_norm", "logsumexp")  # kinds that read the row twice
SM_THREADS = 132 * 2048  # threads that fill an H100; only sizes the defaults
# Rows along the last dim are split across blocks (reduction_split.cu.j2) when there are fewer
# than this many rows (one block per row leaves SMs idle: a loss or a norm over the whole
# tensor is one row) and each row is long enough for two chunks of 1,024 float4 loads.
SPLIT_ROWS = 2 * 132
SPLIT_MIN_ROW = 8192
# GEMMs of at least this many FLOPs start on tensor cores (128 x 128 x 32 tiles): on seven
# KernelBench level-1 GEMMs of 52-412 GFLOP (H200) the searched best ran at 0.80-1.24x the
# speed of cuBLAS's FP32 GEMM, where the FP32 and the earlier WMMA templates reached 0.39-0.87x.
TENSOR_CORE_FLOPS = 2**34


def variant(stage: Stage) -> str:
    if stage.family == "library" and stage.extra.get("conv_rank"):
        return "library-conv"
    if stage.family == "reduction":
        outer, r, _ = stage.extra["sizes"]
        if stage.extra["layout"] == "row" and outer < SPLIT_ROWS and r >= SPLIT_MIN_ROW:
            return "reduction-split"
        return f"reduction-{stage.extra['layout']}"
    return stage.family


def valid(var: str, p: dict[str, int], stage: Stage) -> bool:
    """Launchable and meaningful for this stage (e.g. the cache only helps two-pass kinds)."""
    if var == "reduction-row":
        if p["cache"] and stage.extra["kind"] not in TWO_PASS:
            return False
        if p["welford"] and (stage.extra["kind"] != "layer_norm" or p["cache"]):
            return False  # one pass: only LayerNorm's statistics, and no row to cache
        return p["tpr"] * p["rpb"] <= 1024
    if var == "reduction-strided":
        return p["bx"] * p["by"] <= 1024
    if var == "stats":
        return bool(p["welford"] or not p["chunks_per_sm"])  # the split merges Welford states
    if var == "gemm" and p["tf32x3"]:
        # Register tiles do not apply: only their defaults, so a configuration is not
        # repeated under other tm / tn values.
        if (p["tm"], p["tn"]) != (4, 4):
            return False
        return p["bm"] * p["bn"] >= 2 * 32 * 32
    if var == "gemm":
        if p["bm"] % p["tm"] or p["bn"] % p["tn"]:
            return False
        threads = (p["bm"] // p["tm"]) * (p["bn"] // p["tn"])
        smem = 4 * p["bk"] * (p["bm"] + p["bn"] + 2)
        return 64 <= threads <= 1024 and smem <= 48 * 1024
    return True


def default(stage: Stage) -> dict[str, int]:
    var = variant(stage)
    if var == "library":
        return {}
    if var == "library-conv":
        # Kept channels-last, the bare convolution took 0.42-0.71x the time of the NCHW one
        # on ten KernelBench problems (H200).
        return {"channels_last": int(bool(stage.extra.get("keep_channels_last")))}
    if var == "stats":
        # Split: a BatchNorm after a convolution has a few channels of millions of values each
        return {"threads": 256, "welford": 1, "chunks_per_sm": 4}
    if var == "scan":
        return {"threads": 256}
    if var == "elementwise":
        return {"threads": 256, "ept": 2, "vec": 4, "blocks_per_sm": 0}
    if var == "reduction-row":
        _, r, _ = stage.extra["sizes"]
        tpr = 32 if r <= 256 else 128 if r <= 1024 else 256
        two_pass = stage.extra["kind"] in TWO_PASS
        return {
            "tpr": tpr,
            "rpb": 4 if tpr == 32 else 1,
            "unroll": 4,
            "cache": int(two_pass),
            "welford": 0,
        }
    if var == "reduction-split":
        return {"threads": 512, "vec": 4, "chunks_per_sm": 4}
    if var == "reduction-strided":
        outer, _, inner = stage.extra["sizes"]
        bx = 32 if inner <= 32 else 64 if inner <= 64 else 128
        columns = outer * inner
        by = 1
        while columns * by < SM_THREADS and by < 8 and bx * by * 2 <= 1024:
            by *= 2
        return {"bx": bx, "by": by, "unroll": 4}
    a, b = stage.extra["a_shape"], stage.extra["b_shape"]
    if 2 * math.prod(a) * (b[-2] if stage.extra["trans_b"] else b[-1]) >= TENSOR_CORE_FLOPS:
        return {"bm": 128, "bn": 128, "bk": 32, "tm": 4, "tn": 4, "tf32x3": 1}
    return {"bm": 64, "bn": 64, "bk": 16, "tm": 4, "tn": 4, "tf32x3": 0}


def all_configs(stage: Stage) -> list[dict[str, int]]:
    var = variant(stage)
    keys = list(SPACES[var])
    out = []
    for values in itertools.product(*(SPACES[var][k] for k in keys)):
        p = dict(zip(keys, values, strict=True))
        if valid(var, p, stage):
            out.append(p)
    return out


def neighbours(stage: Stage, base: dict[str, int]) -> list[tuple[dict[str, int], list[str]]]:
    """Valid configurations that change one parameter of ``base`` (then two), with the changed keys."""
    var = variant(stage)
    space = SPACES[var]
    out = []
    for size in (1, 2):
        for keys in itertools.combinations(space, size):
            choices = [[v for v in space[k] if v != base[k]] for k in keys]
            for values in itertools.product(*choices):
                p = {**base, **dict(zip(keys, values, strict=True))}
                if valid(var, p, stage):
                    out.append((p, list(keys)))
    return out


def cue_weight(stage: Stage, base: dict[str, int], p: dict[str, int], focus: set[str]) -> float:
    """How many of the critique's cues a move follows (0: none)."""
    var = variant(stage)
    score = 0.0
    for cls in focus:
        for key, direction in CUES[cls].get(var, ()):
            delta = p[key] - base[key]
            if delta and (direction == 0 or math.copysign(1, delta) == direction):
                score += 1.0
    return score
