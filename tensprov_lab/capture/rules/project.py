"""``select``, ``withColumn``, ``drop``, renames, casts, UDFs: projections.

Record rule: every output record is its input record (identity); the keys are added to
the projection's list.  Attribute rule: each new column's values come from the columns
its expression references (read from the analyzed plan's expression ids; wide
projections are read narrowly by :class:`.._attributes._Walker`).  Over Spark Connect:
the ``project``, ``with_columns``, ``with_columns_renamed``, ``drop``, ``to_df``,
``to_schema``, ``fill_na`` and ``replace`` relations pass the keys on (a select lists
them, a schema gains them, an explode
in it gains a position key: :mod:`.generate`), and the attribute maps are read from the
client's expressions (a window function's: :meth:`Mapping.make <._connect.Mapping>`).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Project").keeps_records
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _connect as cx
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin, exprs, ids
from tensprov_lab.capture.rules._base import Keying, Mapping, Rule, attrs, single
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking
from tensprov_lab.capture.rules.generate import position, their_position

__all__ = ["Project", "keyed_na"]


class Project(Rule):
    nodes = ("Project",)
    drops_vanish = True
    methods = (
        "select", "selectExpr", "withColumn", "withColumns", "withColumnRenamed",
        "withColumnsRenamed", "drop", "toDF", "fillna", "replace", "withMetadata", "to",
    )  # fmt: skip
    keeps_records = True
    relations = (
        "project", "with_columns", "with_columns_renamed", "drop", "to_df", "to_schema", "fill_na",
        "replace",
    )  # fmt: skip

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        child, blocks = single(results)
        return rw.jvm.reproject(node, attrs(blocks), child), blocks

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        return ids(d["projectList"])

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        return w.named(n.env, n.d["parsed"] if "parsed" in n.d else exprs(n.d["projectList"]))

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        kind = P.kind(rel)
        if kind == "project":
            return _keyed_select(a, rel)
        if kind == "to_df":
            new, (kid,) = a.kids(rel)
            names = iter(list(new.to_df.column_names))
            full = [c if c.startswith(P.KEY_PREFIX) else next(names) for c in a.columns(kid.rel)]
            del new.to_df.column_names[:]
            new.to_df.column_names.extend(full)
            return kid.passed(new)
        if kind in ("fill_na", "replace"):
            return keyed_na(a, rel)
        if kind == "to_schema":  # (``df.to(schema)`` keeps the schema's columns only)
            from pyspark.sql.connect import proto

            new, (kid,) = a.kids(rel)
            for k in kid.keys:
                new.to_schema.schema.struct.fields.append(
                    proto.DataType.StructField(
                        name=k, data_type=proto.DataType(long=proto.DataType.Long()), nullable=True
                    )
                )
            return kid.passed(new, False)
        return super().keyed(a, rel)

    def maps(self, m: Mapping, rel: Any) -> None:
        kind, inner, n_out = P.kind(rel), P.body(rel), len(m.out_cols)
        if len(m.in_cols) != 1:
            m.everything()
        elif kind == "project":
            o = 0
            for e in inner.expressions:
                if e.WhichOneof("expr_type") == "unresolved_star":
                    width = len(m.in_cols[0])
                    if e.unresolved_star.HasField("unparsed_target") or o + width > n_out:
                        m.everything()
                        break
                    m.positional(0, range(o, o + width))
                    o += width
                elif o < n_out:
                    m.make(o, e)
                    o += 1
            if o != n_out:
                m.everything()
        elif kind == "with_columns":
            made = {a.name[0].lower(): a for a in inner.aliases if len(a.name) == 1}
            for o, c in enumerate(m.out_cols):
                if c.lower() in made:
                    m.make(o, made[c.lower()].expr)
                else:
                    m.identity(outs=[o])
        elif kind == "with_columns_renamed":
            renamed = {v.lower(): k for k, v in inner.rename_columns_map.items()}
            renamed.update({r.new_col_name.lower(): r.col_name for r in inner.renames})
            for o, c in enumerate(m.out_cols):
                was = renamed.get(c.lower(), c)
                for j, ic in enumerate(m.in_cols[0]):
                    if ic.lower() == was.lower():
                        m.contributing[0][o, j] = True
                        break
        elif kind == "to_df":
            if len(m.in_cols[0]) == n_out:
                m.positional(0, range(n_out))
            else:
                m.everything()
        else:  # drop, fill_na, replace, to_schema (by name)
            m.identity()


def _keyed_select(a: Keying, rel: Any) -> Keyed:
    """A select: the keys listed after the user's columns (a ``*`` brings them), an
    explode in it with a position key of its own (:func:`.generate.position`)."""
    new, (kid,) = a.kids(rel)
    exprs = new.project.expressions
    stars = [e for e in exprs if e.WhichOneof("expr_type") == "unresolved_star"]
    if any(s.unresolved_star.HasField("unparsed_target") for s in stars):
        raise cx.Unsupported("a select of `table.*`")
    if cx.global_aggregate(rel):
        # one record made of all: nothing tells records apart, none is needed
        return Keyed(new, [], {}, True)
    pos = position(a, rel, kid, exprs)
    theirs = None if pos else their_position(a, rel, kid, exprs)
    if not stars:
        exprs.extend(P.col(k) for k in kid.keys)
    if theirs is not None:
        # the user's own posexplode: its position, copied to a key of its own
        pos = f"{P.KEY_PREFIX}p{P.plan_id(rel)}"
        new = P.wrap("project", new, expressions=[P.star(), P.alias(P.col(theirs), pos)])
    keys = list(kid.keys) + ([pos] if pos else [])
    return Keyed(new, keys, dict(kid.ids), kid.monotone, pos=pos,
                 returned=kid.returned and cx.keeps_order(rel))  # fmt: skip


def keyed_na(a: Keying, rel: Any) -> Keyed:
    """An ``na`` relation (``dropna``, ``fillna``, ``replace``): with no column list it
    acts on every column, the keys too; the user's are named so the keys stay as they
    are."""
    new, (kid,) = a.kids(rel)
    inner = P.body(new)
    if not inner.cols:
        inner.cols.extend(a.user_columns(kid.rel))
    return kid.passed(new)
