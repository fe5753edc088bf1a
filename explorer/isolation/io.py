"""Reading and writing files safely: outputs are written to a temp file beside the target and renamed
into place (:func:`write_bytes_atomic`, :func:`move_atomic`) with the mode a plain ``open`` gives (the
process umask applies), and :func:`check_output_path` refuses an output that would replace the input or
cannot be written, before any long work runs; :func:`cache_folder` is the cache every run shares
(``$ONNX_EXPLORER_CACHE``), refused by name when it cannot be written. On the way in,
:func:`check_model_file` and :func:`open_model_file` take a model path only when it is a regular
file: a FIFO, a device (``/dev/zero``), a socket or a folder is refused, by its ``stat``, before
anything opens it, so a read can neither block forever nor run without end; :func:`read_json_file`
reads any other input file the same way, bounded in size (an overlay, a profile).

Examples
--------
>>> import tempfile, os
>>> from explorer import zoo
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = save_model_atomic(zoo.build("mlp"), os.path.join(tmp, "out.onnx"))
...     os.path.basename(path), sorted(os.listdir(tmp))
('out.onnx', ['out.onnx'])
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from explorer.core.errors import (
    ModelLoadError,
    ModelNotFoundError,
    ModelTooLargeError,
    OutputPathError,
    UsageError,
)

if TYPE_CHECKING:  # a worker that only moves files never imports onnx for this module
    import onnx

__all__ = [
    "write_bytes_atomic",
    "write_text_atomic",
    "writing_atomically",
    "move_atomic",
    "save_model_atomic",
    "check_output_path",
    "input_model_at",
    "check_writable_folder",
    "new_file_mode",
    "CACHE_VARIABLE",
    "cache_folder",
    "file_kind",
    "check_model_file",
    "open_model_file",
    "JSON_MAX_BYTES",
    "read_json_file",
]


def new_file_mode() -> int:
    """The mode a new file gets here: 0666 less the process umask (0644 under umask 022, 0600 under
    077), as a plain ``open`` would make it. Every output takes it when it is renamed into place, so
    a report, a model or a zoo file is as readable as anything else the user writes (a temp file
    alone would be 0600).

    Examples
    --------
    >>> import os
    >>> before = os.umask(0o027)
    >>> oct(new_file_mode())
    '0o640'
    >>> _ = os.umask(before)
    """
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:  # Linux
        for line in status:
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: read by setting it, and set back at once
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temp file beside ``target`` to fill in the block; it replaces ``target`` when the block succeeds.

    Beside the target, so the final ``os.replace`` is a rename on one file system: readers see
    the old file or the whole new one. On any error the temp file is removed and ``target`` is
    left as it was.
    """
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)  # private (0600) while it is filled
    try:
        yield Path(temp)
        with contextlib.suppress(OSError):  # a file system without modes keeps its own
            os.chmod(temp, new_file_mode())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


@contextlib.contextmanager
def writing_atomically(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """An open binary file that becomes ``path`` when the block ends without error (see
    :func:`write_bytes_atomic`); for outputs written piece by piece, too big to hold as one ``bytes``.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with writing_atomically(os.path.join(tmp, "a.bin")) as out:
    ...         _ = out.write(b"h"); _ = out.write(b"i")
    ...     sorted(os.listdir(tmp)), open(os.path.join(tmp, "a.bin"), "rb").read()
    (['a.bin'], b'hi')
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(target) as temp, open(temp, "wb") as out:
        yield out


def write_bytes_atomic(data: bytes, path: str | os.PathLike[str], *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the whole new one, never half.

    ``fsync=False`` skips flushing to the disk before the rename: still atomic for readers,
    not durable across a power cut (right for private scratch files).

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_bytes_atomic(b"hi", os.path.join(tmp, "a.bin")).read_bytes()
    b'hi'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _replacing(target) as temp, open(temp, "wb") as out:
        out.write(data)
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    return target


def write_text_atomic(text: str, path: str | os.PathLike[str]) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`write_bytes_atomic`).

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_text_atomic("ok", os.path.join(tmp, "a.txt")).read_text()
    'ok'
    """
    return write_bytes_atomic(text.encode("utf-8"), path)


def move_atomic(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Move the file ``source`` to ``path`` so readers see the old file or the whole new one, never half.

    A rename when both are on one file system; otherwise ``source`` is copied to a temp file
    beside ``path``, renamed into place, and then removed. Either way ``path`` gets
    :func:`new_file_mode`.

    Parameters
    ----------
    source : path
        The file to move.
    path : path
        Where it ends up (replaced if it exists).

    Returns
    -------
    Path
        ``path``.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     src = write_bytes_atomic(b"new", os.path.join(tmp, "staged.bin"))
    ...     out = write_bytes_atomic(b"old", os.path.join(tmp, "out.bin"))
    ...     move_atomic(src, out).read_bytes(), sorted(os.listdir(tmp))
    (b'new', ['out.bin'])
    """
    target = Path(path)
    try:
        os.chmod(source, new_file_mode())  # as a file written here (the worker's umask was set earlier)
        os.replace(source, target)
        return target
    except OSError:
        pass  # another file system: copy beside the target, then rename
    with _replacing(target) as temp:
        shutil.copyfile(source, temp)
    with contextlib.suppress(OSError):
        os.unlink(source)
    return target


def save_model_atomic(model: onnx.ModelProto, path: str | os.PathLike[str]) -> Path:
    """Save ``model`` to ``path`` atomically; models over 2 GiB are refused with a clear error
    (:class:`~explorer.core.errors.ModelTooLargeError`).

    Examples
    --------
    >>> import os, tempfile, onnx
    >>> from explorer import zoo
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = save_model_atomic(zoo.build("mlp"), os.path.join(tmp, "mlp.onnx"))
    ...     len(onnx.load(path).graph.node)
    6
    """
    from explorer.core.tensors import over_protobuf_limit

    if over_protobuf_limit(model):
        raise ModelTooLargeError(
            f"{path}: the model is over 2 GiB; save it with external data (onnx.save_model)"
        )
    return write_bytes_atomic(model.SerializeToString(), path)


def check_output_path(
    output: str | os.PathLike[str],
    inputs: str | os.PathLike[str] | tuple[str | os.PathLike[str], ...] = (),
    *,
    force: bool = False,
) -> Path:
    """Check that ``output`` can be written, before the work that produces it runs.

    Refused: an output that is one of ``inputs`` (the same path, or the same file through a
    hard or symbolic link: same device and inode) unless ``force``; an existing folder; a
    folder that does not exist or cannot be written in (tried by creating and removing a
    temp file there, so read-only file systems and permissions count as they will).
    Sources that are not files (``zoo:NAME``) are not compared.

    Parameters
    ----------
    output : path
        Where the result will be written.
    inputs : path or tuple of paths
        The input model files.
    force : bool
        Allow replacing an input (the write stays atomic: the input is read first).

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    OutputPathError
        Naming the path and what is wrong; nothing was written.

    Examples
    --------
    >>> from explorer import zoo
    >>> model = zoo.save("mlp")
    >>> check_output_path(model.parent / "out.onnx", str(model)).name
    'out.onnx'
    >>> try:
    ...     check_output_path(model, str(model))
    ... except OutputPathError as err:
    ...     print("refused:", "is the input model" in str(err))
    refused: True
    >>> check_output_path(model, str(model), force=True) == model
    True
    """
    target = Path(output)
    sources = (inputs,) if isinstance(inputs, (str, os.PathLike)) else tuple(inputs)
    folder = target.parent
    try:
        if target.is_dir():
            raise OutputPathError(f"{target}: the output is a folder; give a file name")
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise OutputPathError(f"{target}: cannot write the output: the folder {folder} {what}")
        exists = target.exists()
    except OSError as err:  # a folder on the way this user may not enter
        raise OutputPathError(f"{target}: cannot write the output: {err.strerror or err}") from None
    if exists and not force and (same := input_model_at(target, sources)) is not None:
        raise OutputPathError(
            f"{target}: the output is the input model {same}; writing it would replace "
            "the input: choose another output path, or pass --force to replace it"
        )
    check_writable_folder(folder, target)
    return target


def input_model_at(target: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str]]) -> str | None:
    """The input among ``sources`` that ``target`` is (the same file, or a hard or symbolic link to it),
    as ``"SOURCE"`` or ``"SOURCE (through a link)"``; None when it is none of them.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> model = os.path.join(folder, "m.onnx")
    >>> open(model, "wb").close(); os.symlink(model, os.path.join(folder, "link.onnx"))
    >>> input_model_at(os.path.join(folder, "link.onnx"), ["zoo:mlp", model]) == f"{model} (through a link)"
    True
    """
    for source in sources:
        with contextlib.suppress(OSError):  # not a file (zoo:NAME, missing): nothing to protect
            if os.path.samefile(target, source):
                link = "" if os.path.abspath(target) == os.path.abspath(source) else " (through a link)"
                return f"{source}{link}"
    return None


def check_writable_folder(folder: str | os.PathLike[str], what: str | os.PathLike[str]) -> None:
    """Create and remove a temp file in ``folder``; raise :class:`OutputPathError` naming ``what``
    when that cannot be done (a read-only folder, one this user may not write in).

    Examples
    --------
    >>> import tempfile
    >>> check_writable_folder(tempfile.mkdtemp(), "out.onnx")
    """
    try:
        handle, probe = tempfile.mkstemp(prefix=".write-check.", suffix=".check", dir=folder)
    except OSError as err:
        raise OutputPathError(f"{what}: cannot write in the folder {folder}: {err.strerror or err}") from None
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(probe)


CACHE_VARIABLE = "ONNX_EXPLORER_CACHE"
"""The environment variable that names the cache folder (default ``~/.cache/onnx-graph-explorer``)."""


def cache_folder(*parts: str) -> Path:
    """The cache every run shares, ``$ONNX_EXPLORER_CACHE`` (else ``~/.cache/onnx-graph-explorer``),
    with ``parts`` below it: made when missing, and checked writable (a file is created and removed).

    Parameters
    ----------
    *parts : str
        Folders below the cache's root (``"tvm-tuning"``).

    Returns
    -------
    Path
        The folder, which exists and can be written in.

    Raises
    ------
    UsageError
        The variable (or the default folder) names a file, or a folder this user cannot make or
        write in: the message names the variable, the path and what is wrong.

    Examples
    --------
    >>> import os, tempfile
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {CACHE_VARIABLE: tempfile.mkdtemp()}):
    ...     cache_folder("tvm-tuning").is_dir()
    True
    >>> with mock.patch.dict(os.environ, {CACHE_VARIABLE: os.devnull}):
    ...     try:
    ...         cache_folder("tvm-tuning")
    ...     except UsageError as err:
    ...         print(str(err).split(";")[0])
    ONNX_EXPLORER_CACHE=/dev/null: is a character device, not a folder
    """
    given = os.environ.get(CACHE_VARIABLE)
    root = Path(given) if given else Path(os.path.expanduser("~"), ".cache", "onnx-graph-explorer")
    named = f"{CACHE_VARIABLE}={given}" if given else f"the cache folder {root}"
    fix = f"point {CACHE_VARIABLE} at a folder" if given else f"set {CACHE_VARIABLE} to a folder"
    folder = root.joinpath(*parts)
    try:
        if root.exists() and not root.is_dir():
            raise UsageError(
                f"{named}: is {file_kind(os.stat(root).st_mode)}, not a folder; {fix} (made when missing)"
                + (" or unset it" if given else "")
            )
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".write-check.", suffix=".tmp", dir=folder)
        os.close(handle)
    except OSError as err:
        why = "a part of the path is not a folder" if isinstance(err, NotADirectoryError) else err.strerror
        raise UsageError(
            f"{named}: the cache cannot be written at {folder}: {why or err}; {fix} you can write in"
        ) from None
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return folder


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISREG, "a regular file"),
)


def file_kind(mode: int) -> str:
    """What a file of ``stat`` mode ``mode`` is, in words: ``"a regular file"``, ``"a FIFO (named pipe)"``...

    Examples
    --------
    >>> import os
    >>> file_kind(os.stat(".").st_mode)
    'a folder'
    >>> file_kind(os.stat(os.devnull).st_mode)
    'a character device'
    """
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def check_model_file(
    path: str | os.PathLike[str], *, label: str | None = None, what: str = "an ONNX model file"
) -> os.stat_result:
    """Check that ``path`` is an existing regular file (a link to one counts), opening nothing.

    Every model path a user gives goes through here before it is opened: a FIFO would block
    the read forever, a device (``/dev/zero``, ``/dev/urandom``) would read without end, and
    neither is a model.

    Parameters
    ----------
    path : path
        The model file.
    label : str, optional
        How messages name it (default: ``path`` as given).
    what : str
        What the file should be, in the refusal's words (``"an ONNX model file"``, ``"a JSON file"``).

    Returns
    -------
    os.stat_result
        The file's ``stat`` (its size is what a reader may allocate at most).

    Raises
    ------
    ModelNotFoundError
        The path does not exist, or is a folder, a FIFO, a device, a socket: the message names
        the path and what it is.
    ModelLoadError
        The path cannot be looked at (a folder on the way this user may not enter).

    Examples
    --------
    >>> import os
    >>> from explorer import zoo
    >>> check_model_file(zoo.save("mlp")).st_size > 0
    True
    >>> try:
    ...     check_model_file(os.devnull)
    ... except ModelNotFoundError as err:
    ...     print(err)
    /dev/null: is a character device, not an ONNX model file
    """
    name = os.fspath(path) if label is None else label
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ModelNotFoundError("no such file", path=name) from None
    except NotADirectoryError:
        raise ModelNotFoundError("no such file (a part of the path is not a folder)", path=name) from None
    except OSError as err:
        raise ModelLoadError(f"cannot read the file: {err.strerror or err}", path=name) from None
    if not stat.S_ISREG(info.st_mode):
        raise _not_a_file(path, name, info.st_mode, what)
    return info


def _not_a_file(
    path: str | os.PathLike[str], name: str, mode: int, what: str = "an ONNX model file"
) -> ModelNotFoundError:
    """The error for a path that is there but is not a regular file, naming what it is."""
    link = ""
    with contextlib.suppress(OSError):
        if os.path.islink(path):
            link = f" (a link to {os.path.realpath(path)})"
    return ModelNotFoundError(f"is {file_kind(mode)}{link}, not {what}", path=name)


def open_model_file(
    path: str | os.PathLike[str], *, label: str | None = None, what: str = "an ONNX model file"
) -> BinaryIO:
    """Open a model file for reading, once :func:`check_model_file` has taken it.

    The file is opened without blocking and checked again on the open descriptor, so a path
    swapped for a FIFO between the check and the open is refused too, instead of hanging.

    Parameters
    ----------
    path : path
        The model file.
    label : str, optional
        How messages name it (default: ``path`` as given).
    what : str
        What the file should be, in the refusal's words.

    Returns
    -------
    BinaryIO
        The open file (close it, or use it in a ``with`` block).

    Raises
    ------
    ModelNotFoundError
        As :func:`check_model_file`.
    ModelLoadError
        The file cannot be opened (permissions).

    Examples
    --------
    >>> from explorer import zoo
    >>> with open_model_file(zoo.save("mlp")) as handle:
    ...     len(handle.read(4))
    4
    """
    name = os.fspath(path) if label is None else label
    check_model_file(path, label=label, what=what)
    nonblocking = getattr(os, "O_NONBLOCK", 0)
    flags = os.O_RDONLY | nonblocking | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise ModelLoadError(f"cannot read the file: {err.strerror or err}", path=name) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced since the check
            raise _not_a_file(path, name, mode, what)
        if nonblocking:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


JSON_MAX_BYTES = 256 * 2**20
"""The largest JSON file :func:`read_json_file` reads by default (parsed, JSON takes several times
its size in memory; an ONNX Runtime profile of thousands of runs of an LLM stays well under it)."""


def read_json_file(
    path: str | os.PathLike[str],
    *,
    what: str = "a JSON file",
    max_bytes: int = JSON_MAX_BYTES,
    label: str | None = None,
) -> Any:
    """Read and parse the JSON file ``path``, bounded: checked as :func:`check_model_file` checks a
    model (a FIFO, a device, a folder are refused before anything opens them), refused above
    ``max_bytes``, and read no further than that even if the file grows meanwhile.

    Parameters
    ----------
    path : path
        The file.
    what : str
        What the file should be, in the refusals' words (``"a profile or overlay file"``).
    max_bytes : int
        The largest size read.
    label : str, optional
        How messages name it (default: ``path`` as given).

    Returns
    -------
    Any
        The parsed value (a dict, a list, ...).

    Raises
    ------
    ModelNotFoundError
        The path does not exist or is not a regular file (the message names it and what it is).
    UsageError
        The file is empty, larger than ``max_bytes``, or not JSON: the message starts with the
        file's name and says where the JSON breaks.

    Examples
    --------
    >>> import os, tempfile
    >>> path = write_text_atomic('{"a": [1, 2]}', os.path.join(tempfile.mkdtemp(), "a.json"))
    >>> read_json_file(path)
    {'a': [1, 2]}
    >>> try:
    ...     read_json_file(os.devnull, what="an overlay file")
    ... except ModelNotFoundError as err:
    ...     print(err)
    /dev/null: is a character device, not an overlay file
    """
    from explorer.core.tensors import format_bytes

    name = os.fspath(path) if label is None else label
    too_large = f"{name}: the file is larger than {format_bytes(max_bytes)}, the most read as {what}"
    with open_model_file(path, label=label, what=what) as handle:  # checked as a regular file first
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise UsageError(f"{too_large} (it has {format_bytes(size)})")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UsageError(too_large)
    if not data.strip():
        raise UsageError(f"{name}: the file is empty, not {what}")
    try:
        return json.loads(data)
    except json.JSONDecodeError as err:
        raise UsageError(
            f"{name}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}), not {what}"
        ) from None
    except (UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{name}: not valid JSON ({err}), not {what}") from None
