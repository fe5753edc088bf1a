"""Isolation: where native code runs and how results reach disk.

The crash-proof worker process (:mod:`explorer.isolation.worker`), CPU cores and
TVM's thread pool, process-tree memory, and atomic writes with the output-path
checks (:mod:`explorer.isolation.io`). It imports only the core.

Examples
--------
>>> import os
>>> from explorer.isolation import worker
>>> worker.run(os.getpid) != os.getpid()  # ran in the worker process
True
"""

__all__: list[str] = []
