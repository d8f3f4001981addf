"""OpenLineage run events and W3C PROV documents of a run (``tensprov_lab.export``).

The events are checked against OpenLineage's own JSON schemas (``tests/data/
openlineage-spec``, the spec the client is generated from) and posted through the
client's HTTP transport to a server in the test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

import tensprov_lab
from tests._retail import orders_and_customers

pytestmark = pytest.mark.spark

SPEC = Path(__file__).parent / "data" / "openlineage-spec"
FACET = Path(tensprov_lab.__file__).parent / "export" / "facet.json"


def _validator(def_uri: str) -> Any:
    """A validator of ``def_uri`` (``<schema $id>#/$defs/...``) that resolves the
    spec's cross-file references from the local copies."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    resources = []
    for path in [*SPEC.glob("*.json"), FACET]:
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    registry = Registry().with_resources(resources)
    return Draft202012Validator({"$ref": def_uri}, registry=registry)


def _errors(def_uri: str, instance: Any) -> list[str]:
    return [e.message for e in _validator(def_uri).iter_errors(instance)]


OL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
SCHEMA = (
    "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
)
COLUMNS = (
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
    "#/$defs/ColumnLineageDatasetFacet"
)


@pytest.fixture(scope="module")
def retail(spark: Any) -> Any:
    orders, customers = orders_and_customers(spark, 200, 11, 40)
    with tensprov_lab.track(spark, name="export-retail") as run:
        big = orders.filter("amount > 20")
        joined = big.join(customers, "cust")
        out = joined.groupBy("region").agg({"amount": "sum"})
    return run, orders, out


def test_openlineage_events_follow_the_spec(retail: Any) -> None:
    run, _, _ = retail
    events = run.to_openlineage(namespace="notebooks")
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert events[0]["run"]["runId"] == events[1]["run"]["runId"]
    assert events[0]["eventTime"] <= events[1]["eventTime"]
    for event in events:
        assert _errors(OL, event) == []
        assert (event["job"]["namespace"], event["job"]["name"]) == ("notebooks", "export-retail")
    complete = events[1]
    assert sorted(d["name"] for d in complete["inputs"]) == [
        "export-retail.customers", "export-retail.orders",
    ]  # fmt: skip
    (output,) = complete["outputs"]
    assert output["name"] == "export-retail.out"
    assert _errors(SCHEMA, output["facets"]["schema"]) == []
    assert _errors(COLUMNS, output["facets"]["columnLineage"]) == []
    for d in complete["inputs"]:
        assert _errors(SCHEMA, d["facets"]["schema"]) == []
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["region", "sum(amount)"]

    # our own facet: valid against the schema we ship, sizes from the store
    facet = complete["run"]["facets"]["tensprovLab"]
    errors = _errors(
        "https://github.com/tensprov-lab/tensprov-lab/blob/main/tensprov_lab/export/facet.json"
        "#/$defs/TensprovLabRunFacet",
        facet,
    )
    assert errors == []
    assert facet["_schemaURL"].endswith("facet.json#/$defs/TensprovLabRunFacet")
    assert facet["totalBytes"] == sum(op.nbytes for op in run.operations) > 0
    assert [o["method"] for o in facet["operations"]] == [op.method for op in run.operations]
    assert _errors(facet["_schemaURL"], dict(facet, totalBytes=-1))  # the check can fail


def test_column_lineage_says_direct_and_indirect(retail: Any) -> None:
    run, _, _ = retail
    output = run.to_openlineage()[1]["outputs"][0]
    fields = output["facets"]["columnLineage"]["fields"]

    def origins(column: str) -> dict[tuple[str, str], list[tuple[str, str | None]]]:
        return {
            (f["name"].split(".")[-1], f["field"]): [
                (t["type"], t.get("subtype")) for t in f["transformations"]
            ]
            for f in fields[column]["inputFields"]
        }

    total = origins("sum(amount)")
    # the summed values, and the filter on them (amount > 20) deciding which are summed
    assert ("DIRECT", "AGGREGATION") in total[("orders", "amount")]
    assert ("INDIRECT", "FILTER") in total[("orders", "amount")]
    assert total[("orders", "cust")] == [("INDIRECT", "JOIN")]
    assert ("INDIRECT", "JOIN") in total[("customers", "cust")]
    assert ("INDIRECT", "GROUP_BY") in total[("customers", "region")]
    assert ("orders", "order_id") not in total  # never read for this column
    region = origins("region")
    assert ("DIRECT", "AGGREGATION") in region[("customers", "region")]


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, json.loads(body)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_events_reach_an_http_server(retail: Any) -> None:
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    run, _, _ = retail
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        sent = run.emit_openlineage(HttpTransport(HttpConfig(url=url)), namespace="nb")
    finally:
        server.shutdown()
        server.server_close()
    assert sent == 2
    assert [p for p, _ in _Collector.received] == ["/api/v1/lineage"] * 2
    bodies = [b for _, b in _Collector.received]
    assert [b["eventType"] for b in bodies] == ["START", "COMPLETE"]
    # the client's JSON keeps empty facets its dicts leave out, and adds a tags facet
    from openlineage.client.serde import Serde

    for body in bodies:
        assert body["run"]["facets"].pop("tags")["tags"][0]["key"] == "openlineage_client_version"
    assert [Serde.to_dict(b) for b in bodies] == run.to_openlineage(namespace="nb")
    for body in bodies:
        assert _errors(OL, body) == []


def test_prov_document_round_trips_through_prov_json(retail: Any) -> None:
    from prov.model import ProvDocument

    run, orders, out = retail
    doc = run.to_prov(records={out: [0]})
    text = doc.serialize(format="json")
    back = ProvDocument.deserialize(content=text, format="json")
    assert back == doc
    graph = json.loads(text)
    entities, activities = graph["entity"], graph["activity"]
    datasets = {k: v for k, v in entities.items() if "_row" not in k}
    assert sorted(v["prov:label"] for v in datasets.values()) == sorted(
        d.label for d in run.datasets
    )
    assert len(activities) == len(run.operations) + 1  # and the block itself
    assert len(graph["wasGeneratedBy"]) == len(run.operations)
    assert len(graph["used"]) == sum(len(set(op.inputs)) for op in run.operations)
    # the record and the source records of its backward lineage
    want = run.backward(out, rows=[0])
    out_id, orders_id = run.dataset(out).id, run.dataset(orders).id
    derived = {(v["prov:generatedEntity"], v["prov:usedEntity"])
               for v in graph["wasDerivedFrom"].values()}  # fmt: skip
    from_records = {u for g, u in derived if g == f"tpl:dataset{out_id}_row0"}
    expected = {f"tpl:dataset{orders_id}_row{r}" for r in want[orders].tolist()}
    assert expected and expected <= from_records
    assert len(from_records) == sum(len(want[d]) for d in want)
    assert "wasDerivedFrom(tpl:dataset" in doc.get_provn()


def test_a_loaded_run_exports_the_same(retail: Any, tmp_path: Any) -> None:
    run, _, _ = retail
    tensprov_lab.save(tmp_path / "s", runs=run)
    (loaded,) = tensprov_lab.load(tmp_path / "s")
    try:
        assert loaded.to_openlineage() == run.to_openlineage()
        assert loaded.to_prov() == run.to_prov()
    finally:
        loaded.forget()
