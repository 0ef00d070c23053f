"""Reading JSON Lines files (records, rollouts, generations, data), with errors that name the line
(``gdpo_verl.experiments.data_files`` reads the data scripts' JSON and parquet files on top of it).

Files are opened without blocking and refused unless they are regular files: a FIFO, a socket or a device where
a file is expected would otherwise wait without end for a writer (or a reader).
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger("gdpo_verl")

# A longer line is refused rather than read: one JSON line is one step, rollout or row, and the largest a run
# writes (a gdpo_steps.jsonl line: about 70 bytes a response) stays far below it.
MAX_LINE_BYTES = 256 * 2**20


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (for error messages)."""
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


class NotRegularFile(OSError, ValueError):
    """A FIFO, socket, device or directory where a regular file is expected (an OSError for writers, a ValueError
    for the command line's bad inputs)."""


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: str = "rb", permissions: int = 0o666) -> IO[Any]:
    """``path`` opened with ``flags`` (``os.O_*``) as a file object in ``mode``; NotRegularFile naming it when it is
    not a regular file (FileNotFoundError when it does not exist and ``flags`` do not create it).

    The open itself never blocks: ``O_NONBLOCK`` makes opening a FIFO return at once (or fail, writing to one
    nobody reads), and the opened file is checked with ``fstat``, so nothing can swap it in between.
    """
    path = Path(path)
    try:
        descriptor = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), permissions)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            kind = os.stat(path).st_mode
        except OSError:
            raise exc from None
        if stat.S_ISREG(kind):
            raise
        raise NotRegularFile(_not_regular(path, kind)) from None
    kind = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(kind):
        os.close(descriptor)
        raise NotRegularFile(_not_regular(path, kind))
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, mode)


def _not_regular(path: Path, kind: int) -> str:
    return f"{path} is {file_kind(kind)}, not a regular file; give a regular file."


def regular_file(path: str | Path) -> Path:
    """``path`` when it is a regular file (or a link to one); ValueError naming it otherwise. Opens nothing."""
    path = Path(path)
    try:
        kind = path.stat().st_mode
    except OSError:
        raise ValueError(f"{path}: no such file.") from None
    if not stat.S_ISREG(kind):
        raise NotRegularFile(_not_regular(path, kind))
    return path


def iter_jsonl(path: str | Path, *, torn_tail: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line, read one line at a time (memory: one line); ValueError
    naming the file and line otherwise.

    ``torn_tail=True`` is for files a process appends to and may be killed while writing: a last line that is
    not valid JSON and has no newline after it is left out, with a warning, instead of raising.
    """
    path = Path(path)
    try:
        handle = open_regular(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file.") from None
    with handle:
        number = 0
        while True:
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise ValueError(f"{path}:{number}: a line longer than {MAX_LINE_BYTES // 2**20} MiB; not a JSON "
                                 "line this package writes or reads.")
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except RecursionError:
                raise ValueError(f"{path}:{number}: not valid JSON (nested too deeply).") from None
            except ValueError as exc:  # JSONDecodeError, bad UTF-8, an integer of more than 4,300 digits
                if torn_tail and not line.endswith(b"\n"):  # only the last line can lack its newline
                    logger.warning("%s:%d: left out a torn last line (%d bytes, no newline): the process writing "
                                   "it stopped in the middle.", path, number, len(line))
                    return
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(";")[0]
                raise ValueError(f"{path}:{number}: not valid JSON ({reason}).") from None
            yield number, value


def read_jsonl(path: str | Path, *, torn_tail: bool = False) -> list[tuple[int, Any]]:
    """Every ``(line number, value)`` of ``iter_jsonl`` in a list."""
    return list(iter_jsonl(path, torn_tail=torn_tail))
