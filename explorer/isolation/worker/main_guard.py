"""Spawn runs the parent's main script again in the child: a script that starts a worker without the
``if __name__ == "__main__":`` guard would start workers forever. Found and refused, naming the
line to guard (:class:`~explorer.core.errors.UnguardedMainError`).

Examples
--------
>>> _GUARD
'if __name__ == "__main__":'
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from pathlib import Path
from typing import Any

from explorer.core.errors import (
    UnguardedMainError,
)
from explorer.isolation.worker.settings import _MAIN_REIMPORTED_EXIT, _PROCESS_NAME

__all__: list[str] = []

_GUARD = 'if __name__ == "__main__":'


def _starting_up_as_worker() -> bool:
    """Whether this process is a worker still starting up: spawn is importing the parent's main
    script in it (as ``__mp_main__``, before the worker's own code runs), so a worker started now
    comes from the script's top level."""
    me = multiprocessing.current_process()
    return bool(getattr(me, "_inheriting", False)) and me.name == _PROCESS_NAME


def _reimported_main() -> tuple[Any, str] | None:
    """The main module and its file when spawn imports that file again in a child (a script run as
    ``python script.py`` or ``python -m pkg.mod``, as :func:`multiprocessing.spawn.get_preparation_data`
    decides); None when it does not (a notebook, ``python -c``, ``python -m pkg``)."""
    from multiprocessing import process

    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if main is None or not path or (name is not None and (name == "__main__" or name.endswith(".__main__"))):
        return None
    if not os.path.isabs(path) and process.ORIGINAL_DIR is not None:
        path = os.path.join(process.ORIGINAL_DIR, path)
    if os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return main, os.path.normpath(path)


def _unguarded_main_line() -> tuple[str, int] | None:
    """The main script and the line of its top level that runs now, when that line is not under
    an ``if __name__ == "__main__":`` guard and spawn would import the script again in a worker
    (which would run the script's top level a second time); None otherwise, or when it cannot tell.

    Read from the main thread's frames, so a worker started from another thread (``explorer.load``
    infers shapes from one) is judged by what the script's top level is doing.
    """
    found = _reimported_main()
    if found is None:
        return None
    main, path = found
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>" and frame.f_globals is vars(main):
            break
        frame = frame.f_back
    if frame is None or os.path.normpath(os.path.abspath(frame.f_code.co_filename)) != path:
        return None
    line = frame.f_lineno
    return None if _under_main_guard(path, line) else (path, line)


def _under_main_guard(path: str, line: int) -> bool:
    """Whether ``line`` of the script at ``path`` is in the branch of an ``if __name__ == "__main__":``
    (or the ``else`` of a ``!=`` one); True when the script cannot be read or parsed (cannot tell)."""
    import ast

    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        sides = (test.left, *test.comparators)
        names = [isinstance(n, ast.Name) and n.id == "__name__" for n in sides]
        mains = [isinstance(n, ast.Constant) and n.value == "__main__" for n in sides]
        if len(sides) != 2 or sorted(names) != [False, True] or sorted(mains) != [False, True]:
            continue
        branch = {ast.Eq: node.body, ast.NotEq: node.orelse}.get(type(test.ops[0]), [])
        if branch and branch[0].lineno <= line <= (branch[-1].end_lineno or branch[-1].lineno):
            return True
    return False


def _refuse_unguarded_main() -> None:
    """Before a worker starts. In a worker still starting up whose import of the parent's script
    started a worker: exit at once (the parent raises :class:`~explorer.core.errors.UnguardedMainError`),
    running no more of the script. In the parent: raise it when the script's top level runs unguarded."""
    if _starting_up_as_worker():
        os._exit(_MAIN_REIMPORTED_EXIT)
    where = _unguarded_main_line()
    if where is not None:
        path, line = where
        raise UnguardedMainError(
            f"{path}, line {line}, starts the explorer's worker process at import time: the worker is a "
            f"spawned process, which imports the script again and would run its top level a second "
            f"time. Put the script's calls under `{_GUARD}` (docs/isolation.md, Start-up)",
            path=path,
            line=line,
        )


def _reimported_main_error() -> UnguardedMainError:
    """What the parent raises when the worker exited with :data:`_MAIN_REIMPORTED_EXIT`."""
    found = _reimported_main()
    path = found[1] if found is not None else None
    return UnguardedMainError(
        f"the explorer's worker process imported {path or 'the main script'} again (spawn does, as "
        f"__mp_main__) and its top level started a worker once more: the script calls the explorer at "
        f"import time. Put the script's calls under `{_GUARD}` (docs/isolation.md, Start-up)",
        path=path,
    )
