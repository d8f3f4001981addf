"""A run as OpenLineage RunEvents, built with the ``openlineage-python`` client's models.

``run`` arguments are :class:`tensprov_lab.Run` objects (not imported: the Run calls
this module).
"""

from __future__ import annotations

import datetime
from typing import Any

import attr

from tensprov_lab.query import column_lineage

__all__ = ["FACET_SCHEMA_URL", "events", "to_openlineage", "emit_openlineage"]

PRODUCER = "https://github.com/tensprov-lab/tensprov-lab"
#: the JSON schema of our run facet (shipped next to this module: ``facet.json``)
FACET_SCHEMA_URL = (
    "https://github.com/tensprov-lab/tensprov-lab/blob/main/tensprov_lab/export/"
    "facet.json#/$defs/TensprovLabRunFacet"
)


def _facet_class() -> type:
    from openlineage.client.facet_v2 import RunFacet

    @attr.define
    class TensprovLabRunFacet(RunFacet):  # type: ignore[misc]
        """Record-level provenance kept for the run (OpenLineage has no such facet)."""

        operations: list[dict[str, Any]]
        totalBytes: int  # noqa: N815 - OpenLineage's camelCase
        entries: int

        @staticmethod
        def _get_schema() -> str:
            return FACET_SCHEMA_URL

    return TensprovLabRunFacet


def _when(seconds: float | None) -> str:
    moment = datetime.datetime.fromtimestamp(
        seconds if seconds is not None else datetime.datetime.now().timestamp(),
        tz=datetime.timezone.utc,
    )
    return moment.isoformat()


def events(run: Any, namespace: str = "tensprov-lab", job: str | None = None) -> list[Any]:
    """START and COMPLETE ``RunEvent`` objects of ``run`` (see :func:`to_openlineage`)."""
    from openlineage.client.event_v2 import (
        InputDataset,
        Job,
        OutputDataset,
        RunEvent,
        RunState,
    )
    from openlineage.client.event_v2 import Run as OLRun
    from openlineage.client.facet_v2 import column_lineage_dataset as cl
    from openlineage.client.facet_v2 import schema_dataset

    store = run.store
    job_name = job or run.name or f"run-{run.id}"
    mine = set(run._log.datasets)
    produced = {store.operations[o].output for o in run._log.operations}
    read = {d for o in run._log.operations for d in store.operations[o].inputs}
    inputs = sorted(read - produced)
    consumed = {d for o in run._log.operations for d in store.operations[o].inputs}
    outputs = sorted(d for d in produced if d not in consumed and d in mine)

    def name(d: int) -> str:
        return f"{job_name}.{store.datasets[d].label}"

    def schema(d: int) -> Any:
        ds = store.datasets[d]
        fields = [
            schema_dataset.SchemaDatasetFacetFields(name=c, type=t or None)
            for c, t in zip(ds.columns, ds.dtypes or [""] * len(ds.columns))
        ]
        return schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)

    def lineage(d: int) -> Any:
        fields = {}
        for column, origins in column_lineage(store, d).items():
            refs = []
            for (src, src_col), kinds in sorted(origins.items()):
                refs.append(
                    cl.InputField(
                        namespace=namespace, name=name(src), field=src_col,
                        transformations=[
                            cl.Transformation(type=k, subtype=s)
                            for k, s in sorted(kinds, key=lambda x: (x[0], x[1] or ""))
                        ],
                    )
                )  # fmt: skip
            fields[column] = cl.Fields(inputFields=refs)
        return cl.ColumnLineageDatasetFacet(fields=fields, producer=PRODUCER)

    ops = run.operations
    facet = _facet_class()(
        operations=[
            {
                "id": op.id, "method": op.method, "category": op.category,
                "opaque": op.opaque,
                "tensors": [
                    {"kind": t.kind, "form": getattr(t, "form", t.kind),
                     "shape": list(t.shape), "nnz": int(t.nnz), "bytes": int(t.nbytes)}
                    for t in op.tensors or []
                ],
            }
            for op in ops
        ],
        totalBytes=int(sum(op.nbytes for op in ops)),
        entries=int(sum(op.entries for op in ops)),
        producer=PRODUCER,
    )  # fmt: skip
    run_id = run._log.uuid
    ins = [InputDataset(namespace=namespace, name=name(d), facets={"schema": schema(d)})
           for d in inputs]  # fmt: skip
    outs = [
        OutputDataset(namespace=namespace, name=name(d),
                      facets={"schema": schema(d), "columnLineage": lineage(d)})
        for d in outputs
    ]  # fmt: skip
    started, ended = run._log.started, run._log.ended
    return [
        RunEvent(
            eventType=RunState.START, eventTime=_when(started),
            run=OLRun(runId=run_id), job=Job(namespace=namespace, name=job_name),
            inputs=ins, outputs=[], producer=PRODUCER,
        ),
        RunEvent(
            eventType=RunState.COMPLETE, eventTime=_when(ended),
            run=OLRun(runId=run_id, facets={"tensprovLab": facet}),
            job=Job(namespace=namespace, name=job_name),
            inputs=ins, outputs=outs, producer=PRODUCER,
        ),
    ]  # fmt: skip


def to_openlineage(
    run: Any, namespace: str = "tensprov-lab", job: str | None = None
) -> list[dict[str, Any]]:
    """The run as OpenLineage RunEvents (START, COMPLETE), as JSON-ready dicts.

    Inputs are the datasets the run read (with a ``schema`` facet), outputs the
    datasets it produced that nothing in it reads (``schema`` and ``columnLineage``:
    DIRECT for contributing columns, INDIRECT for influencing ones, composed through
    the whole block).  The COMPLETE event's run carries a ``tensprovLab`` facet with
    the size of every record-level tensor.
    """
    from openlineage.client.serde import Serde

    return [Serde.to_dict(e) for e in events(run, namespace, job)]


def emit_openlineage(
    run: Any, transport: Any, namespace: str = "tensprov-lab", job: str | None = None
) -> int:
    """Send the run's events through an ``openlineage-python`` transport (file, HTTP,
    console, ...); returns how many were sent."""
    from openlineage.client import OpenLineageClient

    client = OpenLineageClient(transport=transport)
    sent = events(run, namespace, job)
    for event in sent:
        client.emit(event)
    return len(sent)
