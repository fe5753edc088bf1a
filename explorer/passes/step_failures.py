"""Why a pass step failed, in words: a library's crash named by where it happened, its traceback kept.

A step hands the model to a library (ONNX Runtime's transformer optimizer, onnxscript, onnxsim, ...),
usually in the worker. When the library raises, its exception alone (``IndexError: list index out of
range``) says neither where nor why. :func:`crash_site` reads, from the traceback, the innermost frame
inside an installed package: the library, its module, the function and the line it was in.
:func:`step_traceback` is the step's whole traceback (the worker's, which its exception carries as a
note), for ``passes --debug``. A step that knows its library words the crash itself and raises
:class:`StepCrashed`, whose message is recorded as it is.

Examples
--------
>>> text = '''Traceback (most recent call last):
...   File "/work/explorer/passes/ort_transformers_steps.py", line 285, in ort_transformers_step
...   File "/venv/site-packages/onnxruntime/transformers/optimizer.py", line 407, in optimize_model
...   File "/venv/site-packages/onnxruntime/transformers/onnx_model_gpt2.py", line 82, in postprocess
... IndexError: list index out of range'''
>>> site = crash_site(text)
>>> site.module, site.function, site.line
('onnxruntime.transformers.onnx_model_gpt2', 'postprocess', 82)
>>> site.words()
'onnxruntime.transformers.onnx_model_gpt2.postprocess (onnx_model_gpt2.py:82)'
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

from explorer.core.errors import ExplorerError

__all__ = ["CrashSite", "StepCrashed", "crash_site", "step_traceback", "WORKER_NOTE"]

WORKER_NOTE = "Raised in worker process"
"""How the note the worker adds to an exception it sends back begins; the traceback follows its first line."""

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.M)
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_OURS = ("explorer", "widgets")


class StepCrashed(ExplorerError):
    """A library crashed inside a pass step; the message names the library, where it crashed, the
    exception, and what to try instead (recorded on the step as it is)."""


@dataclass(frozen=True)
class CrashSite:
    """The innermost frame of a traceback inside an installed package.

    Attributes
    ----------
    module : str
        The module, dotted (``onnxruntime.transformers.onnx_model_gpt2``).
    file : str
        Its file's name (``onnx_model_gpt2.py``).
    line : int
        The line.
    function : str
        The function (``postprocess``).
    """

    module: str
    file: str
    line: int
    function: str

    @property
    def library(self) -> str:
        """The top-level package (``onnxruntime``).

        Examples
        --------
        >>> CrashSite("onnxscript.optimizer._constant_folding", "_constant_folding.py", 9, "fold").library
        'onnxscript'
        """
        return self.module.split(".")[0]

    def words(self) -> str:
        """``module.function (file:line)``.

        Examples
        --------
        >>> CrashSite("onnxsim.onnx_simplifier", "onnx_simplifier.py", 3, "simplify").words()
        'onnxsim.onnx_simplifier.simplify (onnx_simplifier.py:3)'
        """
        return f"{self.module}.{self.function} ({self.file}:{self.line})"


def crash_site(traceback_text: str, within: str = "") -> CrashSite | None:
    """The innermost frame of ``traceback_text`` in an installed package (not the explorer's own
    modules), or, with ``within`` (``"onnxruntime.transformers"``), in that package; None when no frame is.

    A chained traceback (``raise ... from err``) lists the cause's frames first: the innermost
    library frame of the whole text is where the library raised.

    Examples
    --------
    >>> text = 'File "/v/lib/python3.11/site-packages/onnx/checker.py", line 179, in check_model'
    >>> crash_site(text).words(), crash_site(text, within="onnxruntime") is None
    ('onnx.checker.check_model (checker.py:179)', True)
    >>> crash_site('File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode') is None
    True
    """
    found = None
    for path, line, function in _FRAME.findall(traceback_text):
        parts = _INSTALLED.split(path)
        if len(parts) < 2:
            continue
        relative = parts[-1].replace("\\", "/")
        module = relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        if module.split(".")[0] in _OURS or (within and not (module + ".").startswith(within + ".")):
            continue
        found = CrashSite(module, relative.rsplit("/", 1)[-1], int(line), function)
    return found


def step_traceback(err: BaseException) -> str:
    """The traceback of a step's exception: the worker's (its note, when it was raised there), else this
    process's, causes included.

    Examples
    --------
    >>> try:
    ...     [][0]
    ... except IndexError as err:
    ...     text = step_traceback(err)
    >>> text.splitlines()[0], text.splitlines()[-1]
    ('Traceback (most recent call last):', 'IndexError: list index out of range')
    """
    for note in getattr(err, "__notes__", None) or ():
        if isinstance(note, str) and note.startswith(WORKER_NOTE) and "\n" in note:
            return note.split("\n", 1)[1].rstrip()
    return "".join(traceback.format_exception(type(err), err, err.__traceback__)).rstrip()
