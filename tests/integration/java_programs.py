"""Programs the tests build themselves (javac, go build): once per source and toolchain input,
into a folder under the jar cache named by their hash, whichever process gets there first.

    classes = compile_java([source], classpath, "ConsumerProbe", "kafka-4.3.1")
    subprocess.run(["java", "-cp", f"{classes}:{classpath}", "ConsumerProbe"])
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from streaming import jars


class JavaUnavailable(RuntimeError):
    """The program cannot be built: no javac, or javac refused the source."""


def build_once(name: str, inputs: bytes, build: Callable[[Path], None]) -> Path:
    """The folder `build(folder)` filled, under the jar cache and named by a hash of `inputs`:
    built once, whichever process gets there first (the folder appears complete or not at all)."""
    target = jars.cache_root() / "probes" / f"{name}-{hashlib.sha256(inputs).hexdigest()[:16]}"
    if (target / "COMPLETE").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(scratch)
        (scratch / "COMPLETE").write_text("")
        try:
            scratch.rename(target)  # atomic: a folder there is complete
        except OSError:
            if not (target / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def compile_java(sources: Sequence[Path], classpath: Sequence[Path], name: str, against: str,
                 extra_files: Mapping[str, str] | None = None) -> Path:
    """The folder of the compiled classes (plus extra_files, name -> text, written beside them).
    `against` names what the classpath is (a version), so a new one compiles anew."""
    extra_files = dict(extra_files or {})
    inputs = (b"".join(source.read_bytes() for source in sources) + against.encode()
              + repr(sorted(extra_files.items())).encode())
    return build_once(name, inputs, lambda folder: _javac(sources, classpath, folder, extra_files))


def _javac(sources: Sequence[Path], classpath: Sequence[Path], folder: Path,
           extra_files: Mapping[str, str]) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise JavaUnavailable("no javac on PATH")
    done = subprocess.run(
        [javac, "-encoding", "UTF-8", "-cp", os.pathsep.join(map(str, classpath)),
         "-d", str(folder), *map(str, sources)], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        names = ", ".join(source.name for source in sources)
        raise JavaUnavailable(f"javac failed on {names}:\n{done.stdout}{done.stderr}")
    for file_name, text in extra_files.items():
        (folder / file_name).write_text(text)
