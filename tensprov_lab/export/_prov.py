"""A run as a W3C PROV document (the ``prov`` package's model)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prov.model import ProvDocument


__all__ = ["NAMESPACE", "to_prov"]

#: the namespace of the identifiers and attributes this export writes
NAMESPACE = ("tpl", "https://github.com/tensprov-lab/tensprov-lab/ns#")


def to_prov(run: Any, records: dict[Any, Any] | None = None) -> ProvDocument:
    """The run as W3C PROV: datasets are entities (collections of their records),
    operations activities that used their inputs and generated their output, each
    output ``wasDerivedFrom`` each input via its operation.

    With ``records={dataset: rows}`` the selected records are entities too, members
    of their dataset, each derived from the source records of its backward lineage.
    Serialize with ``doc.serialize(format="json")`` (PROV-JSON) or
    ``doc.get_provn()`` (PROV-N).
    """
    from prov.model import PROV_TYPE, ProvDocument

    doc = ProvDocument()
    tpl = doc.add_namespace(*NAMESPACE)
    store = run.store
    agent = doc.agent(tpl["tensprov-lab"], {PROV_TYPE: "prov:SoftwareAgent"})
    block = doc.activity(
        tpl[f"run{run.id}"], other_attributes={"prov:label": run.name or f"run {run.id}"}
    )
    doc.wasAssociatedWith(block, agent)

    def dataset_id(d: int) -> Any:
        return tpl[f"dataset{d}"]

    seen: set[int] = set()

    def dataset(d: int) -> Any:
        ds = store.datasets[d]
        if d not in seen:
            seen.add(d)
            doc.entity(dataset_id(d), {
                PROV_TYPE: "prov:Collection", "prov:label": ds.label,
                tpl["role"]: ds.role, tpl["rows"]: -1 if ds.n_rows is None else ds.n_rows,
                tpl["columns"]: ", ".join(ds.columns),
            })  # fmt: skip
        return dataset_id(d)

    for op in run.operations:
        act = doc.activity(tpl[f"operation{op.id}"], other_attributes={
            "prov:label": op.method, tpl["category"]: op.category,
            tpl["expression"]: op.expression or op.method, tpl["opaque"]: op.opaque,
        })  # fmt: skip
        doc.wasInformedBy(act, block)
        out = dataset(op.output)
        doc.wasGeneratedBy(out, act)
        for d in dict.fromkeys(op.inputs):
            doc.used(act, dataset(d))
            doc.wasDerivedFrom(out, dataset(d), activity=act)

    made: dict[tuple[int, int], Any] = {}

    def record(d: int, r: int) -> Any:
        if (d, r) not in made:
            made[(d, r)] = doc.entity(tpl[f"dataset{d}_row{r}"], {"prov:label": f"row {r}"})
            doc.hadMember(dataset(d), made[(d, r)])
        return made[(d, r)]

    for ref, rows in (records or {}).items():
        d, picked = run._select(ref, rows, None)
        for r in picked.tolist():
            lineage = run.backward(d, rows=[r])
            for ds in lineage:
                for sr in lineage[ds].tolist():
                    doc.wasDerivedFrom(record(d, r), record(ds.id, sr))
    return doc
