"""Secrets read from files (a mounted Secret): the one reader behind every `*_file` option and the mark
detector's `--key-file`."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any


def secret_path(file: Path, flag: str) -> Path:
    """`file` when it is a regular file that not every user may write (OSError when it cannot be read)."""
    try:
        mode = file.stat().st_mode
    except OSError as exc:
        raise ValueError(f"{flag} {file}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ValueError(f"{flag} {file} is not a regular file")
    if mode & stat.S_IWOTH:
        raise ValueError(f"{flag} {file} is writable by every user: chmod o-w it")
    return file


def secret(path: Any, flag: str) -> str:
    """A token or secret read from a file (a mounted Secret): trimmed, one line, not empty, and not a file
    that every user may write (anyone could put their own token there). Readable by others is allowed: a
    Kubernetes Secret volume is 0644 unless its defaultMode says otherwise. Every *_file option comes
    here."""
    try:
        value = secret_path(Path(str(path)), flag).read_text().strip()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{flag} {path} is not UTF-8 text") from None
    if not value:
        raise ValueError(f"{flag} {path} is empty")
    if "\n" in value or "\r" in value:
        raise ValueError(f"{flag} {path} holds more than one line")
    return value
