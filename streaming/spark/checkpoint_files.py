"""Small text files the job keeps beside Spark's own in the checkpoint (the job's counters).

The checkpoint may be a local path or any Hadoop URI (hdfs://, s3a://, file://), so on a
cluster the files go through Hadoop's FileSystem on the driver's JVM, exactly where Spark keeps
offsets and state. Locally (and in unit tests) LocalTextFile does the same with plain files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

# Written and removed at start, to know the checkpoint can be written before the query starts.
WRITE_CHECK = ".rebalance-monitor-write-check"


class TextFile(Protocol):
    def read(self) -> str | None: ...
    def write(self, text: str) -> None: ...


def checkpoint_child(checkpoint: str, *parts: str) -> str:
    return "/".join([checkpoint.rstrip("/"), *parts])


class LocalTextFile:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> str | None:
        return self.path.read_text() if self.path.exists() else None

    def write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.path)  # atomic: a crash leaves the old or the new file, never half


class HadoopTextFile:
    """A text file at a Hadoop URI, written to a temporary name and renamed into place.

    Hadoop's rename over an existing file deletes the target first, then moves the new one
    (AbstractFileSystem.renameInternal: "non-atomic" on the local file system): a process
    killed between the two left no file, and the job's counters started again from zero. So
    the file in place is first moved aside to `.old` (kept until the next write), and a read
    finds the file, or else its `.old`: always a complete version, the last or the one before.
    """

    def __init__(self, spark, uri: str) -> None:
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._gateway = spark.sparkContext._gateway
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._path = jvm.org.apache.hadoop.fs.Path(uri)
        self._tmp = jvm.org.apache.hadoop.fs.Path(uri + ".tmp")
        self._old = jvm.org.apache.hadoop.fs.Path(uri + ".old")
        self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._path.toUri(), conf)

    def read(self) -> str | None:
        exists = self._context.util().exists
        found = next((path for path in (self._path, self._old) if exists(path)), None)
        if found is None:
            return None
        stream = self._context.open(found)
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def write(self, text: str) -> None:
        flags = self._jvm.java.util.EnumSet.of(self._jvm.org.apache.hadoop.fs.CreateFlag.CREATE,
                                               self._jvm.org.apache.hadoop.fs.CreateFlag.OVERWRITE)
        create_opts = self._gateway.new_array(self._jvm.org.apache.hadoop.fs.Options.CreateOpts, 1)
        create_opts[0] = self._jvm.org.apache.hadoop.fs.Options.CreateOpts.createParent()
        stream = self._context.create(self._tmp, flags, create_opts)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        if self._context.util().exists(self._path):
            self._context.delete(self._old, False)
            self._context.rename(self._path, self._old, self._no_options())
        self._context.rename(self._tmp, self._path, self._no_options())

    def _no_options(self):
        return self._gateway.new_array(getattr(self._jvm.org.apache.hadoop.fs, "Options$Rename"), 0)


def hadoop_path_exists(spark, uri: str) -> bool:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return bool(path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(path))


def local_checkpoint_problem(checkpoint: str) -> str | None:
    """Why a local checkpoint (a path, or a file: URI) cannot be created and written, checked
    in Python before Spark starts; None when it can, or when it is not local."""
    parsed = urlparse(checkpoint)
    if parsed.scheme not in ("", "file"):
        return None
    path = Path(parsed.path if parsed.scheme else checkpoint)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / WRITE_CHECK
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        return error.strerror or str(error)
    return None


def hadoop_checkpoint_problem(spark, checkpoint: str) -> str | None:
    """Why the checkpoint cannot be created and written through Hadoop's FileSystem, as the
    job will write it (hdfs://, s3a://, ... and local alike); None when it can."""
    from py4j.protocol import Py4JJavaError

    uri = checkpoint_child(checkpoint, WRITE_CHECK)
    try:
        HadoopTextFile(spark, uri).write("ok")
        jvm = spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(uri)
        path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(path, False)
    except Py4JJavaError as error:
        return str(error.java_exception.toString()).splitlines()[0]
    return None
