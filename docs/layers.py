"""Draw shardcat's layers from its own imports: `python docs/layers.py` prints a Mermaid flowchart
(GitHub renders it as a picture) of the package's folders, top layer first, each arrow one folder
importing another, labelled with how many imports (arrows into the bottom layer, which every layer
reads, only with `--all`). `--modules FOLDER` draws one folder's modules.

It reads imports the way tests/unit/test_layers.py does (the layer order is that test's LAYERS),
so the drawing and the check always agree. docs/design.md embeds its output; run it again after
a move and paste what it prints there.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # this checkout's shardcat, not an installed one


def _layers_test():
    spec = importlib.util.spec_from_file_location("test_layers", HERE.parent / "tests" / "unit" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _node(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


def folders(t, everything: bool = False) -> str:
    inner, _ = t._graph()
    edges = Counter((t._layer(m), t._layer(i)) for m, imports in inner.items() for i in imports
                    if m != "shardcat" and t._layer(m) != t._layer(i)
                    and (everything or t._layer(i) not in t.LAYERS[-1]))
    lines = ["flowchart TD"]
    for rank, names in enumerate(t.LAYERS):
        lines.append(f"  subgraph L{rank}[\" \"]")
        lines.append("    direction LR")
        lines += [f"    {_node(n)}[{n}]" for n in sorted(names)]
        lines.append("  end")
    lines += [f"  {_node(a)} -->|{n}| {_node(b)}" for (a, b), n in sorted(edges.items())]
    return "\n".join(lines)


def modules(t, folder: str) -> str:
    inner, _ = t._graph()
    prefix = f"shardcat.{folder}."
    lines = ["flowchart TD"]
    for m in sorted(inner):
        if m.startswith(prefix):
            lines.append(f"  {_node(m)}[{m[len(prefix):]}]")
            lines += [f"  {_node(m)} --> {_node(i)}" for i in sorted(inner[m]) if i.startswith(prefix)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", metavar="FOLDER", help="one folder's modules instead of the folders")
    parser.add_argument("--all", action="store_true", help="also the arrows into the bottom layer (every layer reads it)")
    args = parser.parse_args()
    t = _layers_test()
    print(modules(t, args.modules) if args.modules else folders(t, args.all))


if __name__ == "__main__":
    main()
