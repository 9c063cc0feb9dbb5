"""The files and child processes of `db backup`: temporaries created 0600, cleaned up after a killed run,
and PostgreSQL's tools tied to the process that started them (issue 41).

- A backup's temporary file is created empty with mode 0600 before anything is written into it
  (pg_dump and SQLite then write into that file), so no other user can read it even for a moment:
  every user's password hash is in it. Its name carries the writing process's id,
  `.NAME.<pid>.<random>.partial`.
- A backup killed midway (SIGKILL, a power cut) cannot remove its temporary file; the next start of
  `db backup` (in the folder it writes to) and of `serve` (in DRAFTDESK_BACKUP_DIR) removes every
  temporary whose process is gone. One whose process still runs is another backup at work and is
  left alone. A temporary without a process id (written before this rule) is removed too.
- `pg_dump` and `pg_restore` are started with the Linux parent-death signal (prctl
  PR_SET_PDEATHSIG = SIGKILL): when the backup process dies, however it dies, the kernel kills
  the tool too, so no dump keeps running and writing after its parent is gone. Elsewhere (no
  prctl) the child gets its own process group, and a backup stopped by SIGTERM or Ctrl-C still
  ends it through the normal clean-up path.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# `.NAME.<pid>.<random>.partial`, or `.NAME.<random>.partial` as written before the process id was added.
_TEMPORARY = re.compile(r"^\.(?P<name>.+?)\.(?:(?P<pid>\d+)\.)?(?P<random>[0-9a-f]{8})\.partial$")
SIDE_FILES = ("-journal", "-wal", "-shm")


def temporary_beside(path: Path, suffix: str) -> Path:
    """Return a hidden name beside `path` for a file being written, carrying this process's id."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.{suffix}")


def create_private(path: Path) -> None:
    """Create `path` empty with mode 0600 (never an existing file), whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)  # the umask can only take bits away; this makes the mode exact


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the backup temporaries in `folder` whose writing process is gone; return what was removed."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = _TEMPORARY.match(path.name)
        if match is None or not path.is_file():
            continue
        pid = match.group("pid")
        if pid is not None and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        if pid is not None and int(pid) == os.getpid():
            continue  # this process's own backup, being written now
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
        for extra in SIDE_FILES:
            Path(f"{path}{extra}").unlink(missing_ok=True)
    return removed


def _die_with_parent(parent: int) -> Callable[[], None]:
    """Return the function a child runs before exec: ask the kernel to kill it when `parent` dies."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def child_options() -> dict[str, Any]:
    """Return the Popen options that tie a child tool to this process (see the module's docstring)."""
    if sys.platform.startswith("linux"):
        return {"preexec_fn": _die_with_parent(os.getpid())}
    return {"start_new_session": True}


def run_tool(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool to its end, tied to this process; return what it printed."""
    return subprocess.run(args, env=env, capture_output=True, text=True, **child_options())
