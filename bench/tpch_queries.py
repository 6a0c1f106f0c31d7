"""TPC-H queries as spillway.streaming networks (bench/tpch.py runs them): each builds the
network of one rank from its readers and returns what it collects; beside it the TPC-H SQL
DuckDB runs, and how DuckDB's columns compare with the network's.

Units: spillway carries TPC-H's decimals as int64 hundredths and dates as int32 days, so that
sums are exact integers; a column of `SCALES` says by what power of ten DuckDB's exact decimal
is multiplied to compare it with spillway's integer ("float": compared to 1e-9, relatively)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

Q1_DATE = 10471  # 1998-09-02 in days since 1970-01-01
Q4_FROM, Q4_TO = 8582, 8674  # 1993-07-01 and 1993-10-01

# Per query: the columns each table is read with.
TABLES = {
    "1": {"lineitem": ["l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag",
                       "l_linestatus", "l_shipdate"]},
    "4": {"orders": ["o_orderkey", "o_orderdate", "o_orderpriority"],
          "lineitem": ["l_orderkey", "l_commitdate", "l_receiptdate"]},
    "9": {"part": ["p_partkey", "p_name"], "supplier": ["s_suppkey", "s_nationkey"],
          "lineitem": ["l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_extendedprice",
                       "l_discount"],
          "partsupp": ["ps_partkey", "ps_suppkey", "ps_supplycost"],
          "orders": ["o_orderkey", "o_orderdate"], "nation": ["n_nationkey", "n_name"]},
    "18": {"customer": ["c_custkey", "c_name"],
           "orders": ["o_orderkey", "o_custkey", "o_orderdate", "o_totalprice"],
           "lineitem": ["l_orderkey", "l_quantity"]},
    "join": {"lineitem": ["l_orderkey", "l_partkey", "l_suppkey", "l_extendedprice"],
             "partsupp": ["ps_partkey", "ps_suppkey", "ps_availqty", "ps_supplycost"]},
}

SQL = {
    "1": """
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc, count(*) AS count_order
FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "4": """
SELECT o_orderpriority, count(*) AS order_count FROM orders
WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-07-01' + INTERVAL '3' MONTH
  AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey
              AND l_commitdate < l_receiptdate)
GROUP BY o_orderpriority ORDER BY o_orderpriority""",
    "9": """
SELECT nation, o_year, sum(amount) AS sum_profit FROM (
  SELECT n_name AS nation, extract(year FROM o_orderdate) AS o_year,
         l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
  FROM part, supplier, lineitem, partsupp, orders, nation
  WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey
    AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
    AND p_name LIKE '%green%') AS profit
GROUP BY nation, o_year ORDER BY nation, o_year DESC""",
    "18": """
SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
FROM customer, orders, lineitem
WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
                     HAVING sum(l_quantity) > 300)
  AND c_custkey = o_custkey AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate LIMIT 100""",
    "join": """
SELECT count(*), sum(l_orderkey), sum(ps_availqty), sum(ps_supplycost), sum(l_extendedprice)
FROM lineitem JOIN partsupp ON l_partkey = ps_partkey AND l_suppkey = ps_suppkey""",
}

SCALES = {
    "1": [None, None, 2, 2, 4, 6, "float", "float", "float", 0],
    "4": [None, 0],
    "9": [None, 0, 4],
    "18": [None, 0, 0, "date", 2, 2],
    "join": [0, 0, 0, 2, 2],
}
# Spillway's averages of hundredths, to compare with DuckDB's averages of the decimals.
AVERAGE_SCALE = {"1": {6: 100, 7: 100, 8: 100}}


def _q1(net, src):
    def prices(t):
        t = t.filter(pc.less_equal(t["l_shipdate"], Q1_DATE))
        disc_price = pc.multiply(t["l_extendedprice"], pc.subtract(100, t["l_discount"]))
        charge = pc.multiply(disc_price, pc.add(100, t["l_tax"]))
        return t.select(["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice",
                         "l_discount"]).append_column("disc_price", disc_price) \
                .append_column("charge", charge)
    rows = net.map(src["lineitem"], prices, name="filter+project",
                   columns=["l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice",
                            "l_discount", "disc_price", "charge"])
    groups = net.groupby(rows, ["l_returnflag", "l_linestatus"],
                         [("l_quantity", "sum"), ("l_extendedprice", "sum"),
                          ("disc_price", "sum"), ("charge", "sum"), ("l_quantity", "mean"),
                          ("l_extendedprice", "mean"), ("l_discount", "mean"),
                          ("l_quantity", "count")])
    return net.sort(groups, ["l_returnflag", "l_linestatus"])


def _q4(net, src):
    orders = net.map(src["orders"], lambda t: t.filter(pc.and_(
        pc.greater_equal(t["o_orderdate"], Q4_FROM), pc.less(t["o_orderdate"], Q4_TO))),
        name="orders in Q3 1993")
    late = net.map(src["lineitem"], lambda t: t.filter(
        pc.less(t["l_commitdate"], t["l_receiptdate"])).select(["l_orderkey"]),
        name="late lines", columns=["l_orderkey"])
    having = net.join(orders, late, ["o_orderkey"], ["l_orderkey"], how="left_semi",
                      name="semi join")
    counts = net.groupby(having, ["o_orderpriority"], [("o_orderkey", "count")])
    return net.sort(counts, ["o_orderpriority"])


def _q9(net, src):
    green = net.map(src["part"], lambda t: t.filter(pc.match_substring(t["p_name"], "green"))
                    .select(["p_partkey"]), name="green parts", columns=["p_partkey"])
    lines = net.join(src["lineitem"], green, ["l_partkey"], ["p_partkey"], how="left_semi",
                     name="lineitem x part")
    lines = net.join(lines, src["partsupp"], ["l_partkey", "l_suppkey"],
                     ["ps_partkey", "ps_suppkey"], name="x partsupp")
    lines = net.join(lines, src["supplier"], ["l_suppkey"], ["s_suppkey"], name="x supplier")
    lines = net.join(lines, src["nation"], ["s_nationkey"], ["n_nationkey"], name="x nation")
    lines = net.join(lines, src["orders"], ["l_orderkey"], ["o_orderkey"], name="x orders")

    def amount(t):
        profit = pc.subtract(
            pc.multiply(t["l_extendedprice"], pc.subtract(100, t["l_discount"])),
            pc.multiply(t["ps_supplycost"], t["l_quantity"]))
        year = pc.year(t["o_orderdate"].cast(pa.date32()))
        return pa.table({"nation": t["n_name"], "o_year": year, "amount": profit})
    profit = net.map(lines, amount, name="profit", columns=["nation", "o_year", "amount"])
    groups = net.groupby(profit, ["nation", "o_year"], {"amount": "sum"})
    return net.sort(groups, ["nation", "o_year"], descending=[False, True])


def _q18(net, src):
    per_order = net.groupby(src["lineitem"], ["l_orderkey"], {"l_quantity": "sum"},
                            name="quantity per order")
    big = net.map(per_order, lambda t: t.filter(pc.greater(t["l_quantity_sum"], 300 * 100)),
                  name="over 300")
    orders = net.join(src["orders"], big, ["o_orderkey"], ["l_orderkey"], name="orders x big")
    rows = net.join(orders, src["customer"], ["o_custkey"], ["c_custkey"], name="x customer")
    rows = net.map(rows, lambda t: t.select(["c_name", "c_custkey", "o_orderkey", "o_orderdate",
                                             "o_totalprice", "l_quantity_sum"]),
                   name="project", columns=["c_name", "c_custkey", "o_orderkey", "o_orderdate",
                                             "o_totalprice", "l_quantity_sum"])
    return net.sort(rows, ["o_totalprice", "o_orderdate"], descending=[True, False], limit=100)


def _join(net, src):
    joined = net.join(src["lineitem"], src["partsupp"], ["l_partkey", "l_suppkey"],
                      ["ps_partkey", "ps_suppkey"])
    sums = net.map(joined, lambda t: pa.table({
        "rows": pa.array([t.num_rows], pa.int64()),
        **{c: pa.array([pc.sum(t[c]).as_py() or 0], pa.int64())
           for c in ["l_orderkey", "ps_availqty", "ps_supplycost", "l_extendedprice"]}}),
        name="sum chunk")
    return sums


BUILD = {"1": _q1, "4": _q4, "9": _q9, "18": _q18, "join": _join}


def finish(query: str, rows: list[tuple]) -> list[tuple]:
    """The collected rows as the query's answer (the join's chunk sums added up)."""
    if query == "join":
        return [tuple(sum(r[i] for r in rows) for i in range(5))] if rows else []
    return rows
