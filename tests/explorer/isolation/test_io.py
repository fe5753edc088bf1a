"""Model paths on the way in: only a regular file is opened, and nothing blocks on a FIFO; on the way out,
files get the mode the umask gives, and the cache folder is refused by name when it cannot be written."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from explorer.core.errors import ModelLoadError, ModelNotFoundError, UsageError
from explorer.isolation import io
from explorer.isolation.io import (
    cache_folder,
    check_model_file,
    file_kind,
    move_atomic,
    open_model_file,
    write_bytes_atomic,
)


def _fifo(folder: Path) -> Path:
    path = folder / "model.onnx"
    os.mkfifo(path)
    return path


def test_file_kind_names_each_kind(tmp_path: Path) -> None:
    sock = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
    (tmp_path / "file").write_bytes(b"x")
    kinds = {
        tmp_path: "a folder",
        _fifo(tmp_path): "a FIFO (named pipe)",
        Path("/dev/zero"): "a character device",
        sock: "a socket",
        tmp_path / "file": "a regular file",
    }
    assert {path: file_kind(os.stat(path).st_mode) for path in kinds} == kinds


def test_a_regular_file_and_a_link_to_one_are_taken(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"abc")
    (tmp_path / "link.onnx").symlink_to(path)
    assert check_model_file(tmp_path / "link.onnx").st_size == 3
    with open_model_file(tmp_path / "link.onnx") as handle:
        assert handle.read() == b"abc"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda folder: folder / "missing.onnx", "no such file"),
        (
            lambda folder: folder / "m.onnx" / "inner.onnx",
            "no such file (a part of the path is not a folder)",
        ),
        (lambda folder: folder, "is a folder, not an ONNX model file"),
        (_fifo, "is a FIFO (named pipe), not an ONNX model file"),
    ],
    ids=["missing", "under a file", "folder", "fifo"],
)
def test_anything_else_is_refused_naming_the_path(make, says: str, tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"abc")
    path = make(tmp_path)
    with pytest.raises(ModelNotFoundError) as info:
        check_model_file(path)
    assert str(info.value) == f"{path}: {says}" and info.value.path == str(path)


def test_a_label_names_the_path_in_messages(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        check_model_file(_fifo(tmp_path), label="the model")
    assert str(info.value) == "the model: is a FIFO (named pipe), not an ONNX model file"


def test_a_fifo_swapped_in_after_the_check_is_refused_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check passed (a regular file then); the open finds a FIFO without a writer: refused at once."""
    path = _fifo(tmp_path)
    monkeypatch.setattr(io, "check_model_file", lambda *args, **kwargs: None)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            open_model_file(path).close()
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # unblock the reader, then fail
        pytest.fail("open_model_file waited on a FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], ModelNotFoundError), outcome
    assert "is a FIFO (named pipe), not an ONNX model file" in str(outcome[0])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads through any mode bits")
def test_an_unreadable_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"abc")
    path.chmod(0)
    with pytest.raises(ModelLoadError, match="cannot read the file: Permission denied"):
        open_model_file(path)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)], ids=["022", "077"])
def test_written_and_moved_files_get_the_mode_the_umask_gives(umask: int, mode: int, tmp_path: Path) -> None:
    staged = tmp_path / "staged.bin"
    staged.write_bytes(b"moved")
    staged.chmod(0o600 if mode == 0o644 else 0o644)  # as a worker started under another umask made it
    before = os.umask(umask)
    try:
        written = write_bytes_atomic(b"new", tmp_path / "written.bin")
        replaced = write_bytes_atomic(b"old", tmp_path / "replaced.bin")
        replaced.chmod(0o666)
        write_bytes_atomic(b"new", replaced)
        moved = move_atomic(staged, tmp_path / "moved.bin")
    finally:
        os.umask(before)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in (written, replaced, moved)} == {
        name: oct(mode) for name in ("written.bin", "replaced.bin", "moved.bin")
    }


def test_the_cache_folder_is_made_and_a_file_in_its_place_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONNX_EXPLORER_CACHE", str(tmp_path / "cache"))
    assert cache_folder("tvm-tuning") == tmp_path / "cache" / "tvm-tuning"
    assert os.listdir(tmp_path / "cache" / "tvm-tuning") == []  # the write check leaves nothing
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("ONNX_EXPLORER_CACHE", str(tmp_path / "file"))
    with pytest.raises(UsageError, match=f"^ONNX_EXPLORER_CACHE={tmp_path / 'file'}: is a regular file, not"):
        cache_folder("tvm-tuning")
    monkeypatch.delenv("ONNX_EXPLORER_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "file"))
    with pytest.raises(UsageError, match="set ONNX_EXPLORER_CACHE to a folder you can write in"):
        cache_folder()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "the file is empty, not a JSON file"),
        (b"  \n", "the file is empty, not a JSON file"),
        (b'{"a": [1, 2', "not valid JSON (Expecting ',' delimiter at line 1, column 12), not a JSON file"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
    ],
)
def test_read_json_file_refuses_what_is_not_json_naming_the_file(
    content: bytes, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UsageError) as info:
        io.read_json_file(path)
    assert str(info.value).startswith(f"{path}: ") and says in str(info.value)


def test_read_json_file_is_bounded_and_takes_only_regular_files(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"a": "x" * 100}))
    assert io.read_json_file(path)["a"] == "x" * 100
    with pytest.raises(UsageError, match="the file is larger than 64 B, the most read as an overlay file"):
        io.read_json_file(path, max_bytes=64, what="an overlay file")
    with pytest.raises(ModelNotFoundError, match="is a FIFO \\(named pipe\\), not an overlay file"):
        io.read_json_file(_fifo(tmp_path), what="an overlay file")
    with pytest.raises(ModelNotFoundError, match="no such file"):
        io.read_json_file(tmp_path / "missing.json")
