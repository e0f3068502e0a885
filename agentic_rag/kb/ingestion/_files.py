"""Listing and opening the files to index. Only a regular file whose real path is inside the
folder being indexed is read, never one on a kernel file system (proc, sys, dev), and none larger
than the size limit. Every check that matters is made on the opened descriptor itself, so a file or
folder swapped for a link after the path was checked cannot slip through: on Linux the path is
opened with O_PATH | O_NOFOLLOW (which opens nothing: a device or FIFO is never opened, so nothing
blocks and no device acts), the descriptor's type, file system, size and real path are checked, and
only then is that very file opened for reading through /proc/self/fd."""
from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

from ...core import ConfigurationError
from .._layout import is_segment_folder
from ._gzip import inner_suffix, is_gzip_name
from ._unreadable import Unreadable, too_large

MAX_FILE_BYTES = 100_000_000  # a file past this is skipped before it is read (index --max-file-size)
# the service's bound on one uploaded file, decoded, and on what a .docx may unpack to (serve
# --max-file-size): lower, since uploads come from clients and python-docx holds about 25 times the
# unpacked XML while it reads
MAX_UPLOAD_BYTES = 10_000_000
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
# statfs f_type of the kernel's own file systems: their files are the kernel's state (a process's
# environment, a device's registers), never documents. devtmpfs shares tmpfs's number, so /dev is
# caught by its device number instead (see kernel_file_system).
_KERNEL_MAGIC = {0x9FA0: "proc", 0x62656572: "sysfs", 0x1CD1: "devpts", 0x64626720: "debugfs",
                 0x74726163: "tracefs", 0x73636673: "securityfs", 0x27E0EB: "cgroup", 0x63677270: "cgroup2",
                 0xCAFE4A11: "bpf", 0x62656570: "configfs", 0xDE5E81E4: "efivarfs", 0x6165676C: "pstore",
                 0x19800202: "mqueue", 0x65735543: "fusectl", 0x42494E4D: "binfmt_misc"}
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def inside(path: Path | str, root: str) -> str:
    """The real path of `path`; Unreadable when it is outside `root` (a real path)."""
    real = os.path.realpath(path)
    if not _within(real, root):
        raise Unreadable(f"outside the folder being indexed (it leads to {real}): only files inside it are read; "
                         f"copy the file in to index it")
    return real


def listed(paths: str | Path | Iterable[str | os.PathLike], suffixes: tuple[str, ...], skipped: list,
           compressed: tuple[str, ...] = ()) -> list[tuple[Path, str, str]]:
    """Each file of a suffix given under the paths given, or gzipped (NAME.pdf.gz) when its inner
    suffix is one of `compressed`: (path, its id, the real path of the folder it must stay inside).
    A file named directly must stay inside the folder it is named in, as a folder's files must stay
    inside it: a link named by a service's caller is no way out either."""
    def wanted(path: Path) -> bool:
        return inner_suffix(path.name) in compressed if is_gzip_name(path.name) else path.suffix.lower() in suffixes

    files: list[tuple[Path, str, str]] = []
    for raw in [paths] if isinstance(paths, (str, Path)) else paths:
        root = Path(raw)
        if not root.exists():
            raise ConfigurationError(f"path not found: {raw!s}; give an existing file or directory")
        if not root.is_dir():
            if wanted(root):
                files.append((root, root.name, os.path.realpath(root.parent)))
            elif is_gzip_name(root.name):
                skipped.append((str(root), f"a compressed file of an unsupported type "
                                           f"({inner_suffix(root.name) or 'none'}); compressed, only "
                                           f"{', '.join(s + '.gz' for s in compressed)} are read"))
            else:
                skipped.append((str(root), f"unsupported file type; use one of {', '.join(suffixes)}"))
            continue
        real = os.path.realpath(root)
        for path in sorted(root.rglob("*")):  # rglob never follows a link to a folder
            relative = path.relative_to(root)
            hidden = any(part.startswith(".") for part in relative.parts)
            if wanted(path) and not hidden and not _is_folder(path) \
                    and not _in_segment(path.parent, root):
                files.append((path, relative.as_posix(), real))
    return files


def _in_segment(folder: Path, root: Path) -> bool:
    """Whether `folder` is, or lies in, a knowledge base's segment folder (gen-NNNNNN, listed by the
    manifest.json beside it) under `root`: a knowledge base kept among its documents is not read as
    documents."""
    while folder != root and folder != folder.parent:
        if is_segment_folder(folder):
            return True
        folder = folder.parent
    return False


def _is_folder(path: Path) -> bool:
    """A folder itself (a link is a file here, and reading it says where it leads); gone counts as one."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return True


def read_inside(path: Path | str, root: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file at `path` if it is inside `root` (a real path), on no kernel
    file system and at most `max_bytes` long; else Unreadable with the reason in one line."""
    real = inside(path, root)
    reopen = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")
    if not reopen:
        _regular(os.lstat(real).st_mode)  # without O_PATH, a device or FIFO is refused before it is opened
    fd = os.open(real, (os.O_PATH | os.O_CLOEXEC if reopen else _READ) | _NOFOLLOW)
    try:
        info = _checked(fd, root, max_bytes, reopen)
        if reopen:
            path_fd, fd = fd, os.open(f"/proc/self/fd/{fd}", _READ)  # the very file checked, now for reading
            os.close(path_fd)
            now = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                raise Unreadable("changed while it was being opened; index it again")
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(info.st_size + 1)  # one allocation of the size stat gave
            if len(data) > info.st_size:  # it grew since: read on, up to the limit
                data += file.read(max_bytes + 1 - len(data))
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise Unreadable(too_large(len(data), max_bytes))
    return data


def _checked(fd: int, root: str, max_bytes: int, opened_path: bool) -> os.stat_result:
    """The descriptor's stat, once it is a regular file on no kernel file system, within the size
    limit and (where /proc/self/fd tells) still inside `root`."""
    info = os.fstat(fd)
    _regular(info.st_mode)
    kernel = kernel_file_system(fd)
    if kernel:
        raise Unreadable(f"on the {kernel} file system, which holds the kernel's state, not documents: never read")
    if opened_path:
        inside(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"), root)
    if info.st_size > max_bytes:
        raise Unreadable(too_large(info.st_size, max_bytes))
    return info


def _regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "another kind of file")
        raise Unreadable(f"not a regular file ({kind}): only regular files are read")


def kernel_file_system(fd: int) -> str | None:
    """The name of the kernel file system an open descriptor's file is on (proc, sysfs, dev, ...),
    None for one that holds files. Judged by the descriptor, so a bind mount of /proc inside the
    folder is caught: on Linux by statfs's f_type, and everywhere by the device number of /proc,
    /sys and /dev where each is a mount of its own."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        buffer = ctypes.create_string_buffer(256)  # struct statfs (120 bytes on 64-bit), f_type first
        if libc.fstatfs(fd, buffer) == 0:
            name = _KERNEL_MAGIC.get(ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF)
            if name:
                return name
    device = os.fstat(fd).st_dev
    top = os.stat("/").st_dev
    for folder, name in (("/proc", "proc"), ("/sys", "sysfs"), ("/dev", "dev")):
        try:
            mounted = os.stat(folder).st_dev
        except OSError:
            continue
        if mounted == device and mounted != top:  # /dev as a plain folder of / marks nothing
            return name
    return None


def _within(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)
