"""Count the import cycles among the modules of ``profiler`` and ``kernels`` (every import, including the
ones inside functions), print each, and exit 1 when there is one.

    python scripts/import_cycles.py            # the cycles, one per line, and their count

A cycle is a strongly connected component of the module graph with more than one module (grimp builds
the graph; import-linter's contracts in .importlinter keep the layers, this counts what they would miss).
"""

from __future__ import annotations

import sys

import grimp


def components(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    nodes = sorted(graph.modules)
    succ = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            nxt = succ.get(v, [])
            if i < len(nxt):
                work.append((v, i + 1))
                w = nxt[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(out)


def main() -> int:
    graph = grimp.build_graph("profiler", "kernels", include_external_packages=False)
    found = components(graph)
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
    print(f"{len(found)} import cycle(s) among {len(graph.modules)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
