"""Folders qloom owns (``OUT``, ``OUT/build``, ``OUT/deploy``): refused when they are not
qloom's to replace, written in a staging sibling and swapped in only when complete.

A user's files are never deleted: an existing folder is replaced only when it is empty or
``owned`` says qloom made it (a design's manifest, a build's report); symbolic links,
files, the working directory and its ancestors are refused. The swap keeps the old
folder until the new one is in place: one atomic ``renameat2(RENAME_EXCHANGE)`` where the
kernel and file system allow it, else two renames through a hidden ``.NAME.old-*`` folder
that the next run puts back (if ``NAME`` is missing) or deletes. Staging folders carry a
marker file, so that cleaning a killed run's leftovers only ever deletes what qloom made.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import QloomError
from ..manifest import is_design

__all__ = ["Area", "is_design", "is_subfolder", "check_path_text"]

MARKER = ".qloom-staging"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# Temporary names are ``.STEM.KIND-PID-RANDOM``; a long NAME is shortened to a stem with a
# hash so that the temporary name stays under the 255-byte limit of a file name.
_STEM_BYTES = 64


def check_path_text(path, what: str) -> str:
    """``path`` as text, refused when it holds a control character (a newline ends a
    line of a generated script or a comment, whatever the quoting)."""
    text = os.fspath(path)
    bad = sorted({c for c in text if ord(c) < 32 or ord(c) == 127})
    if bad:
        raise QloomError(f"{what} {text!r} contains the control character(s) "
                         f"{', '.join(repr(c) for c in bad)}; qloom writes paths into scripts, "
                         f"where they cannot be quoted: choose a name without them")
    return text


def is_subfolder(folder: Path) -> bool:
    """A folder with one of qloom's names inside a qloom design (``OUT/build``,
    ``OUT/build-failed``, ``OUT/deploy``): qloom's to replace."""
    return Path(folder).is_dir()


def _stem(name: str) -> str:
    if len(name.encode()) <= _STEM_BYTES:
        return name
    digest = hashlib.sha256(name.encode(errors="surrogateescape")).hexdigest()[:16]
    short = name.encode()[:32].decode(errors="ignore")
    return f"{short}~{digest}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2``). False when the kernel, the C
    library or the file system cannot: the caller falls back to two renames."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def _remove(folder: Path):
    """Delete a folder qloom made; a symbolic link is only unlinked, never followed."""
    if folder.is_symlink() or not folder.is_dir():
        folder.unlink(missing_ok=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Area:
    """One folder qloom replaces as a whole.

    ``what`` names it in messages (``"OUT"``); ``owned(folder)`` says whether an existing,
    non-empty folder is qloom's to replace; ``hint`` tells the user what to do instead.
    """

    path: Path
    what: str
    owned: Callable[[Path], bool]
    hint: str = "choose a new folder or an empty one"

    @classmethod
    def at(cls, path, what: str, owned: Callable[[Path], bool], **kw) -> "Area":
        """The area at ``path`` (made absolute without following its last component)."""
        text = check_path_text(path, what)
        if text == "":
            raise QloomError(f"{what} is an empty path; give a folder name")
        if text.strip("/") == "":
            raise QloomError(f"{what} {text!r} is the root folder; qloom replaces {what} as a "
                             f"whole, so give a folder of its own, e.g. /tmp/out")
        if os.path.basename(text.rstrip("/")) in (".", ".."):
            raise QloomError(f"{what} {text!r} ends in '.' or '..'; qloom replaces {what} as "
                             f"a whole, so give a folder of its own, e.g. "
                             f"{os.path.join(text, 'out')}")
        absolute = Path(os.path.abspath(text))
        return cls(absolute, what, owned, **kw)

    # -- checks -------------------------------------------------------------------------

    def check(self, *, keep_clear_of: tuple = ()) -> "Area":
        """Refuse when replacing the folder could lose a user's files: a link, a file, the
        working directory or an ancestor of it (or of any folder in ``keep_clear_of``,
        ``(path, label)`` pairs such as the model's folder), or a non-empty folder qloom did
        not make."""
        p = self.path
        if p.is_symlink():
            raise QloomError(f"{self.what} {p} is a symbolic link (to {os.readlink(p)}); qloom "
                             f"never replaces a folder through a link: give the real folder")
        real = p.parent.resolve() / p.name
        guarded = [(Path.cwd().resolve(), "the working directory")]
        guarded += [(Path(k).resolve(), label) for k, label in keep_clear_of]
        for folder, label in guarded:
            if real == folder or real in folder.parents:
                raise QloomError(f"{self.what} {p} is {label} or a folder above it; qloom "
                                 f"replaces {self.what} as a whole: {self.hint}")
        if p.exists() and not p.is_dir():
            raise QloomError(f"{self.what} {p} is an existing file; qloom writes a folder "
                             f"there and never replaces a file: {self.hint}")
        if p.is_dir() and not self._replaceable():
            entries = sorted(e.name for e in p.iterdir())
            raise QloomError(f"{self.what} {p} is a folder with other files in it "
                             f"({len(entries)} entries, e.g. {entries[0]!r}) that qloom did not "
                             f"write; qloom replaces only an empty folder or one it made: "
                             f"{self.hint}")
        return self

    def _replaceable(self) -> bool:
        try:
            with os.scandir(self.path) as entries:
                empty = next(entries, None) is None
        except OSError as e:
            raise QloomError(f"cannot read {self.what} {self.path}: {e.strerror}") from None
        return empty or self.owned(self.path)

    # -- temporary names and leftovers --------------------------------------------------

    def _temp(self, kind: str) -> Path:
        name = f".{_stem(self.path.name)}.{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        return self.path.with_name(name)

    def _leftovers(self):
        """(kind, path) of temporary folders of this area left by runs that are not
        alive any more."""
        pattern = re.compile(rf"\.{re.escape(_stem(self.path.name))}\."
                             r"(stage|old)-(\d+)-[0-9a-f]+")
        try:
            with os.scandir(self.path.parent) as scan:
                entries = list(scan)
        except OSError:
            return []
        found = []
        for entry in entries:
            m = pattern.fullmatch(entry.name)
            if m and not _alive(int(m.group(2))) and entry.is_dir(follow_symlinks=False) \
                    and (Path(entry.path) / MARKER).is_file():
                found.append((m.group(1), Path(entry.path)))
        return found

    def recover(self):
        """Clean up after a run that was killed: if the folder is missing and a complete
        old copy (``owned``) was left between the two renames of the fallback swap, put it
        back; delete every other staging or old folder qloom made."""
        leftovers = self._leftovers()
        if not os.path.lexists(self.path):
            for kind, folder in sorted(leftovers, key=lambda kf: kf[0] != "old"):
                if kind == "old" and self.owned(folder):
                    os.rename(folder, self.path)
                    (self.path / MARKER).unlink(missing_ok=True)
                    leftovers.remove((kind, folder))
                    break
        for _, folder in leftovers:
            _remove(folder)

    # -- writing ------------------------------------------------------------------------

    def prepare(self, *, keep_clear_of: tuple = ()) -> "Area":
        """``check`` the folder and clean up after a killed run; call once, before any
        work, so that a refusal costs nothing."""
        self.check(keep_clear_of=keep_clear_of)
        try:
            self.recover()
        except OSError as e:
            raise QloomError(f"cannot clean up {self.what} {self.path} after an interrupted "
                             f"run: {e.strerror or e} ({e.filename})") from None
        return self.check(keep_clear_of=keep_clear_of)

    def staging(self) -> Path:
        """A new, marked staging folder next to the area's folder."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._temp("stage")
            tmp.mkdir()
            (tmp / MARKER).write_text(f"qloom staging folder for {self.path.name}\n")
        except OSError as e:
            raise QloomError(f"cannot write {self.what} {self.path}: cannot create a folder "
                             f"in {self.path.parent} ({e.strerror or e})") from None
        return tmp

    def install(self, staging: Path):
        """Put the complete ``staging`` folder in place of the area's folder; the old
        one stays in place (or recoverable) until the new one is there."""
        try:
            if os.path.lexists(self.path):
                self.check()
                (self.path / MARKER).write_text("replaced by qloom\n")
                if not _exchange(staging, self.path):
                    old = self._temp("old")
                    os.rename(self.path, old)
                    os.rename(staging, self.path)
                    staging = old
                (self.path / MARKER).unlink(missing_ok=True)
                _remove(staging)            # the old folder, marked as qloom's
            else:
                os.rename(staging, self.path)
                (self.path / MARKER).unlink(missing_ok=True)
        except OSError as e:
            raise QloomError(f"cannot replace {self.what} {self.path}: "
                             f"{e.strerror or e}") from None

    def discard(self, staging: Path | None):
        if staging is not None and (staging / MARKER).is_file():
            _remove(staging)
