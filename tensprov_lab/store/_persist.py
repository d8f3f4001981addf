"""Saving a store's runs to disk and loading them back: an open, versioned format.

A save is a directory::

    manifest.json          format name and version, runs, datasets, operations (with
                           their attribute maps), and the SHA-256 and size of every file
    tensors/op<O>_<k>.arrow  the tensor of operation ``O``'s input ``k``: an Arrow IPC
                           file of one row, one ``large_list`` column per array (typed:
                           ``uint64`` words of a packed code, ``uint32`` row ids, ...),
                           the tensor's kind and scalars in the schema metadata

Arrow files are read memory-mapped: a loaded tensor's arrays are pages of the file,
so loading a large store costs the checksum pass, not a copy.  Pure numpy and pyarrow:
no pyspark, no IPython.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from tensprov_lab.store._codes import PackedInts, PatchedInts, _EliasFano
from tensprov_lab.store._columns_tensor import ColumnsTensor
from tensprov_lab.store._csr_tensor import CSRTensor
from tensprov_lab.store._graph import Operation, Store
from tensprov_lab.store._index_tensor import IndexTensor
from tensprov_lab.store._tensors import (
    AllTensor,
    BlockTensor,
    CrossTensor,
    IdentityTensor,
    MaskTensor,
    Tensor,
)
from tensprov_lab.store._window_tensor import FrameTensor, WindowTensor

__all__ = ["FORMAT", "FORMAT_VERSION", "SaveError", "Saved", "read_store", "write_store"]

#: the format's name in ``manifest.json`` and the version this code writes and reads
FORMAT = "tensprov-lab"
FORMAT_VERSION = 1
_MANIFEST = "manifest.json"
_META_KEY = b"tensprov-lab"


class SaveError(ValueError):
    """A save that cannot be read: not a save, truncated, corrupted or too new."""


@dataclass
class Saved:
    """What :func:`read_store` gives back: the store and the manifest's run records."""

    store: Store
    runs: list[dict[str, Any]]
    path: str
    created: str
    nbytes: int


# -- tensors <-> (metadata, arrays) ---------------------------------------------------


def _encode(obj: Any, arrays: dict[str, np.ndarray], at: str) -> Any:
    """A JSON description of a tensor or code, its arrays put in ``arrays``."""

    def arr(name: str, a: np.ndarray) -> dict[str, str]:
        key = f"{at}{name}"
        arrays[key] = np.ascontiguousarray(a)
        return {"array": key, "dtype": a.dtype.str}

    if obj is None:
        return None
    if isinstance(obj, Tensor):
        obj = obj.in_memory()  # a tensor kept outside the process is saved as its data
    if isinstance(obj, PackedInts):
        return {"type": "packed", "width": obj.width, "size": obj.size,
                "words": arr("words", obj.words)}  # fmt: skip
    if isinstance(obj, _EliasFano):
        return {
            "type": "elias-fano", "last": obj.last,
            "low": _encode(obj.low, arrays, f"{at}low."),
            "high": arr("high", obj.high), "rank1": arr("rank1", obj.rank1),
            "rank0": arr("rank0", obj.rank0),
        }  # fmt: skip
    if isinstance(obj, PatchedInts):
        return {
            "type": "patched", "size": obj.size, "top": obj.top, "base_min": obj.base_min,
            "base": _encode(obj.base, arrays, f"{at}base."),
            "low": _encode(obj.low, arrays, f"{at}low."),
            "patch_pos": _encode(obj.patch_pos, arrays, f"{at}patch_pos."),
            "patch_val": _encode(obj.patch_val, arrays, f"{at}patch_val."),
        }  # fmt: skip
    if isinstance(obj, IdentityTensor):
        return {"type": "identity", "n": obj.n_in}
    if isinstance(obj, AllTensor):
        return {"type": "all", "n_out": obj.n_out, "n_in": obj.n_in}
    if isinstance(obj, BlockTensor):
        return {"type": "block", "n_out": obj.n_out, "n_in": obj.n_in, "offset": obj.offset}
    if isinstance(obj, CrossTensor):
        return {"type": "cross", "n_out": obj.n_out, "n_in": obj.n_in, "stride": obj.stride}
    if isinstance(obj, MaskTensor):
        out: dict[str, Any] = {"type": "mask", "n_in": obj.n_in, "form": obj.form}
        if obj.form == "ints":
            out["kept"] = arr("kept", obj._kept)  # type: ignore[arg-type]
        else:
            out["bits"] = arr("bits", obj._bits)  # type: ignore[arg-type]
        return out
    if isinstance(obj, IndexTensor):
        out = {"type": "index", "n_out": obj.n_out, "n_in": obj.n_in, "form": obj.form,
               "nnz": obj._nnz, "ef_over": obj.ef_over}  # fmt: skip
        if obj.form == "sorted":
            out["offsets"] = arr("offsets", obj._offsets)  # type: ignore[arg-type]
        else:
            code = {"packed": obj._values, "pfor": obj._patched, "ef": obj._ef}[obj.form]
            out["code"] = _encode(code, arrays, f"{at}code.")
        return out
    if isinstance(obj, ColumnsTensor):
        return {
            "type": "columns", "whole": _encode(obj.whole, arrays, f"{at}w."),
            "parts": [_encode(p, arrays, f"{at}p{i}.") for i, p in enumerate(obj.parts)],
            "columns": {str(c): i for c, i in obj.columns.items()},
        }  # fmt: skip
    if isinstance(obj, FrameTensor):
        order, lo, hi = obj.codes
        return {
            "type": "frame", "order": _encode(order, arrays, f"{at}order."),
            "lo": _encode(lo, arrays, f"{at}lo."), "hi": _encode(hi, arrays, f"{at}hi."),
        }  # fmt: skip
    if isinstance(obj, WindowTensor):
        return {
            "type": "window", "n": obj.n_in,
            "frames": [_encode(f, arrays, f"{at}f{i}.") for i, f in enumerate(obj.frames)],
            "columns": {str(c): parts for c, parts in obj.columns.items()},
            "own": obj._with_own,
            "kept": None if obj.kept is None else _encode(obj.kept, arrays, f"{at}k."),
        }  # fmt: skip
    if isinstance(obj, CSRTensor):
        return {
            "type": "csr", "n_out": obj.n_out, "n_in": obj.n_in,
            "indptr": arr("indptr", obj.indptr), "indices": arr("indices", obj.indices),
        }  # fmt: skip
    raise TypeError(f"cannot save a {type(obj).__name__}: no format for it")


def _decode(meta: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The tensor or code :func:`_encode` described."""
    if meta is None:
        return None

    def arr(name: str) -> np.ndarray:
        ref = meta[name]
        return arrays[ref["array"]].view(np.dtype(ref["dtype"]))

    kind = meta["type"]
    if kind == "packed":
        return PackedInts(arr("words"), meta["width"], meta["size"])
    if kind == "elias-fano":
        return _EliasFano(_decode(meta["low"], arrays), arr("high"), arr("rank1"),
                          arr("rank0"), meta["last"])  # fmt: skip
    if kind == "patched":
        return PatchedInts(
            meta["size"], meta["top"], meta["base_min"], _decode(meta["base"], arrays),
            _decode(meta["low"], arrays), _decode(meta["patch_pos"], arrays),
            _decode(meta["patch_val"], arrays),
        )  # fmt: skip
    if kind == "identity":
        return IdentityTensor(meta["n"])
    if kind == "all":
        return AllTensor(meta["n_out"], meta["n_in"])
    if kind == "block":
        return BlockTensor(meta["n_out"], meta["n_in"], meta["offset"])
    if kind == "cross":
        return CrossTensor(meta["n_out"], meta["n_in"], meta["stride"])
    if kind == "mask":
        if meta["form"] == "ints":
            return MaskTensor(meta["n_in"], kept=arr("kept"))
        return MaskTensor(meta["n_in"], bits=arr("bits"))
    if kind == "index":
        nnz = None if meta["nnz"] < 0 else meta["nnz"]
        if meta["form"] == "sorted":
            return IndexTensor(meta["n_out"], meta["n_in"], offsets=arr("offsets"))
        code = _decode(meta["code"], arrays)
        if meta["form"] == "ef":
            return IndexTensor(meta["n_out"], meta["n_in"], ef=code, ef_over=meta["ef_over"])
        if meta["form"] == "pfor":
            return IndexTensor(meta["n_out"], meta["n_in"], patched=code, nnz=nnz)
        return IndexTensor(meta["n_out"], meta["n_in"], values=code, nnz=nnz)
    if kind == "columns":
        parts = [_decode(p, arrays) for p in meta["parts"]]
        cols = {int(c): i for c, i in meta["columns"].items()}
        return ColumnsTensor(_decode(meta["whole"], arrays), parts, cols)
    if kind == "frame":
        return FrameTensor._stored(*(_decode(meta[k], arrays) for k in ("order", "lo", "hi")))
    if kind == "window":
        frames = [_decode(f, arrays) for f in meta["frames"]]
        columns = {int(c): list(parts) for c, parts in meta["columns"].items()}
        kept = _decode(meta.get("kept"), arrays)
        return WindowTensor(meta["n"], frames, columns, own=meta["own"], kept=kept)
    if kind == "csr":
        return CSRTensor._stored(meta["n_out"], meta["n_in"], arr("indptr"), arr("indices"))
    raise SaveError(f"unknown tensor type {kind!r} in the save: written by a newer tensprov-lab?")


def _write_tensor(t: Tensor, path: str) -> None:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    arrays: dict[str, np.ndarray] = {}
    meta = _encode(t, arrays, "")
    columns, names = [], []
    for name, a in arrays.items():
        # typed columns (readable by any Arrow tool); bool as its bytes
        flat = a.reshape(-1).view(np.uint8) if a.dtype == bool else a.reshape(-1)
        offsets = pa.array([0, len(flat)], type=pa.int64())
        columns.append(pa.LargeListArray.from_arrays(offsets, pa.array(flat)))
        names.append(name)
    schema = pa.schema(
        [pa.field(n, c.type) for n, c in zip(names, columns)],
        metadata={_META_KEY: json.dumps(meta).encode()},
    )
    table = pa.Table.from_arrays(columns, schema=schema)
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, schema) as writer:
        writer.write_table(table)


def _read_tensor(path: str) -> Tensor:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    source = pa.memory_map(path, "r")
    table = ipc.open_file(source).read_all()
    meta = json.loads(table.schema.metadata[_META_KEY])
    arrays = {}
    for name in table.column_names:
        values = table.column(name).chunk(0).values
        arrays[name] = values.to_numpy(zero_copy_only=True)
    tensor: Tensor = _decode(meta, arrays)
    return tensor


# -- the graph -------------------------------------------------------------------------


_OP_SKIP = {"tensors", "contributing", "influencing", "model", "slots", "spilled"}


def _op_record(op: Operation, files: list[str] | None) -> dict[str, Any]:
    rec = {f.name: getattr(op, f.name) for f in fields(Operation) if f.name not in _OP_SKIP}
    rec["tensors"] = files

    def maps(ms: list[np.ndarray] | None) -> Any:
        if ms is None:
            return None
        return [{"shape": list(np.shape(m)), "ones": np.argwhere(m).tolist()} for m in ms]

    rec["contributing"], rec["influencing"] = maps(op.contributing), maps(op.influencing)
    rec["slots"] = {k: [list(s) for s in v] for k, v in op.slots.items()}
    # a fitted Spark model lives in the JVM: its replay needs the block run again
    rec["model_dropped"] = op.model is not None
    return rec


def _op_from(rec: dict[str, Any], tensors: list[Tensor] | None) -> dict[str, Any]:
    known = {f.name for f in fields(Operation)}
    out = {k: v for k, v in rec.items() if k in known and k not in _OP_SKIP}

    def maps(ms: Any) -> list[np.ndarray] | None:
        if ms is None:
            return None
        out = []
        for m in ms:
            a = np.zeros(m["shape"], dtype=bool)
            for i, j in m["ones"]:
                a[i, j] = True
            out.append(a)
        return out

    out["contributing"] = maps(rec.get("contributing"))
    out["influencing"] = maps(rec.get("influencing"))
    out["slots"] = {k: [tuple(s) for s in v] for k, v in rec.get("slots", {}).items()}
    out["tensors"] = tensors
    return out


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def write_store(
    store: Store,
    path: str | os.PathLike[str],
    runs: list[dict[str, Any]],
    datasets: Iterable[int],
    operations: Iterable[int],
) -> int:
    """Write ``datasets`` and ``operations`` of ``store`` and the ``runs`` records to the
    directory ``path``; returns the bytes written.

    The save is written to a fresh directory next to ``path`` and moved into place
    only when complete, so an interrupted save never leaves a half-written one (an
    earlier save at ``path`` stays whole until then).

    Raises
    ------
    SaveError
        When ``path`` exists and is not a tensprov-lab save (it is never overwritten).
    OSError
        When the disk is full (or refuses a write): the message says so; nothing is
        left behind.
    """
    target = os.path.abspath(os.fspath(path))
    if os.path.exists(target) and not os.path.isfile(os.path.join(target, _MANIFEST)):
        raise SaveError(
            f"{target} exists and is not a tensprov-lab save: choose another path (a save "
            "only replaces an earlier save)"
        )
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.tmp-{uuid.uuid4().hex[:8]}")
    os.makedirs(os.path.join(tmp, "tensors"))
    try:
        files: dict[str, dict[str, Any]] = {}
        op_records = []
        for o in sorted(operations):
            op = store.operations[o]
            names = None
            if op.tensors is not None:
                names = []
                for k, t in enumerate(op.tensors):
                    name = f"tensors/op{op.id}_{k}.arrow"
                    _write_tensor(t, os.path.join(tmp, name))
                    names.append(name)
            op_records.append(_op_record(op, names))
        for name in (n for rec in op_records for n in rec["tensors"] or []):
            full = os.path.join(tmp, name)
            files[name] = {"sha256": _sha256(full), "bytes": os.path.getsize(full)}
        manifest = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "runs": runs,
            "datasets": [asdict(store.datasets[d]) for d in sorted(set(datasets))],
            "operations": op_records,
            "files": files,
        }
        with open(os.path.join(tmp, _MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
        old = None
        if os.path.exists(target):
            old = os.path.join(parent, f".{os.path.basename(target)}.old-{uuid.uuid4().hex[:8]}")
            os.rename(target, old)
        os.rename(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        # disk full, quota, permissions: nothing half written, and say so
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(
            exc.errno,
            f"could not write the save {target}: {exc.strerror or exc}. Nothing was written"
            " (an earlier save there is unchanged): free space on that disk, or save elsewhere",
        ) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return sum(f["bytes"] for f in files.values()) + os.path.getsize(
        os.path.join(target, _MANIFEST)
    )


def read_store(path: str | os.PathLike[str], verify: bool = True) -> Saved:
    """Read a save written by :func:`write_store` into a new :class:`Store`.

    Parameters
    ----------
    path : the save's directory
    verify : check every file's SHA-256 against the manifest (reads each file once)

    Raises
    ------
    FileNotFoundError
        When ``path`` or a file the manifest lists is missing.
    SaveError
        When the manifest is not a tensprov-lab manifest or is truncated, the save was
        written by a newer format version, or a file is truncated or corrupted.
    """
    root = os.path.abspath(os.fspath(path))
    if not os.path.exists(root):
        raise FileNotFoundError(f"no tensprov-lab save at {root}")
    manifest_path = os.path.join(root, _MANIFEST)
    if not os.path.isfile(manifest_path):
        raise SaveError(f"{root} is not a tensprov-lab save: it has no {_MANIFEST}")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SaveError(f"{manifest_path} is truncated or not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise SaveError(f"{manifest_path} is not a tensprov-lab manifest")
    version = manifest.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise SaveError(
            f"{root} was saved in format version {version}; this tensprov-lab reads up to "
            f"version {FORMAT_VERSION}: upgrade tensprov-lab to load it"
        )
    files = manifest["files"]
    for name, info in files.items():
        full = os.path.join(root, name)
        if not os.path.isfile(full):
            raise FileNotFoundError(f"{full} is missing from the save (listed in {_MANIFEST})")
        if os.path.getsize(full) != info["bytes"]:
            raise SaveError(
                f"{full} is truncated or was changed: {os.path.getsize(full)} bytes where "
                f"{info['bytes']} were saved"
            )
        if verify and _sha256(full) != info["sha256"]:
            raise SaveError(f"{full} is corrupted: its checksum does not match the manifest")
    store = Store()
    for rec in manifest["datasets"]:
        store.add_dataset(**rec)
    for rec in manifest["operations"]:
        tensors = None
        if rec["tensors"] is not None:
            tensors = []
            for name in rec["tensors"]:
                try:
                    tensors.append(_read_tensor(os.path.join(root, name)))
                except (OSError, KeyError, ValueError) as exc:
                    raise SaveError(f"{os.path.join(root, name)} cannot be read: {exc}") from None
        kw = _op_from(rec, tensors)
        store.add_operation(
            kw.pop("method"), kw.pop("category"), kw.pop("inputs"), kw.pop("output"),
            kw.pop("tensors"), **kw,
        )  # fmt: skip
    total = sum(f["bytes"] for f in files.values()) + os.path.getsize(manifest_path)
    return Saved(store, manifest["runs"], root, manifest.get("created", ""), total)
