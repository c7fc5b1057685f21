"""What a killed compile or candidate may leave behind: processes and temporary files."""

from __future__ import annotations

import time
from pathlib import Path


def processes_naming(path: Path, settle_s: float = 5.0) -> list[str]:
    """Command lines of live processes that mention ``path``, once SIGKILLs have landed.

    Waits up to ``settle_s`` for them to go (a killed process may still be listed for a
    moment; a zombie's command line is empty, so it does not count).
    """
    deadline = time.monotonic() + settle_s
    while True:
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue  # exited while we looked
            if str(path) in args:
                found.append(args.strip())
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
