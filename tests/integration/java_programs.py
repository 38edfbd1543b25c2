"""Java programs the tests compile themselves: javac once per source and classpath version, into
a folder under the jar cache named by their hash, whichever process gets there first.

    classes = compile_java([source], classpath, "ConsumerProbe", "kafka-4.3.1")
    subprocess.run(["java", "-cp", f"{classes}:{classpath}", "ConsumerProbe"])
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from streaming import jars


class JavaUnavailable(RuntimeError):
    """The program cannot be built: no javac, or javac refused the source."""


def compile_java(sources: Sequence[Path], classpath: Sequence[Path], name: str, against: str,
                 extra_files: Mapping[str, str] | None = None) -> Path:
    """The folder of the compiled classes (plus extra_files, name -> text, written beside them).
    `against` names what the classpath is (a version), so a new one compiles anew."""
    extra_files = dict(extra_files or {})
    digest = hashlib.sha256(b"".join(source.read_bytes() for source in sources)
                            + against.encode() + repr(sorted(extra_files.items())).encode())
    target = jars.cache_root() / "probes" / f"{name}-{digest.hexdigest()[:16]}"
    if not (target / "COMPLETE").is_file():
        _javac(sources, classpath, target, extra_files)
    return target


def _javac(sources: Sequence[Path], classpath: Sequence[Path], target: Path,
           extra_files: Mapping[str, str]) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise JavaUnavailable("no javac on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        done = subprocess.run(
            [javac, "-encoding", "UTF-8", "-cp", os.pathsep.join(map(str, classpath)),
             "-d", str(scratch), *map(str, sources)], capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            names = ", ".join(source.name for source in sources)
            raise JavaUnavailable(f"javac failed on {names}:\n{done.stdout}{done.stderr}")
        for file_name, text in extra_files.items():
            (scratch / file_name).write_text(text)
        (scratch / "COMPLETE").write_text("")
        try:
            scratch.rename(target)  # atomic: a folder there is complete
        except OSError:
            if not (target / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
