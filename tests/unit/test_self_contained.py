"""The repository is self-contained: no tracked file refers to a checkout's neighbours.

Only `.ci/run` may name the `shared` folder beside the clone (CI keeps the RocketMQ kit there
and exports ROCKETMQ_KIT from it); everything else the project needs is inside the repository.
The needles are built from parts, so this file does not match itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {".ci/run"}
SHARED = b"shared"
FORBIDDEN = (b"../" + SHARED, b"/work/" + SHARED)


def _tracked_files(root: Path) -> list[str]:
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z"],
                              capture_output=True, timeout=60, check=False)
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"cannot list tracked files, git is not usable here: {error}")
    if done.returncode != 0:
        pytest.skip("not a git checkout: "
                    + done.stderr.decode("utf-8", "replace").strip())
    return [name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def outside_references(root: Path) -> list[str]:
    """`path:line: text` for every line of a tracked file (but .ci/run) naming a FORBIDDEN path."""
    found = []
    for name in _tracked_files(root):
        path = root / name
        if name in ALLOWED or not path.is_file():  # a deleted file not yet staged is no reference
            continue
        data = path.read_bytes()
        if not any(needle in data for needle in FORBIDDEN):
            continue
        for number, line in enumerate(data.split(b"\n"), start=1):
            if any(needle in line for needle in FORBIDDEN):
                text = line.decode("utf-8", "replace").strip()[:160]
                found.append(f"{name}:{number}: {text}")
    return found


def test_no_tracked_file_refers_outside_the_repository():
    found = outside_references(ROOT)
    assert not found, (
        "tracked files refer to paths outside the repository (keep what they need inside it):\n"
        + "\n".join(found))


def test_the_check_finds_a_reference(tmp_path):
    """The scan itself: a tracked file naming either forbidden path is reported by its line."""
    env_git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    try:
        init = subprocess.run([*env_git, "init", "-q"], capture_output=True, timeout=60,
                              check=False)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if init.returncode != 0:
        pytest.skip("git init failed: " + init.stderr.decode("utf-8", "replace").strip())
    (tmp_path / ".ci").mkdir()
    up, absolute = FORBIDDEN
    (tmp_path / ".ci" / "run").write_bytes(b"ls " + up + b"/rocketmq\n")
    (tmp_path / "a.md").write_bytes(b"fine\nsee " + up + b"/design.md\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\xff" + absolute + b"/x\x00")
    (tmp_path / "c.txt").write_bytes(SHARED + b"/ alone is fine\n")
    (tmp_path / "untracked.md").write_bytes(up + b"\n")
    subprocess.run([*env_git, "add", ".ci/run", "a.md", "b.bin", "c.txt"], check=True,
                   capture_output=True, timeout=60)
    found = outside_references(tmp_path)
    assert [entry.split(": ", 1)[0] for entry in found] == ["a.md:2", "b.bin:1"]
