"""``python -m arclight_worker serve MODEL.py`` (what the runtime runs) or ``describe MODEL.py``
(prints the model's commands as JSON without loading it: what ``definePythonModel`` reads)."""

from __future__ import annotations

import json
import sys

from ._worker import load_model_module, run


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("serve", "describe"):
        print("usage: python -m arclight_worker serve|describe MODEL.py", file=sys.stderr)
        return 2
    if argv[0] == "describe":
        print(json.dumps(load_model_module(argv[1]).describe()))
        return 0
    return run(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
