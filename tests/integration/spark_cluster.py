"""A real Spark standalone cluster on this machine (Master + Workers via spark-class) and jobs
submitted to it with spark-submit, each process in its own process group.

    with StandaloneCluster(tmp_path / "cluster", cores=1, memory="1g", workers=2) as cluster:
        with SubmittedApp(cluster.master_url, ["--py-files", zip_path, "job.py", ...],
                          tmp_path / "app") as app:
            cluster.wait_for_app("rebalance-monitor")
            ...

Stop order is the reverse of start: the application, then the workers, then the master. Each
stop sends SIGTERM to the process group and SIGKILL after a grace period.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
import venv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyspark

from tests.support import wait_until


def spark_home() -> Path:
    """pyspark's pip package is a Spark distribution: bin/spark-class, bin/spark-submit, jars/."""
    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cluster_env(scratch: Path) -> dict[str, str]:
    """Environment for every Spark process: loopback only, no stray conf, scratch under tmp."""
    conf_dir = scratch / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(SPARK_HOME=str(spark_home()), SPARK_CONF_DIR=str(conf_dir),
               SPARK_LOCAL_IP="127.0.0.1", SPARK_LOCAL_DIRS=str(scratch / "local"),
               SPARK_NO_DAEMONIZE="1")
    return env


def deps_only_python(directory: Path, site_packages: Path) -> Path:
    """A venv whose interpreter sees site_packages (pyspark, pandas, pyarrow, confluent-kafka...)
    but NOT this project: a .pth line adds the directory without running its .pth files, so the
    editable install of rebalance-monitor stays out. The job's code can then only come from
    the --py-files zip, as on a real cluster."""
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(directory)
    python = directory / "bin" / "python"
    own_site = subprocess.run(
        [str(python), "-c", "import site; print(site.getsitepackages()[0])"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(own_site) / "dependencies.pth").write_text(f"{site_packages}\n")
    return python


class Process:
    """One child in its own session (so a stop reaches its children too), output to a file."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str],
                 cwd: Path | None = None) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                          env=env, cwd=cwd, start_new_session=True)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- last {lines} lines of {self.log_path} ---\n" + "\n".join(text[-lines:])

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds; return the exit code."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            try:
                return self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)  # also reaps children left behind by a clean exit
        return self.popen.wait(10)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass


def poll(what: str, probe: Callable[[], object], timeout: float,
         processes: Sequence[Process] = ()) -> object:
    """Call probe until it returns a truthy value; fail early if a process died."""
    def answered() -> object:
        result = probe()
        if result:
            return result
        for process in processes:
            if not process.alive():
                raise AssertionError(f"{process.name} exited ({process.popen.returncode}) "
                                     f"while waiting for {what}\n{process.log_tail()}")
        return None

    return wait_until(answered, timeout, what, interval=0.25,
                      details=lambda: "\n".join(p.log_tail() for p in processes))


def fetch_json(url: str) -> Any:
    """The JSON document at url, or None while it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


class StandaloneCluster:
    """A Master and `workers` Workers on 127.0.0.1, each offering `cores` and `memory`."""

    def __init__(self, scratch: Path, cores: int = 1, memory: str = "1g",
                 workers: int = 1) -> None:
        self.scratch = scratch
        self.cores, self.memory, self.workers = cores, memory, workers
        self.env = cluster_env(scratch)
        self.port, self.webui_port = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.json_url = f"http://127.0.0.1:{self.webui_port}/json"
        self.processes: list[Process] = []

    def spark_class(self, name: str, main_class: str, *args: str) -> Process:
        argv = [str(spark_home() / "bin" / "spark-class"), main_class, *args]
        process = Process(name, argv, self.scratch / "logs", self.env)
        self.processes.append(process)
        return process

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def start(self, timeout: float = 90.0) -> None:
        self.spark_class("master", "org.apache.spark.deploy.master.Master",
                         "--host", "127.0.0.1", "--port", str(self.port),
                         "--webui-port", str(self.webui_port))
        poll("the master's web UI", lambda: fetch_json(self.json_url), timeout, self.processes)
        for n in range(self.workers):
            self.spark_class(f"worker-{n}", "org.apache.spark.deploy.worker.Worker",
                             self.master_url, "--host", "127.0.0.1",
                             "--webui-port", str(free_port()),
                             "--cores", str(self.cores), "--memory", self.memory,
                             "--work-dir", str(self.scratch / "work" / f"worker-{n}"))
        poll(f"{self.workers} workers to register",
             lambda: len(self.alive_workers()) == self.workers, timeout, self.processes)

    def status(self) -> dict:
        return fetch_json(self.json_url) or {}

    def alive_workers(self) -> list[dict]:
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def running_app(self, name: str) -> dict | None:
        for app in self.status().get("activeapps", []):
            if app.get("name") == name and app.get("state") == "RUNNING":
                return app
        return None

    def executor_logs(self) -> str:
        """stderr of every executor the workers started (for failure messages)."""
        paths = sorted((self.scratch / "work").glob("*/*/*/stderr"))
        return "\n".join(f"--- {p} ---\n" + "\n".join(p.read_text(errors="replace")
                                                     .splitlines()[-40:]) for p in paths)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def __exit__(self, *exc) -> None:
        self.stop()


class SubmittedApp:
    """spark-submit in client mode: the driver (and the job's /metrics) runs in this child."""

    def __init__(self, master_url: str, submit_args: Sequence[str], scratch: Path,
                 env: dict[str, str]) -> None:
        argv = [str(spark_home() / "bin" / "spark-submit"), "--master", master_url,
                "--deploy-mode", "client", *submit_args]
        self.argv = argv
        scratch.mkdir(parents=True, exist_ok=True)
        self.process = Process("spark-submit", argv, scratch, env, cwd=scratch)

    def __enter__(self) -> SubmittedApp:
        return self

    def python_driver_pid(self) -> int | None:
        """The Python driver: the child of the spark-submit JVM that runs the main .py file."""
        for pid in child_pids(self.process.popen.pid):
            if any(arg.endswith(".py") for arg in cmdline(pid)):
                return pid
        return None

    def __exit__(self, *exc) -> None:
        self.process.stop()


def child_pids(parent: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process went away while we looked
            continue
        if int(fields[1]) == parent:
            children.append(int(stat.parent.name))
    return children


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
