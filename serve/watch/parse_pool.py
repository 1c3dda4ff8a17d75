"""Reading and parsing many files at once: inline, or in forked worker processes."""

from __future__ import annotations

import gc
import marshal
from collections.abc import Iterable, Iterator

from serve.source.tree import FileStat
from serve.support.workers import cpu_count, die_with_parent, fork_pool
from serve.watch.file_read import ReadJob, read_file
from serve.watch.records import FileRecord, decode_record, encode_record, record_from

# Parsing is CPU-bound pure Python: a large first load is spread over worker processes.
PARALLEL_PARSE_MIN = 1500
PARSE_CHUNK = 250  # the workers finish up to a chunk apart: small chunks keep that tail short
Job = tuple[ReadJob, FileStat]


def parse_workers() -> int:
    return cpu_count()


def worth_forking(files: int) -> bool:
    """Whether reading this many files is spread over worker processes."""
    return files >= PARALLEL_PARSE_MIN and parse_workers() >= 2


def read_all(jobs: list[Job]) -> list[tuple[str, FileRecord]]:
    """Each job's file read (and parsed), in job order; in workers when there are many."""
    if not worth_forking(len(jobs)):
        return [(job[0], record_from(read_file(job), st)) for job, st in jobs]
    with ParseInWorkers(jobs) as parsing:
        return list(parsing.records())


def start_worker(parent: int) -> None:
    """Worker start-up. The worker's pages are acyclic tuples it sends away, so the cyclic
    collector would only re-traverse them (and the parent's heap, forked with it)."""
    gc.disable()
    die_with_parent(parent)


def read_files(jobs: list[Job]) -> bytes:
    """Worker-side: read a batch and send the records back as marshal bytes, which the
    parent decodes several times faster than pickled objects."""
    return marshal.dumps([(job[0], encode_record(record_from(read_file(job), st)))
                          for job, st in jobs])


def _chunks(jobs: Iterable[Job]) -> Iterator[list[Job]]:
    chunk = []
    for job in jobs:
        chunk.append(job)
        if len(chunk) == PARSE_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class ParseInWorkers:
    """Jobs read and parsed by forked worker processes, one per CPU, in chunks."""

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._pool = fork_pool(parse_workers(), start_worker)
        # map() submits each chunk as it is made: the workers start on the first while the
        # parent still makes the rest.
        self._payloads = self._pool.map(read_files, _chunks(jobs))
        self.done = 0  # records handed out so far (start-up progress reads it from another thread)

    def records(self) -> Iterator[tuple[str, FileRecord]]:
        """Each file's record, in job order, as the workers finish their chunks."""
        for payload in self._payloads:
            for rel, raw in marshal.loads(payload):
                self.done += 1
                yield rel, decode_record(raw)

    def __enter__(self) -> ParseInWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(cancel_futures=True)

    def cancel(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
