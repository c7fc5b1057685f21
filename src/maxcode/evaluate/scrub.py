"""Keep the evaluator's secrets away from candidate code and out of anything it sends back.

Two halves, used together: processes that import candidate code get an environment reduced
to an allowlist (:func:`allowed_env`), so they never hold an API key; and every text that
comes back from such a process (a reason, a log tail, compiler output) passes through
:func:`scrub` in the evaluator before it becomes a result, feedback or a record, so a value
that reached the candidate some other way is still replaced. Only exact values (and their
``repr``-escaped forms) are caught: a candidate that encodes a secret it could read is
stopped by the allowlist, not here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

# Names whose values are treated as secrets (matched anywhere in the name, any case).
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT", re.I
)
MIN_SECRET_CHARS = 6  # shorter values ("1", "true") would redact ordinary words
# Variables a candidate's process may see, by exact name or prefix; a secret-looking name is
# dropped even when it matches.
ALLOWED_NAMES = frozenset(
    {
        "PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHASHSEED",
        "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
        "CUDA_MODULE_LOADING", "CUDA_LAUNCH_BLOCKING", "CUBLAS_WORKSPACE_CONFIG",
        "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CC", "CXX", "CPATH",
        "LIBRARY_PATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    }
)  # fmt: skip
ALLOWED_PREFIXES = (
    "NVIDIA_", "NVCC_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "MAXCODE_ZYGOTE_",
    "MAXCODE_NVCC_",
)  # fmt: skip
REDACTED = "[redacted:{name}]"
SANDBOX_USER = "sandbox"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def allowed_env(extra: Mapping[str, str] | None = None, home: str = "/tmp") -> dict[str, str]:
    """The environment of a process that imports candidate code: the allowlist of this
    process's variables, then ``extra`` (the caller's own settings), HOME and TMPDIR private,
    USER and LOGNAME the sandbox's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in ALLOWED_NAMES or k.startswith(ALLOWED_PREFIXES)) and not is_secret_name(k)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = home
    env["TMPDIR"] = home
    # The dedicated uid has no passwd entry; getpass.getuser() (torch.compile calls it) reads
    # these first and raised KeyError for that uid without them.
    env["USER"] = env["LOGNAME"] = SANDBOX_USER
    env.update({k: v for k, v in (extra or {}).items() if not is_secret_name(k)})
    return env


def secret_values(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(name, value) of every secret-looking variable, longest value first."""
    env = os.environ if environ is None else environ
    found = [(k, v) for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS]
    return sorted(found, key=lambda kv: -len(kv[1]))


def scrub(text: str, secrets: list[tuple[str, str]] | None = None) -> str:
    """``text`` with every secret value (as written or as ``repr`` escapes it) replaced by its name."""
    if not text:
        return text
    for name, value in secret_values() if secrets is None else secrets:
        for form in {value, repr(value)[1:-1]}:
            if form in text:
                text = text.replace(form, REDACTED.format(name=name))
    return text


def scrub_tree(value: Any, secrets: list[tuple[str, str]] | None = None) -> Any:
    """:func:`scrub` applied to every string (keys included) in nested dicts, lists and tuples."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrub_tree(k, secrets): scrub_tree(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_tree(v, secrets) for v in value)
    return value
