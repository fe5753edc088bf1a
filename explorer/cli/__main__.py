"""``python -m explorer.cli``: the same program as ``onnx-explorer``."""

from __future__ import annotations

import sys

from explorer.cli.app import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
