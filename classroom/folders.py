"""A student's folder, handled without following a link: walked (bounded in depth), checked, copied to a job."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path


class SubmissionError(ValueError):
    """A submission that is refused as it is (a link, a device, ...): the message is for the student."""


def copy_plain(src: Path, dst: Path) -> None:
    """Copy a student's folder: regular files and folders only; a symlink or special file is refused."""
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        if entry.name == ".ipynb_checkpoints":
            continue
        mode = entry.stat(follow_symlinks=False).st_mode
        where = Path(entry.path).relative_to(src.parent)
        if stat.S_ISLNK(mode):
            raise SubmissionError(f"{where} is a symbolic link: submit the file itself (links are not graded)")
        if stat.S_ISDIR(mode):
            copy_plain(Path(entry.path), dst / entry.name)
        elif stat.S_ISREG(mode):
            shutil.copyfile(entry.path, dst / entry.name, follow_symlinks=False)
        else:
            raise SubmissionError(f"{where} is not a regular file (a device, pipe or socket): submit plain files")


MAX_DEPTH = 32  # folders nested deeper in a submission are refused (a walk 1,500 deep ended the class's grading)


def walk(folder: Path):
    """(path, lstat mode) of everything under `folder`, links not followed, without recursion; a ValueError past
    MAX_DEPTH levels."""
    stack = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"folders nested more than {MAX_DEPTH} deep")
        for entry in sorted(os.scandir(here), key=lambda e: e.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            yield Path(entry.path), mode
            if stat.S_ISDIR(mode):
                stack.append((Path(entry.path), depth + 1))


def check_plain(folder: Path) -> str | None:
    """Why a student's folder is refused (a link or special file somewhere in it, or too deep), or None."""
    try:
        for path, mode in walk(folder):
            if stat.S_ISLNK(mode):
                return f"{path.relative_to(folder.parent)} is a symbolic link: submit plain files only (not graded)"
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return f"{path.relative_to(folder.parent)} is not a regular file: submit plain files only (not graded)"
    except ValueError as exc:
        return f"{folder.name}/ has {exc}: submit the notebooks near the top of your folder (not graded)"
    except OSError as exc:
        return f"{folder.name}/ could not be read ({exc.strerror}): not graded"
    return None
