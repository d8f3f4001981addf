"""A synthetic TPC-DI-like generator: customers, accounts and trades.

The join of the TensProv paper's Table XI is customers ⨝ accounts at TPC-DI scale
factors 3 to 20 (362,342 ⨝ 390,978 rows at SF 3 up to 2,411,006 ⨝ 2,601,648 at SF 20).
:func:`sizes` gives those row counts (exact at the paper's scale factors, interpolated
between them), and :func:`generate` makes tables of exactly that size with realistic keys
and skew: customer ids are sparse surrogate keys, accounts are skewed over customers (a
Zipf tail: a few hold hundreds), and every account has a geometric number of trades.  The
join on ``c_id = ca_c_id`` gives one output row per account, with duplicate keys on the
customer side.

Two orders of the accounts table (``accounts=``):

``"chronological"`` (the default)
    Modelled on TPC-DI's customer-management history, which its generator writes as it
    happens: a ``NEW`` action opens a customer together with an account, and ``ADDACCT``
    actions later add accounts to existing customers.  Here every customer
    opens one account when it arrives (customers arrive in ``c_id`` order), the other
    accounts (7% of them at the paper's sizes) are opened at a uniformly random time
    after their customer arrived, by a Zipf-skewed choice of customers, and accounts are
    numbered in the order they were opened.
``"random"``
    Accounts dealt to customers in no particular order, with many customers holding none:
    the worst case for provenance size, since the join's right side then carries about
    ``log2(n_accounts)`` bits a row of pure information.

Data is made with numpy (seeded, deterministic) and written as one parquet file per table
with pyarrow, so Spark reads it in file order (a stable scan order for provenance) without
the cost of ``createDataFrame`` over millions of Python rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ACCOUNT_ORDERS",
    "PAPER_SIZES",
    "TpcdiTables",
    "sizes",
    "generate",
    "write_parquet",
    "load",
]

#: Table XI of the paper: scale factor -> (customers, accounts)
PAPER_SIZES: dict[float, tuple[int, int]] = {
    3: (362_342, 390_978),
    5: (602_956, 650_412),
    9: (1_085_239, 1_171_107),
    15: (1_807_703, 1_951_236),
    20: (2_411_006, 2_601_648),
}

_STATES = np.array(["AL", "CA", "FL", "IL", "MA", "NY", "OH", "ON", "QC", "TX", "WA"])
_NAMES = np.array(
    ["Adams", "Baker", "Chen", "Diaz", "Evans", "Fischer", "Garcia", "Haddad", "Ito", "Jones",
     "Kim", "Lopez", "Muller", "Nguyen", "Okafor", "Patel", "Rossi", "Smith", "Tanaka", "Weber"]
)  # fmt: skip
_TRADE_TYPES = np.array(["TMB", "TMS", "TLB", "TLS", "TSL"])
_SYMBOLS = np.array([f"S{i:04d}" for i in range(400)])

#: the orders of the accounts table :func:`generate` can make
ACCOUNT_ORDERS = ("chronological", "random")


def sizes(sf: float) -> tuple[int, int]:
    """Rows of (customers, accounts) at a scale factor, as in the paper's Table XI.

    Exact at the paper's scale factors (3, 5, 9, 15, 20); linear between them, and
    proportional to the scale factor outside 3..20 (the table grows almost linearly:
    about 120,600 customers and 130,100 accounts per scale factor).

    Parameters
    ----------
    sf : float
        TPC-DI scale factor, > 0.

    Returns
    -------
    tuple of int
        ``(n_customers, n_accounts)``.

    Examples
    --------
    >>> sizes(3)
    (362342, 390978)
    >>> sizes(10)
    (1205650, 1301128)
    """
    if sf <= 0:
        raise ValueError(f"scale factor must be positive, got {sf}")
    if sf in PAPER_SIZES:
        return PAPER_SIZES[sf]
    points = sorted(PAPER_SIZES)
    if sf < points[0] or sf > points[-1]:
        ref = points[0] if sf < points[0] else points[-1]
        c, a = PAPER_SIZES[ref]
        return max(int(round(c * sf / ref)), 1), max(int(round(a * sf / ref)), 1)
    hi = next(p for p in points if p > sf)
    lo = max(p for p in points if p < sf)
    w = (sf - lo) / (hi - lo)
    (c0, a0), (c1, a1) = PAPER_SIZES[lo], PAPER_SIZES[hi]
    return int(round(c0 + w * (c1 - c0))), int(round(a0 + w * (a1 - a0)))


@dataclass
class TpcdiTables:
    """Column arrays of the generated tables (``trades`` is ``None`` unless asked for)."""

    sf: float
    customers: dict[str, np.ndarray]
    accounts: dict[str, np.ndarray]
    trades: dict[str, np.ndarray] | None = None

    @property
    def n_customers(self) -> int:
        return len(self.customers["c_id"])

    @property
    def n_accounts(self) -> int:
        return len(self.accounts["ca_id"])


def _accounts_per_customer(rng: np.random.Generator, n_c: int, n_a: int) -> np.ndarray:
    """Counts summing to exactly ``n_a``: zero for many customers, a Zipf tail for some."""
    counts = np.zeros(n_c, dtype=np.int64)
    # Zipf(2.5) has mean ~1.95 over holders, so this share of customers hold accounts
    holders = rng.random(n_c) < min(1.0, (n_a / n_c) / 1.95)
    counts[holders] = np.minimum(rng.zipf(2.5, int(holders.sum())), 500)
    diff = n_a - int(counts.sum())
    # fix the total without touching the shape of the tail: +1 / -1 on random holders
    if diff > 0:
        pick = rng.choice(n_c, size=diff, replace=True)
        np.add.at(counts, pick, 1)
    while diff < 0:
        have = np.flatnonzero(counts > 0)
        take = rng.choice(have, size=min(-diff, len(have)), replace=False)
        counts[take] -= 1
        diff += len(take)
    return counts


def _chronological_owners(rng: np.random.Generator, c_id: np.ndarray, n_a: int) -> np.ndarray:
    """``ca_c_id`` of accounts numbered in the order they were opened (see the module doc)."""
    n_c = len(c_id)
    first = min(n_c, n_a)  # fewer accounts than customers: the earliest customers hold one
    later = _accounts_per_customer(rng, n_c, n_a - first) if n_a > first else np.zeros(n_c, int)
    arrive = np.arange(n_c) + rng.random(n_c)
    owner = np.repeat(np.arange(n_c), later)
    opened = np.concatenate(
        [arrive[:first], arrive[owner] + rng.random(len(owner)) * (n_c - arrive[owner])]
    )
    who = np.concatenate([np.arange(first), owner])
    return c_id[who[np.argsort(opened, kind="stable")]]


def generate(
    sf: float,
    seed: int = 0,
    trades: bool = False,
    trades_per_account: float = 6.0,
    accounts: str = "chronological",
) -> TpcdiTables:
    """Generate the tables of one scale factor (deterministic for a given seed).

    Parameters
    ----------
    sf : float
        Scale factor; row counts are :func:`sizes` ``(sf)``.
    seed : int
        Seed of the numpy generator.
    trades : bool
        Also make the trades table (each account has a geometric number of trades with
        mean ``trades_per_account``; many rows, so off by default).
    trades_per_account : float
        Mean trades per account.
    accounts : {"chronological", "random"}
        Order of the accounts table (see the module docstring).

    Returns
    -------
    TpcdiTables

    Examples
    --------
    >>> t = generate(0.01)
    >>> t.n_customers, t.n_accounts
    (1208, 1303)
    >>> bool(np.isin(t.accounts["ca_c_id"], t.customers["c_id"]).all())
    True
    """
    if accounts not in ACCOUNT_ORDERS:
        raise ValueError(f"accounts must be one of {ACCOUNT_ORDERS}, got {accounts!r}")
    n_c, n_a = sizes(sf)
    rng = np.random.default_rng(seed)
    # surrogate keys as in a warehouse: increasing but with gaps
    c_id = np.cumsum(rng.integers(1, 4, n_c, dtype=np.int64)) + 1_000_000
    customers = {
        "c_id": c_id,
        "c_tax_id": rng.integers(100_000_000, 999_999_999, n_c, dtype=np.int64),
        "c_l_name": _NAMES[rng.integers(0, len(_NAMES), n_c)],
        "c_gndr": np.where(rng.random(n_c) < 0.5, "F", "M"),
        "c_tier": rng.choice(np.array([1, 2, 3], dtype=np.int8), n_c, p=[0.2, 0.5, 0.3]),
        "c_dob": (np.datetime64("1940-01-01") + rng.integers(0, 60 * 365, n_c)).astype(
            "datetime64[D]"
        ),
        "c_st": _STATES[rng.integers(0, len(_STATES), n_c)],
    }
    if accounts == "random":
        owner = rng.permutation(np.repeat(c_id, _accounts_per_customer(rng, n_c, n_a)))
    else:
        owner = _chronological_owners(rng, c_id, n_a)
    account_cols = {
        "ca_id": np.arange(n_a, dtype=np.int64) * 7 + 50_000,
        "ca_c_id": owner,
        "ca_b_id": rng.integers(0, max(n_a // 500, 10), n_a, dtype=np.int64),
        "ca_tax_st": rng.choice(np.array([0, 1, 2], dtype=np.int8), n_a, p=[0.1, 0.6, 0.3]),
        "ca_name": np.char.add("acct-", rng.integers(0, 100_000, n_a).astype(str)),
        "ca_bal": np.round(rng.lognormal(8.0, 1.5, n_a), 2),
    }
    tables = TpcdiTables(sf=sf, customers=customers, accounts=account_cols)
    if trades:
        per = rng.geometric(1.0 / max(trades_per_account, 1.0), n_a) - 1
        t_ca = np.repeat(account_cols["ca_id"], per)
        n_t = len(t_ca)
        tables.trades = {
            "t_id": np.arange(n_t, dtype=np.int64) + 200_000_000,
            "t_ca_id": rng.permutation(t_ca),
            "t_tt_id": _TRADE_TYPES[rng.integers(0, len(_TRADE_TYPES), n_t)],
            "t_s_symb": _SYMBOLS[np.minimum(rng.zipf(1.6, n_t) - 1, len(_SYMBOLS) - 1)],
            "t_qty": rng.integers(1, 100, n_t, dtype=np.int32) * 100,
            "t_bid_price": np.round(rng.uniform(1.0, 500.0, n_t), 2),
        }
    return tables


def write_parquet(tables: TpcdiTables, folder: str) -> dict[str, str]:
    """Write each table as one parquet file and return ``{table: path}``.

    One file per table (several row groups) keeps Spark's scan order equal to the
    generator's order, so row ``i`` of a table is the same record for every reader.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    paths: dict[str, str] = {}
    for name in ("customers", "accounts", "trades"):
        cols = getattr(tables, name)
        if cols is None:
            continue
        path = os.path.join(folder, f"{name}.parquet")
        arrays = {k: pa.array(v) for k, v in cols.items()}
        tmp = path + ".tmp"
        pq.write_table(pa.table(arrays), tmp, row_group_size=1 << 18)
        os.replace(tmp, path)  # a crashed run never leaves a half-written table behind
        paths[name] = path
    return paths


def load(
    spark: Any,
    sf: float,
    folder: str,
    seed: int = 0,
    trades: bool = False,
    accounts: str = "chronological",
) -> dict[str, Any]:
    """DataFrames of the tables at one scale factor, generated into ``folder`` once.

    Parameters
    ----------
    spark : SparkSession
    sf : float
    folder : str
        Cache folder; tables are written to ``folder/tpcdi-sf{sf}-seed{seed}/``.
    seed : int
    trades : bool
    accounts : {"chronological", "random"}
        Order of the accounts table, as for :func:`generate`.

    Returns
    -------
    dict
        ``{"customers": DataFrame, "accounts": DataFrame[, "trades": DataFrame]}``.
    """
    sub = os.path.join(folder, f"tpcdi-sf{sf:g}-seed{seed}-{accounts}")
    wanted = ["customers", "accounts"] + (["trades"] if trades else [])
    paths = {t: os.path.join(sub, f"{t}.parquet") for t in wanted}
    if not all(os.path.exists(p) for p in paths.values()):
        write_parquet(generate(sf, seed=seed, trades=trades, accounts=accounts), sub)
    return {t: spark.read.parquet(p) for t, p in paths.items()}
