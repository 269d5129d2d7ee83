"""Flight Recorder dumps: real gloo dumps from PyTorch 2.13 (tests/fixtures/fr/generate.py) and hostile pickles."""
from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from correlator.discover import discover
from correlator.parsers.files import parse_sources
from correlator.parsers.results import FileResult
from correlator.parsers.flight_recorder import MAX_ENTRIES, claims, load_dump, normalise_op

FIXTURES = Path(__file__).parent / "fixtures" / "fr"
HEALTHY_PG0_OPS = ["BROADCAST"] + ["ALLREDUCE"] * 4 + ["ALLGATHER", "BARRIER"]


def parse_dir(root: Path) -> dict[str, FileResult]:
    sources, _ = discover(root)
    return {r.path: r for r in parse_sources(sources)}


def table(result: FileResult, name: str) -> pl.DataFrame:
    return pl.from_arrow(pa.concat_tables(result.tables[name]))


@pytest.fixture(scope="module")
def fixtures() -> dict[str, FileResult]:
    return parse_dir(FIXTURES)


def test_healthy_pickle_dump_gives_one_row_per_collective(fixtures):
    result = fixtures["healthy/nccl_trace_rank_0"]
    assert result.skip_reason is None and "flight_recorder" in result.kinds
    rows = table(result, "collectives")
    assert set(rows["rank"]) == {0} and set(rows["counter"]) == {"fr_seq"}
    pg0 = rows.filter(pl.col("pg") == "0")
    assert pg0["seq"].to_list() == list(range(1, 8))
    assert pg0["op"].to_list() == HEALTHY_PG0_OPS
    pg1 = rows.filter(pl.col("pg") == "1")   # the new_group sub-group: its own SeqNum from 1
    assert pg1["seq"].to_list() == [1, 2, 3, 4] and set(pg1["op"]) == {"ALLREDUCE"}
    allreduce = pg0.row(1, named=True)
    assert (allreduce["numel_in"], allreduce["dtype"], allreduce["timeout_ms"]) == (8, "Float", 4000)
    assert set(rows["state"]) == {"scheduled"}   # gloo records no start/completion times
    assert rows["ts"].dtype == pl.Datetime("us", "UTC") and rows["ts"].null_count() == 0
    assert rows["line"].to_list() == list(range(1, 12))


def test_events_cite_entries_and_pg_status(fixtures):
    result = fixtures["healthy/nccl_trace_rank_0"]
    events = table(result, "events")
    entries = events.filter(pl.col("kind") == "fr_entry")
    assert entries["line"].to_list() == list(range(1, 12))
    assert entries["text"][0].startswith("FR collective_seq_id=1 pg_id=0 op=BROADCAST profiling_name=gloo:broadcast")
    status = table(result, "pg_status").sort("pg")
    assert status.select("pg", "last_enqueued", "last_completed").rows() == [("0", 7, 7), ("1", 4, 4)]
    assert set(status["line"]) <= set(events.filter(pl.col("kind") == "fr_pg_status")["line"])


def test_json_dump_reads_like_the_pickle_of_the_other_rank(fixtures):
    as_json = table(fixtures["healthy/nccl_trace_rank_1.json"], "collectives")
    as_pickle = table(fixtures["healthy/nccl_trace_rank_0"], "collectives")
    assert set(as_json["rank"]) == {1}
    same = ["pg", "counter", "seq", "op", "numel_in", "dtype", "timeout_ms"]
    assert as_json.select(same).equals(as_pickle.select(same))
    status = table(fixtures["healthy/nccl_trace_rank_1.json"], "pg_status")   # numbers are strings in JSON
    assert sorted(status["last_enqueued"]) == [4, 7]


def test_hang_dumps_show_the_skipped_collective(fixtures):
    last = {}
    for path in ("hang/nccl_trace_rank_0", "hang/nccl_trace_rank_2"):
        rows = table(fixtures[path], "collectives").filter(pl.col("pg") == "0")
        last[rows["rank"][0]] = rows.sort("seq").row(-1, named=True)
    assert last[0]["seq"] == 4 and last[0]["op"] == "ALLREDUCE"   # rank 0 issued step 3's all_reduce
    assert last[2]["seq"] == 3                                      # rank 2 never did
    enqueued = {table(fixtures[p], "pg_status")["last_enqueued"][0] for p in ("hang/nccl_trace_rank_0",
                                                                               "hang/nccl_trace_rank_2")}
    assert enqueued == {3, 4}


class _Exploit:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _write(root: Path, name: str, data: bytes) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_bytes(data)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path, protocol):
    marker = tmp_path / "pwned_by_fr_dump"
    real = pickle.loads((FIXTURES / "hang" / "nccl_trace_rank_0").read_bytes())  # trusted: our own fixture
    real["entries"][1]["frames"] = _Exploit(marker)                            # hidden inside a real dump
    _write(tmp_path / "logs", "nccl_trace_rank_0", pickle.dumps(real, protocol=protocol))
    _write(tmp_path / "logs", "dump.pkl", pickle.dumps(_Exploit(marker), protocol=protocol))
    results = parse_dir(tmp_path / "logs")
    assert not marker.exists()
    pickle.loads((tmp_path / "logs" / "dump.pkl").read_bytes())   # control: the payload is live
    assert marker.exists()
    for result in results.values():
        assert "refused: pickle references os.system" in result.skip_reason
        assert "Flight Recorder dumps contain only plain data" in result.skip_reason
        assert not result.tables


def test_truncated_and_random_bytes_do_not_raise(tmp_path):
    dump = (FIXTURES / "healthy" / "nccl_trace_rank_0").read_bytes()
    rng = random.Random(7)
    _write(tmp_path, "nccl_trace_rank_0", dump[: len(dump) // 2])
    _write(tmp_path, "nccl_trace_rank_1", bytes(rng.randrange(256) for _ in range(4096)))
    _write(tmp_path, "nccl_trace_rank_2", b"\x80\x04" + bytes(rng.randrange(256) for _ in range(4096)))
    _write(tmp_path, "nccl_trace_rank_3.json", (FIXTURES / "healthy" / "nccl_trace_rank_1.json").read_bytes()[:900])
    results = parse_dir(tmp_path)
    assert "not a valid flight_recorder" in results["nccl_trace_rank_0"].skip_reason
    assert "not a valid flight_recorder" in results["nccl_trace_rank_3.json"].skip_reason
    assert "not a valid flight_recorder" in results["nccl_trace_rank_2"].skip_reason
    # Random bytes without a pickle header are no dump: skipped as binary or read as an (unparsed) text log.
    assert "collectives" not in results["nccl_trace_rank_1"].tables
    refused = ("nccl_trace_rank_0", "nccl_trace_rank_2", "nccl_trace_rank_3.json")
    assert not any(results[name].tables for name in refused)


def test_pickle_bombs_are_bounded(tmp_path):
    shared_entry = {"collective_seq_id": 1, "profiling_name": "nccl:all_reduce"}
    _write(tmp_path, "nccl_trace_rank_0", pickle.dumps({"entries": [shared_entry] * (MAX_ENTRIES + 1)}))
    nested = [1]
    for _ in range(80):   # 2**80 leaves when walked, a few hundred bytes pickled
        nested = [nested, nested]
    bomb_entry = dict(shared_entry, input_sizes=nested, input_dtypes=[nested], pg_id=0)
    _write(tmp_path, "nccl_trace_rank_1", pickle.dumps({"entries": [bomb_entry], "pg_config": {"x": nested}}))
    results = parse_dir(tmp_path)
    assert "more than any Flight Recorder buffer" in results["nccl_trace_rank_0"].skip_reason
    row = table(results["nccl_trace_rank_1"], "collectives").row(0, named=True)
    assert (row["op"], row["seq"], row["numel_in"], row["dtype"]) == ("ALLREDUCE", 1, None, None)


def test_p2p_entries_count_on_their_own_counter(tmp_path):
    entry = {"pg_id": 2, "process_group": ("5", "pp"), "collective_seq_id": 0, "p2p_seq_id": 9,
             "profiling_name": "nccl:send 0->1", "is_p2p": True, "input_sizes": [[4, 4]],
             "input_dtypes": ["BFloat16"], "state": "started", "time_created_ns": 1_795_990_134_225_549_632}
    dump = {"version": "2.10", "pg_config": {"5": {"name": "5", "desc": "pp", "ranks": "[4, 7]"}},
            "pg_status": {"5": {"last_enqueued_collective": 0, "last_started_collective": -1,
                                "last_completed_collective": 0}},
            "entries": [entry]}
    _write(tmp_path / "node3", "fr_dump_7.json", json.dumps(dump).encode())
    result = parse_dir(tmp_path)["node3/fr_dump_7.json"]
    row = table(result, "collectives").row(0, named=True)
    assert (row["counter"], row["seq"], row["op"], row["pg"], row["pg_rank"]) == ("fr_p2p_seq", 9, "SEND", "2", 1)
    assert (row["rank"], row["host"], row["numel_in"], row["state"]) == (7, "node3", 16, "started")
    assert table(result, "pg_status")["pg"].to_list() == ["2"]   # keyed by GUID "5" in the dump


@pytest.mark.parametrize("name, expected", [
    ("nccl:all_reduce", "ALLREDUCE"), ("gloo:broadcast", "BROADCAST"), ("nccl:recv 3<-0", "RECV"),
    ("nccl:_all_gather_base", "_ALLGATHER_BASE"), ("nccl:all_gather_into_tensor_coalesced", "ALLGATHER_COALESCED"),
    ("nccl:reduce_scatter_tensor_coalesced", "REDUCE_SCATTER_TENSOR_COALESCED"), ("nccl:all_gather_v", "ALL_GATHER_V"),
    (None, None),
])
def test_op_names_match_pytorch_op_types(name, expected):
    assert normalise_op(name) == expected


def test_claims_only_dumps(tmp_path):
    json_dump = (FIXTURES / "healthy" / "nccl_trace_rank_1.json").read_bytes()[:8192]
    assert claims("x/nccl_trace_rank_1.json", json_dump)
    assert claims("anything.bin", pickle.dumps({"entries": []}))
    assert not claims("fr.log", b"2026-11-29 21:09:01,857 INFO [rank 0] step 1/10 loss 2.3\n")
    assert not claims("error.json", b'{"message": {"message": "RuntimeError"}, "version": 1}')



@pytest.mark.parametrize("data, message", [
    (b"(ios\nsystem\nS'id'\n.", "refused: pickle references os.system"),        # INST, protocol 0
    (b"\x80\x02(cos\nsystem\no.", "refused: pickle references os.system"),      # OBJ, protocol 1+
    (b"\x80\x02X\x01\x00\x00\x00aQ.", "refused: pickle uses persistent ids"),   # BINPERSID
    (b"\x80\x05\x97.", "out-of-band"),                                         # NEXT_BUFFER, protocol 5
    (b"\x80\x06}.", "unsupported pickle protocol"),
])
def test_pickle_protocol_oddities_are_refused(data, message):
    with pytest.raises((pickle.UnpicklingError, ValueError), match=message):
        load_dump(data)


def test_fr_tables_keep_the_dump_as_it_is(tmp_path):
    """fr_dumps / fr_groups / fr_entries: peers from the names, p2p where the dump omits is_p2p,
    the marker of a batch of sends/recvs as p2p, a host from `<host>_<rank>`, hand-made values
    (seq ids as strings, one dtype string), and a JSON dump with no entries at all."""
    send = {"pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": "3", "p2p_seq_id": "7",
            "profiling_name": "nccl:send 1->2", "input_sizes": [(4, 4)], "output_sizes": [[4, 4]],
            "input_dtypes": "float32", "state": "started", "record_id": 12}
    marker = dict(send, profiling_name="nccl:coalesced", input_sizes=[], output_sizes=[], record_id=13)
    dump = {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
            "entries": [send, marker]}
    _write(tmp_path, "host-a_1", pickle.dumps(dump, protocol=2))
    empty = {"version": "2.10", "pg_config": {"0": {"desc": "default_pg", "name": "0", "ranks": "[0,1,2,3]"}},
             "pg_status": {}, "comm_lib_version": "2.21.5"}
    _write(tmp_path, "nccl_trace_rank_3.json", json.dumps(empty).encode())
    results = parse_dir(tmp_path)
    rows = table(results["host-a_1"], "fr_entries").select(
        "rank", "host", "is_p2p", "marker", "fr_op", "op", "local_src", "local_dst", "collective_seq_id",
        "p2p_seq_id", "in_sizes", "in_numel", "in_dtypes", "state").rows()
    assert rows == [(1, "host-a", True, False, "send", "SEND", 1, 2, 3, 7, "[[4,4]]", 16, "float32", "started"),
                    (1, "host-a", True, True, "coalesced", "COALESCED", None, None, 3, 7, "[]", 0, "float32", "started")]
    assert table(results["host-a_1"], "fr_dumps").select("rank", "version", "first_record_id", "has_state").rows() == [
        (1, "2.4", 12, True)]
    assert table(results["host-a_1"], "fr_groups").select("pg_name", "ranks").rows() == [("0", [0, 1, 2, 3])]
    assert table(results["host-a_1"], "processes").select("rank", "world_size").rows() == [(1, 4)]
    assert results["nccl_trace_rank_3.json"].skip_reason is None
    assert table(results["nccl_trace_rank_3.json"], "fr_dumps").select("rank", "entries").rows() == [(3, 0)]
    assert "fr_entries" not in results["nccl_trace_rank_3.json"].tables
