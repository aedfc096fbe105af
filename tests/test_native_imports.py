"""Native modules that must load in either order in one process.

onnxruntime (the MiniLM embedder) crashes the process on import once usearch's
compiled module (the approximate index) is loaded: a process that searched a
large store and then embeds with MiniLM would die with SIGSEGV. The library loads
onnxruntime first whenever it loads usearch.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec

from support.components import unavailable

# Found, not imported: loading usearch here would put this worker at the crash's mercy.
for name in ("onnxruntime", "usearch"):
    if find_spec(name) is None:
        unavailable(f"{name} is not installed", module_level=True)

PROGRAM = """
import sys
from mnemosyne.recall.approximate import Graph
Graph(8)  # the approximate index, as a large store's first semantic search makes it
from mnemosyne.recall import minilm  # then the MiniLM embedder: onnxruntime
print("loaded", "onnxruntime" in sys.modules)
"""


def test_the_minilm_embedder_loads_after_the_approximate_index() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "loaded True"
