"""Streaming networks: actors connected by bounded channels, run together under one memory
budget. Every rank builds the same network on its part of the data and runs it; sources read,
maps filter and project (Python callables on pyarrow tables), and the collective actors
(shuffle, join, group-by, sort, in C++) exchange through the communicator while the others go
on. A table waiting in a channel stays spillable, so a slow consumer never makes its producer
run out of memory.

    net = spillway.streaming.Network(comm, br)
    rows = net.source(lineitem)
    cheap = net.map(rows, lambda t: t.filter(pc.field("l_discount") < 0.05))
    groups = net.groupby(cheap, ["l_returnflag"], {"l_quantity": "sum"})
    result = net.collect(groups)
    report = net.run()          # result.tables() then holds the groups of this rank

Each method that makes an actor returns its output channel. Column names are known where the
input's are: from a source's first table, through shuffles, sorts, joins and group-bys; a map
that changes the columns says so with `columns=`, else later keys must be indices."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from . import _spillway
from ._args import comm_and_br
from .errors import UsageError
from .groupby import _specs
from .shuffle import _in_slices, _key_indices
from .sort import _key_specs
from .tables import batches, from_arrow, to_arrow
from .tier import tier_name

# Op ids a collective actor claims: a join takes three in a row (left, right, its collectives).
_OPS_PER_ACTOR = 4


@dataclass
class Report:
    """What a run did: per actor (in the order they were added) its counters, in seconds and
    counts; `timeline` the same as a table a person can read; `wall` the run's seconds."""
    actors: list[dict]
    timeline: str
    wall: float


class Collected:
    """The tables a collect() actor received, as pyarrow Tables, once the network has run."""

    def __init__(self) -> None:
        self._tables: list[Any] = []
        self._partitions: list[int] = []

    def _add(self, partition: int, table: Any) -> None:
        self._partitions.append(partition)
        self._tables.append(to_arrow(table) if not table.on_gpu else table)

    def tables(self) -> list[Any]:
        return list(self._tables)

    def partitions(self) -> list[int]:
        return list(self._partitions)

    def table(self) -> Any:
        """All of them concatenated (host tables)."""
        import pyarrow as pa
        if not self._tables:
            raise UsageError("collect: the network sent no table (has it run?)")
        return pa.concat_tables(self._tables)


class Network:
    """The network of one rank. `comm` is needed by collective actors only; `tier` ("HOST", or
    "DEVICE" to run the C++ actors on the GPU) is where actors receive their tables; channels
    hold `max_messages` tables and `max_bytes` at most before their producer waits."""

    def __init__(self, comm: _spillway.Communicator | None = None,
                 br: _spillway.BufferResource | None = None, *, threads: int = 0,
                 max_messages: int = 4, max_bytes: int = 1 << 30, tier: str = "HOST",
                 op_id: int = 0):
        comm, br = comm_and_br("streaming.Network", comm, br, needs_comm=False)
        if max_messages < 1 or max_bytes < 1 or threads < 0:
            raise UsageError("streaming.Network: max_messages and max_bytes must be at least 1, "
                             "threads at least 0")
        self._comm, self._br, self._tier = comm, br, tier_name(tier)
        if self._tier not in ("HOST", "DEVICE"):
            raise UsageError(f"streaming.Network: tier must be HOST or DEVICE, not {tier!r}")
        self._net = _spillway.Network(br, comm, threads, max_messages, max_bytes)
        self._names: dict[int, list[str] | None] = {}  # id(channel) -> its column names
        self._ops = itertools.count(op_id, _OPS_PER_ACTOR)
        self._count = itertools.count()
        self._ran = False

    # --- channels and names ---------------------------------------------------------------
    def channel(self, name: str | None = None, *, max_messages: int | None = None,
                max_bytes: int | None = None, columns: Sequence[str] | None = None):
        """A new channel (actors make their outputs themselves; this is for wiring by hand)."""
        ch = self._net.channel(name or f"c{next(self._count)}", max_messages, max_bytes)
        self._names[id(ch)] = list(columns) if columns is not None else None
        return ch

    def columns(self, channel) -> list[str] | None:
        """The column names of a channel's tables, where known."""
        return self._names.get(id(channel))

    def _keys(self, channel, keys: Sequence[int | str], who: str) -> list[int]:
        names = self._names.get(id(channel))
        if names is None and any(isinstance(k, str) for k in keys):
            raise UsageError(f"{who}: the columns of {channel.name!r} are not known here; give "
                             "key indices, or columns= to the map that makes them")
        return _key_indices(keys, names or [])

    def _collective(self, who: str) -> int:
        if self._comm is None:
            raise UsageError(f"{who} is collective: make the Network with a comm "
                             "(spillway.comm.local(1, fn) for one process)")
        return next(self._ops)

    # --- actors ------------------------------------------------------------------------------
    def source(self, data: Any, *, name: str = "source", batch_rows: int = 65536,
               max_messages: int | None = None):
        """Sends each batch of `data` (anything spillway.shuffle takes: a pyarrow Table, a
        stream, an iterator of tables read as it goes), at most `batch_rows` rows each, in host
        memory (an actor that works on the GPU brings each up as it receives it). A source
        with no rows sends one empty table (the operators need the schema)."""
        it = batches(_in_slices(data, batch_rows), self._br, "HOST", batch_rows)
        first = next(it, None)
        if first is None:
            raise UsageError(f"source {name!r}: the data gave no table (give an empty one with "
                             "its schema)")
        pending = [first]

        def next_table():
            return pending.pop() if pending else next(it, None)

        out = self.channel(f"{name}.out", max_messages=max_messages, columns=first.column_names)
        self._net.source(name, out, next_table)
        return out

    def map(self, input, fn: Callable[[Any], Any], *, name: str = "map",
            columns: Sequence[str] | None = None, arrow: bool = True):
        """`fn` of each table: a pyarrow Table in, a pyarrow Table (or None to drop it) out, on
        the host; with arrow=False the spillway Table itself in the network's tier (its columns
        through DLPack, on the GPU too), returning a spillway Table or None. `columns` names the output's columns when
        they differ from the input's."""
        br = self._br

        def call(table):
            if not arrow:
                return fn(table)
            out = fn(to_arrow(table))
            return None if out is None else from_arrow(out, br)

        out = self.channel(f"{name}.out",
                           columns=columns if columns is not None else self.columns(input))
        self._net.map(name, input, out, call, self._tier if not arrow else "HOST")
        return out

    def concat(self, inputs: Sequence[Any], *, name: str = "concat"):
        """Every table of inputs[0], then of inputs[1], ... (UNION ALL)."""
        out = self.channel(f"{name}.out", columns=self.columns(inputs[0]) if inputs else None)
        self._net.concat(name, list(inputs), out, self._tier)
        return out

    def shuffle(self, input, keys: Sequence[int | str], *, partitions: int = 0,
                name: str = "shuffle"):
        """Each table's rows hash-partitioned on `keys` and exchanged; each of this rank's
        partitions sent on whole as soon as it is complete. Collective."""
        op = self._collective(name)
        k = self._keys(input, keys, name)
        out = self.channel(f"{name}.out", columns=self.columns(input))
        self._net.shuffle(name, input, out, k, partitions, op, self._tier)
        return out

    def join(self, left, right, left_on: Sequence[int | str], right_on: Sequence[int | str], *,
             how: str = "inner", partitions: int = 0, name: str = "join"):
        """The distributed hash join of two streams; its chunks sent as they are joined.
        Collective."""
        op = self._collective(name)
        lk = self._keys(left, left_on, name)
        rk = self._keys(right, right_on, name)
        ln, rn = self.columns(left), self.columns(right)
        names = None
        if ln is not None and (how in ("left_semi", "left_anti") or rn is not None):
            names = list(ln)
            if how not in ("left_semi", "left_anti"):
                names += [c + "_right" if c in ln else c for c in rn]
        out = self.channel(f"{name}.out", columns=names)
        self._net.join(name, left, right, out, lk, rk, how, partitions, op, self._tier)
        return out

    def groupby(self, input, keys: Sequence[int | str], aggregations: Any, *,
                partitions: int = 0, name: str = "groupby"):
        """GROUP BY `keys` with `aggregations` ({column: op or [ops]} or [(column, op)]; ops
        count, sum, min, max, mean); each partition's groups sent when they are done: the keys,
        then a column "<column>_<op>" per aggregation. Collective."""
        op = self._collective(name)
        k = self._keys(input, keys, name)
        specs = _specs(aggregations)
        aggs = [(self._keys(input, [c], name)[0], op) for c, op in specs]
        names = self.columns(input)
        out_names = None
        if names is not None:
            out_names = [names[i] for i in k] + [f"{names[c]}_{op}" for c, op in aggs]
        out = self.channel(f"{name}.out", columns=out_names)
        self._net.groupby(name, input, out, k, aggs, partitions, op, self._tier)
        return out

    def sort(self, input, by: str | Sequence[str | int], *, descending: Any = False,
             nulls_first: Any = False, limit: int | None = None, samples: int = 1024,
             name: str = "sort"):
        """ORDER BY `by` (as spillway.sort): this rank's range of the global order sent once
        every rank's rows are in (with `limit`, all on rank 0). Host tables. Collective."""
        by = [by] if isinstance(by, (str, int)) else list(by)
        op = self._collective(name)
        keys = _key_specs(self._keys(input, by, name), descending, nulls_first)
        out = self.channel(f"{name}.out", columns=self.columns(input))
        self._net.sort(name, input, out, keys, samples, limit, op)
        return out

    def sink(self, input, fn: Callable[[int, Any], None], *, name: str = "sink",
             arrow: bool = True) -> None:
        """`fn(partition, table)` for each table (pyarrow, or with arrow=False the spillway
        Table)."""
        self._net.sink(name, input, (lambda p, t: fn(p, to_arrow(t))) if arrow else fn,
                       self._tier if not arrow else "HOST")

    def collect(self, input, *, name: str = "collect") -> Collected:
        """The tables of `input`, kept for after the run (as pyarrow Tables)."""
        got = Collected()
        self._net.sink(name, input, got._add, self._tier)
        return got

    # --- running -----------------------------------------------------------------------------
    def plan(self) -> str:
        """One line per actor: its input and output channels."""
        return self._net.plan()

    def run(self) -> Report:
        """Runs every actor until all have ended; raises the first error of an actor (a Python
        actor's exception as it was raised, with its traceback). Once only."""
        if self._ran:
            raise UsageError("streaming.Network: run() twice (build a new network)")
        self._ran = True
        actors, timeline, wall = self._net.run()
        return Report(actors, timeline, wall)
