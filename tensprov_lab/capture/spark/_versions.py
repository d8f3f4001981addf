"""What differs between the pyspark releases capture supports (3.5.x and 4.x), in one place.

Everything else in the package asks here instead of testing ``pyspark.__version__``:
where a class lives (pyspark 4 moved the py4j-backed DataFrame to
``pyspark.sql.classic`` and the RDD to ``pyspark.core``), the JVM's ``Dataset`` class
(``org.apache.spark.sql.classic.Dataset`` in Spark 4), the Scala collections the Java
helpers are compiled against (Scala 2.12 in Spark 3.5, 2.13 in Spark 4), and the few
client facilities only one release has (pyspark 4's own loggers).

Examples
--------
>>> spark_version() >= (3, 5)
True
>>> "class A { scala.collection.immutable.Seq s; }" != java_source(
...     "class A { scala.collection.immutable.Seq s; }") or spark_version() >= (4, 0)
True
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "arrow_schema",
    "cached_rdd",
    "from_arrow",
    "from_pandas",
    "classic_dataframe",
    "ctrl_c_kept",
    "interrupted",
    "sigint_noted",
    "java_source",
    "local_relation_args",
    "jvm_dataset_class",
    "quiet_analysis_errors",
    "product_names",
    "rdd_class",
    "scala_list",
    "scala_wrap_array",
    "spark_version",
    "thread_target",
    "to_arrow",
]

#: the oldest pyspark capture supports
OLDEST = (3, 5)


@functools.cache
def spark_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed pyspark."""
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def spark4() -> bool:
    """Whether the installed pyspark is 4.x or newer."""
    return spark_version() >= (4, 0)


def classic_dataframe() -> type:
    """The DataFrame class of a classic (py4j) session."""
    import importlib

    module = "pyspark.sql.classic.dataframe" if spark4() else "pyspark.sql.dataframe"
    return importlib.import_module(module).DataFrame  # type: ignore[no-any-return]


def rdd_class() -> type | None:
    """pyspark's ``RDD`` class (None in a Connect-only client without it)."""
    import importlib

    try:
        return importlib.import_module("pyspark.core.rdd" if spark4() else "pyspark.rdd").RDD  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - pyspark-client has no RDDs
        return None


def arrow_schema(schema: Any, large: bool = False) -> Any:
    """The Arrow schema pyspark gives a Spark ``StructType``'s records (timestamps in
    UTC; ``large`` string and binary types where pyspark 4 is asked for them)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if spark4():
        return to_arrow_schema(
            schema,
            error_on_duplicated_field_names_in_struct=True,
            timezone="UTC",
            prefers_large_types=large,
        )
    return to_arrow_schema(schema)


def to_arrow(df: Any) -> Any:
    """``df.toArrow()``: all records as one Arrow table (over Connect, without its
    round trip for the schema).  pyspark 3.5 has no ``toArrow``;
    its Arrow collection gives the same table (types as pyspark 4 gives them: the
    schema's Arrow form, timestamps in UTC).  A 3.5 DataFrame here is a classic one:
    ``track()`` refuses a 3.5 Connect session.

    A Ctrl-C while it waits raises ``KeyboardInterrupt``: classic pyspark's Arrow
    collection, interrupted, waits for its job in a ``finally`` and raises the
    cancelled job's Java error instead, which capture's fallbacks (an operation
    Spark cannot read fused is traced by a job of its own) would take for a failed
    read and go on, the Ctrl-C lost."""
    with ctrl_c_kept():
        return _to_arrow(df)


@contextlib.contextmanager
def ctrl_c_kept() -> Iterator[None]:
    """Raise ``KeyboardInterrupt`` for an error the block raises while one was handled
    (see :func:`interrupted`) or after a Ctrl-C came (see :func:`sigint_noted`):
    classic pyspark's Arrow collection (``toArrow``, ``toPandas``) turns a Ctrl-C into
    the cancelled job's Java error, pyspark 3.5's handler into a ``Py4JError``.

    >>> with ctrl_c_kept():
    ...     pass
    """
    with sigint_noted() as seen:
        try:
            yield
        except Exception as exc:
            if interrupted(exc) or seen():
                raise KeyboardInterrupt from None
            raise


@contextlib.contextmanager
def sigint_noted() -> Iterator[Callable[[], bool]]:
    """Note each Ctrl-C (SIGINT) while the block runs in the main thread, handled as
    before (pyspark's handler, else Python's), and give a function that tells whether
    one came.  Classic pyspark 3.5's handler cancels every job before it raises
    ``KeyboardInterrupt``; a Ctrl-C while the main thread waits on the JVM makes that
    cancel a second call on the same socket, which fails: a ``Py4JError`` is raised in
    the Ctrl-C's place, and py4j logs the chain and drops it, so only this note tells
    capture that the user asked it to stop.

    >>> with sigint_noted() as seen:
    ...     seen()
    False
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield lambda: False  # (a thread cannot set a handler; SIG_IGN / SIG_DFL: left)
        return
    seen: list[bool] = []

    def note(signum: int, frame: Any) -> Any:
        seen.append(True)
        return previous(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a ``KeyboardInterrupt`` was handled (or caused
    by one): a Ctrl-C that some library turned into an error of its own.

    >>> try:
    ...     try:
    ...         raise KeyboardInterrupt
    ...     finally:
    ...         raise RuntimeError("job cancelled")
    ... except RuntimeError as exc:
    ...     interrupted(exc)
    True
    >>> interrupted(RuntimeError("job failed"))
    False
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        todo += [e.__cause__, e.__context__]
    return False


def _to_arrow(df: Any) -> Any:
    if spark4():
        table_of = getattr(df, "_to_table", None)
        if table_of is None:
            return df.toArrow()
        # a Connect DataFrame: its result carries its schema, so the round trip
        # toArrow() makes to ask for it first (~50 ms, more to a remote server) is saved
        table, schema = table_of()
        return table.cast(arrow_schema(schema if schema is not None else df.schema))
    import pyarrow as pa

    schema = arrow_schema(df.schema)
    batches = df._collect_as_arrow()
    table = pa.Table.from_batches(batches) if batches else schema.empty_table()
    return table.cast(schema)


def cached_rdd(df: Any) -> Any:
    """The RDD ``df.rdd`` made already (None before): pyspark 4 caches the property in
    the instance's dict under its name, pyspark 3.5 as ``_lazy_rdd``."""
    return df.__dict__.get("rdd" if spark4() else "_lazy_rdd")


def from_pandas(spark: Any, pdf: Any, schema: Any) -> Any:
    """``spark.createDataFrame(pdf, schema=schema)`` of a classic session, through Arrow
    on pyspark 3.5 too: without it 3.5 checks each value against the schema and refuses
    pandas' NaN (and floats) in an integer column."""
    if spark4():
        return spark.createDataFrame(pdf, schema=schema)
    zone = spark.conf.get("spark.sql.session.timeZone")
    return spark._create_from_pandas_with_arrow(pdf, schema, zone)


def from_arrow(spark: Any, table: Any) -> Any:
    """``spark.createDataFrame(table)`` of an Arrow table (pyspark 3.5 takes pandas)."""
    if spark4():
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_pandas(spark, table.to_pandas(), from_arrow_schema(table.schema))


def jvm_dataset_class() -> str:
    """The JVM class of a classic ``Dataset``."""
    return "org.apache.spark.sql.classic.Dataset" if spark4() else "org.apache.spark.sql.Dataset"


#: the Java helpers are written against Spark 4 (Scala 2.13); each pair is a spelling
#: there and the same thing in Spark 3.5 (Scala 2.12), where a type moved or a
#: signature changed (tests/test_jvm.py compiles both helpers on the installed Spark)
_JAVA_35 = (
    ("org.apache.spark.sql.classic.Dataset", "org.apache.spark.sql.Dataset"),
    ("org.apache.spark.sql.classic.SparkSession", "org.apache.spark.sql.SparkSession"),
    ("scala.collection.immutable.Seq", "scala.collection.Seq"),
    (
        "scala.jdk.javaapi.CollectionConverters.asScala(items).toSeq()",
        "scala.collection.JavaConverters.asScalaBuffer(items).toList()",
    ),
    (
        "scala.jdk.javaapi.CollectionConverters.asScala(wanted.iterator())",
        "scala.collection.JavaConverters.asScalaIterator(wanted.iterator())",
    ),
    ("lookupCachedData(session, plan)", "lookupCachedData(plan)"),
    # LocalRelation lost its stream argument; Arrow batches their large-types flag
    (", false, scala.None$.MODULE$);", ", false);"),
    ("Long.MAX_VALUE, zone, false,\n            largeVarTypes);", "Long.MAX_VALUE, zone, false);"),
    (
        "createEmptyArrowBatch(schema, zone, false, largeVarTypes)",
        "createEmptyArrowBatch(schema, zone, false)",
    ),
)


def java_source(text: str) -> str:
    """A Java helper's source (written for Spark 4 / Scala 2.13) made fit for the
    installed Spark (see ``_JAVA_35``)."""
    if spark4():
        return text
    for new, old in _JAVA_35:
        text = text.replace(new, old)
    return text


def scala_list(jvm: Any) -> Callable[[Any], Any]:
    """A function making a Scala ``List`` of a Java (or Python) list in ``jvm``."""
    if spark4():
        conv = jvm.scala.jdk.javaapi.CollectionConverters
        return lambda items: conv.asScala(items).toList()
    old = jvm.scala.collection.JavaConverters
    return lambda items: old.asScalaBuffer(items).toList()


def scala_wrap_array(jvm: Any) -> Any:
    """The JVM function wrapping a Java array as a Scala ``Seq`` without a copy (the
    member itself: looking a static method up on a class is a round trip)."""
    if spark4():
        return jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray
    return jvm.scala.collection.mutable.WrappedArray.make


#: constructor argument names of Catalyst classes, by class name (Scala 2.12)
_NAMES: dict[str, list[str]] = {}


def product_names(node: Any, n: int) -> list[str]:
    """The names of a Catalyst node's ``n`` constructor arguments, in order.  Scala 2.13
    asks the node.  Scala 2.12 has no ``productElementName``: a case class's parameters
    are final instance fields in order, among lazy and body vals; the guess is checked
    once per class against the node's own elements (a wrong guess raises ``KeyError``:
    the caller's capture then becomes an explicit opaque step)."""
    if spark4():
        return [str(node.productElementName(i)) for i in range(n)]
    cls = node.getClass()
    key = str(cls.getName())
    if key in _NAMES:
        return _NAMES[key]
    fields = [
        f
        for f in cls.getDeclaredFields()
        # final, not static, not synthetic (bitmaps): java.lang.reflect.Modifier bits
        if f.getModifiers() & 0x0010 and not f.getModifiers() & 0x0008 and "$" not in f.getName()
    ][:n]
    for i, field in enumerate(fields):
        field.setAccessible(True)
        # (py4j compares objects with equals, primitives by value)
        if len(fields) != n or field.get(node) != node.productElement(i):
            raise KeyError(f"cannot name the arguments of {key} on this Spark")
    _NAMES[key] = [str(f.getName()) for f in fields]
    return _NAMES[key]


def local_relation_args(attrs: Any, empty: Any, none: Any) -> tuple[Any, ...]:
    """``LocalRelation``'s constructor arguments for no rows (Spark 4 added a stream)."""
    return (attrs, empty, False, none) if spark4() else (attrs, empty, False)


def thread_target(spark: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` made to run in another thread with this thread's Spark local properties
    (job group, tags), so that cancelling them cancels its jobs too.  pyspark 4 takes the
    session (classic or Connect); pyspark 3.5 decorates the function (classic only:
    ``track()`` refuses a 3.5 Connect session)."""
    from pyspark.util import inheritable_thread_target

    if spark4():
        return inheritable_thread_target(spark)(fn)
    return inheritable_thread_target(fn)


#: loggers pyspark 4 writes every analysis error to (a JSON record with the Java stack)
_SPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


@contextlib.contextmanager
def quiet_analysis_errors() -> Iterator[None]:
    """Mute pyspark's own log of analysis errors while capture checks something the user
    typed (a ``where=`` predicate): the error becomes one clear message, and the log
    would print a screen of JSON with the Java stack trace (naming capture's hidden
    key columns) next to it.  pyspark 3.5 has no such log: nothing to mute."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:
        yield
        return
    # created through pyspark, never as plain loggers: pyspark calls them with extra
    # keyword arguments only its PySparkLogger class accepts
    loggers: list[logging.Logger] = [PySparkLogger.getLogger(n) for n in _SPARK_ERROR_LOGGERS]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.disabled = was
