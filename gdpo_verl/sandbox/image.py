"""The files a run sees of the system: a copy, on a tmpfs, of the interpreter, its standard library and the shared
libraries they load, and nothing else of the host.

Why a copy: files shared with the host live in the host's page cache, which every process of the host reads and
changes. A program can drop a file's pages from it (``posix_fadvise`` with a read-only descriptor, or
``madvise(MADV_PAGEOUT)`` on a mapping of it), load others,
and read the pattern back by timing its reads: state that outlives the run, read by the next one (and a run's reads
of the host's disk, and evictions of the host's cached files, would be the host's cost). A tmpfs's pages are the
file itself: they are always in memory, cannot be dropped, and reading them never touches a disk. So every file a
run can open (this image, its own ``/work``, five device nodes) reads the same whatever any run did before, and a run
does no disk I/O at all (its cgroup forbids swap under strict isolation).

The image also holds the session's interpreter (``programs/interpreter.py``) compiled by its python
(``Image.session_pyc``, a .pyc's bytes, which each sandbox gets as ``/interpreter.pyc``): compiled from source, it
cost each session's start about 3 ms of CPU.

One image per interpreter per process, built when its first sandbox starts, under ``/dev/shm`` (it must be a tmpfs
that allows executing files), named after its owner (``host.owner``), removed when this process exits, and swept
by the next process of the same pid namespace when its owner died. Its files are read-only, and bound read-only
into each sandbox. What is copied: the interpreter, the directories of its ``sys.path`` (without ``-S``'s
site-packages: the standard library and its extension modules), leaving out the test suites, IDLE, tkinter and
turtle demos (``SKIPPED``), and every shared library ``ldd`` finds for the interpreter and the extension modules,
with the symbolic links on the way to each, so that each keeps its path.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import threading

from gdpo_verl.sandbox.host import owner, owner_gone
from gdpo_verl.sandbox.launch import INTERPRETER
from gdpo_verl.sandbox.outcome import SandboxUnavailable

BASE = "/dev/shm"
PREFIX = "gdpo-sandbox-image-"
# directories of the standard library a program has no use for (the test suite, GUIs, installers, other packages;
# lib2to3 and distutils, deprecated, carry test suites of their own)
SKIPPED = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
           "distutils"}
_PATHS = ("import json, os, sys; print(json.dumps({'executable': os.path.realpath(sys.executable), "
          "'path': [entry for entry in sys.path if os.path.isdir(entry)]}))")

# a .pyc as python runs one by path: the magic number, 12 bytes it does not read there (PEP 552's flags and source
# stamp), then the code
_COMPILE = ("import importlib.util, marshal, sys; code = compile(open(sys.argv[1], 'rb').read(), sys.argv[2], "
            "'exec', dont_inherit=True); "
            "sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))")

_lock = threading.Lock()
_images: dict[str, Image] = {}


def image_for(python: str) -> Image:
    """This process's image of ``python``, built on first use."""
    with _lock:
        if python not in _images:
            _images[python] = Image(python)
        return _images[python]


class Image:
    """A read-only copy of ``python`` and what it loads under ``root`` (``BASE``/``PREFIX``<owner>-<n>), laid out as
    on the host. ``mounts()``: bubblewrap's arguments that put it at ``/``; ``session_pyc``: the session's
    interpreter compiled by ``python``."""

    def __init__(self, python: str) -> None:
        self.python = python
        _check_base()
        _sweep()
        self.root = os.path.join(BASE, f"{PREFIX}{owner(os.getpid())}-{len(_images)}")
        files, trees = self._inventory()
        self.session_pyc = self._compile_session_interpreter()
        needed = sum(os.path.getsize(path) for path in files) + sum(
            os.path.getsize(os.path.join(top, name)) for tree in trees for top, _, names in _walk(tree)
            for name in names)
        free = os.statvfs(BASE).f_bavail * os.statvfs(BASE).f_frsize
        if needed * 1.1 > free:
            raise SandboxUnavailable(
                f"the sandbox's image of {python} needs {needed / 2**20:.0f} MB of {BASE}, which has "
                f"{free / 2**20:.0f} MB free; give {BASE} more room (a container: --shm-size or a tmpfs mount).")
        os.mkdir(self.root, 0o755)
        atexit.register(shutil.rmtree, self.root, ignore_errors=True)
        try:
            for tree in trees:
                self._copy_tree(tree)
            for path in files:
                self._mirror(path)
            for name in ("python3", "python"):  # the names a program may start it by
                link = os.path.join(self.root + os.path.dirname(python), name)
                if not os.path.lexists(link):
                    os.symlink(os.path.basename(python), link)
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def mounts(self) -> list[str]:
        """bubblewrap's arguments: each top-level entry of the image, a directory bound read-only or a link."""
        arguments = []
        for entry in sorted(os.listdir(self.root)):
            path = os.path.join(self.root, entry)
            if os.path.islink(path):
                arguments += ["--symlink", os.readlink(path), f"/{entry}"]
            else:
                arguments += ["--ro-bind", path, f"/{entry}"]
        return arguments

    def _inventory(self) -> tuple[list[str], list[str]]:
        """The interpreter and its shared libraries (files), and its ``sys.path`` directories (trees)."""
        try:
            found = json.loads(subprocess.run([self.python, "-I", "-S", "-c", _PATHS], capture_output=True,
                                              check=True, timeout=60).stdout)
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            raise SandboxUnavailable(f"the interpreter {self.python} did not say where its standard library is "
                                     f"({error}); set the coding reward's python option to one that runs.") from None
        trees = [os.path.realpath(entry) for entry in found["path"]]
        objects = [found["executable"]] + [os.path.join(top, name) for tree in trees for top, _, names in _walk(tree)
                                           for name in names if ".so" in name]
        return [found["executable"], *_libraries(objects)], trees

    def _compile_session_interpreter(self) -> bytes:
        """``programs/interpreter.py`` compiled by this python: a .pyc's bytes, its code named ``/interpreter.py``
        (a path no run can make: the sandbox's root is read-only)."""
        try:
            return subprocess.run([self.python, "-I", "-S", "-c", _COMPILE, INTERPRETER, "/interpreter.py"],
                                  capture_output=True, check=True, timeout=60).stdout
        except subprocess.CalledProcessError as error:
            said = error.stderr.decode("utf-8", "replace").strip()[-300:]
            detail = f"exit code {error.returncode}: {said}"
        except (OSError, subprocess.SubprocessError) as error:
            detail = str(error)
        raise SandboxUnavailable(f"the interpreter {self.python} could not compile the sandbox's own program "
                                 f"{INTERPRETER} ({detail}); set the coding reward's python option to one that runs.")

    def _copy_tree(self, tree: str) -> None:
        self._mirror(os.path.dirname(tree))
        for top, directories, names in _walk(tree):
            target = self.root + top
            os.makedirs(target, 0o755, exist_ok=True)
            for name in directories:
                source = os.path.join(top, name)
                if os.path.islink(source):
                    os.symlink(os.readlink(source), os.path.join(target, name))
            for name in names:
                if not os.path.lexists(os.path.join(target, name)):  # a tree inside another is walked twice
                    _copy(os.path.join(top, name), os.path.join(target, name))

    def _mirror(self, path: str, depth: int = 0) -> None:
        """Copy ``path`` (an absolute host path) to the same path in the image, making each symbolic link on the
        way a link of the image."""
        if depth > 40:
            raise SandboxUnavailable(f"too many symbolic links on the way to {path}")
        current = "/"
        parts = [part for part in path.split("/") if part]
        for index, part in enumerate(parts):
            host = os.path.join(current, part)
            if os.path.islink(host):
                target = os.readlink(host)
                link = self.root + host
                if not os.path.lexists(link):
                    os.makedirs(os.path.dirname(link), 0o755, exist_ok=True)
                    os.symlink(target, link)
                resolved = os.path.normpath(os.path.join(current, target))
                return self._mirror(os.path.join(resolved, *parts[index + 1:]), depth + 1)
            current = host
        target = self.root + current
        if os.path.isdir(current):
            os.makedirs(target, 0o755, exist_ok=True)
        elif not os.path.lexists(target):
            os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
            _copy(current, target)


def _walk(tree: str):
    """os.walk over ``tree`` without ``SKIPPED`` directories and optimized bytecode."""
    for top, directories, names in os.walk(tree):
        directories[:] = [name for name in directories if name not in SKIPPED]
        yield top, directories, [name for name in names if ".opt-" not in name
                                 and not os.path.islink(os.path.join(top, name))]


def _copy(source: str, target: str) -> None:
    """A copy with the source's times (python takes a bytecode file for its source by the source's modification time:
    new times would have every import compile its module again) and read-only modes."""
    shutil.copyfile(source, target)
    found = os.stat(source)
    os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns))
    os.chmod(target, 0o555 if found.st_mode & 0o111 else 0o444)


def _libraries(objects: list[str]) -> list[str]:
    """The shared libraries ``ldd`` finds for ``objects`` (the loader included)."""
    found: set[str] = set()
    for start in range(0, len(objects), 64):
        result = subprocess.run(["ldd", *objects[start:start + 64]], capture_output=True, text=True, timeout=120)
        for line in result.stdout.splitlines():
            words = line.split()
            if "=>" in words and words.index("=>") + 1 < len(words) and words[words.index("=>") + 1].startswith("/"):
                found.add(words[words.index("=>") + 1])
            elif words and words[0].startswith("/") and "(" in line:
                found.add(words[0])
    return sorted(found)


def _check_base() -> None:
    """``BASE`` is a tmpfs that allows executing files (the interpreter runs from it), else SandboxUnavailable."""
    if shutil.which("ldd") is None:
        raise SandboxUnavailable("no ldd on PATH (it finds the shared libraries the interpreter loads); install "
                                 "libc-bin.")
    best, fstype, options = "", "", ""
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields, _, rest = line.partition(" - ")
            point, mount_options = fields.split()[4], fields.split()[5]
            if (BASE == point or BASE.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, fstype, options = point, rest.split()[0], mount_options
    if fstype != "tmpfs" or "noexec" in options.split(","):
        raise SandboxUnavailable(
            f"{BASE} is {'not a tmpfs' if fstype != 'tmpfs' else 'mounted noexec'} ({fstype or 'not mounted'}, "
            f"{options or '-'}): the sandbox keeps the files its runs see on a tmpfs they can execute from (their "
            f"pages are never read from a disk nor dropped). Mount a tmpfs there without noexec (a container: "
            f"--tmpfs {BASE}:rw,exec,size=1g).")


def _sweep() -> None:
    """Remove the images of processes of this pid namespace that died (an image that cannot be removed raises: left
    there, images would fill ``BASE`` unseen)."""
    for entry in os.listdir(BASE):
        if owner_gone(entry, PREFIX):
            shutil.rmtree(os.path.join(BASE, entry))
