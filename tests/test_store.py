"""Stored tables: page checksums written and verified, so a corrupt or truncated table is one
sentence naming the file, never silently wrong numbers."""

import io
import json
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from yolo_sm.contract import store
from yolo_sm.contract.errors import UserError


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"median_ms": rng.random(2000), "batch": rng.integers(1, 64, 2000)})
    path = tmp_path / "t.parquet"
    store.write_atomic(df, path, {"spec": {"x": 1}})
    return df, path


def _flipped(path, out, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    out.write_bytes(bytes(data))
    return out


def _silent_flips(path, tmp_path):
    """Copies of ``path`` with one byte flipped inside a data page that an unverified read
    takes without complaint, returning other numbers than were written."""
    md = pq.ParquetFile(path).metadata
    good = pq.read_table(path).to_pandas()
    found = []
    for c in range(md.num_columns):
        col = md.row_group(0).column(c)
        start = col.dictionary_page_offset or col.data_page_offset
        for k, offset in enumerate(range(start + 40, start + col.total_compressed_size, 97)):
            bad = _flipped(path, tmp_path / f"bad_{c}_{k}.parquet", offset)
            try:
                back = pq.read_table(bad).to_pandas()  # no verification
            except Exception:  # noqa: BLE001 - this flip breaks decoding anyway
                continue
            if not back.equals(good):
                found.append(bad)
    return found


def test_a_flipped_byte_is_an_error_not_wrong_numbers(table, tmp_path):
    df, path = table
    pd.testing.assert_frame_equal(store.read_frame(path), df)
    silent = _silent_flips(path, tmp_path)
    assert silent, "no flip went unnoticed without checksums: the test would prove nothing"
    for bad in silent:
        for read in (store.read_frame, store.read_table, store.read_arrow):
            with pytest.raises(UserError, match="corrupt or truncated") as err:
                read(bad)
            assert str(bad) in str(err.value) and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.9, 0.999])
def test_a_truncated_table_is_one_sentence_naming_the_file(table, tmp_path, keep):
    _, path = table
    data = path.read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(UserError, match="not a readable parquet file") as err:
        store.read_frame(cut)
    assert str(cut) in str(err.value) and len(str(err.value).splitlines()) == 1


def test_read_frame_of_a_missing_file_and_a_column_subset(table, tmp_path):
    _, path = table
    with pytest.raises(UserError, match="does not exist"):
        store.read_frame(tmp_path / "nope.parquet")
    assert list(store.read_frame(path, columns=["batch"]).columns) == ["batch"]
    assert store.read_table(tmp_path / "nope.parquet").empty  # an output not written yet


def test_a_table_written_without_checksums_still_reads(tmp_path):
    path = tmp_path / "old.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)  # pandas' default: no page checksums
    assert store.read_frame(path).a.tolist() == [1, 2]


# --- temporaries, paths, locks ----------------------------------------------------------------


def test_a_planted_symlink_is_replaced_never_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "t.parquet"
    out.symlink_to(victim)  # a link where the table goes
    for pid_guess in range(os.getpid() - 2, os.getpid() + 3):  # the old predictable names
        (tmp_path / f".t.parquet.{pid_guess}.partial").symlink_to(victim)
    store.write_atomic(pd.DataFrame({"a": [1]}), out)
    assert victim.read_text() == "keep me"
    assert not out.is_symlink() and store.read_frame(out).a.tolist() == [1]
    store.write_text_atomic(tmp_path / "m.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")) == sorted(
        f".t.parquet.{p}.partial" for p in range(os.getpid() - 2, os.getpid() + 3)
    )  # only the planted links, untouched


def test_temporary_names_are_unique_and_stale_ones_are_removed(tmp_path):
    out = tmp_path / "t.parquet"
    names = {store.temp_path(out).name for _ in range(20)}
    assert len(names) == 20 and all(n.startswith(f".t.parquet.{os.getpid()}.") for n in names)
    dead = tmp_path / ".t.parquet.999999999.abcdefgh.partial"
    dead.write_bytes(b"")
    removed = store.remove_stale_partials(out)
    assert dead in removed and not dead.exists()
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".partial")]) == 20  # ours


@pytest.mark.parametrize("rel", ["../x.parquet", "/etc/passwd", "a/../../x", "", ".", "a\0b"])
def test_paths_outside_their_root_are_one_sentence(tmp_path, rel):
    with pytest.raises(UserError) as err:
        store.inside(tmp_path, rel, "plan step s's out")
    assert "plan step s's out" in str(err.value) and len(str(err.value).splitlines()) == 1


def test_inside_keeps_a_path_in_its_root(tmp_path):
    assert store.inside(tmp_path, "sub/../t.parquet", "x") == tmp_path / "t.parquet"


def test_output_lock_is_reentrant_and_names_its_holder(tmp_path):
    out = tmp_path / "t.parquet"
    with store.output_lock(out):
        with store.output_lock(out):  # the same process may take it again (collect -> sweep)
            holder = store.lock_holder(out)
            assert holder["pid"] == os.getpid() and holder["host"]
        assert store.lock_path(out).exists()
    assert not store.lock_path(out).exists() and store.lock_holder(out) is None
    assert store.lock_path(tmp_path) == tmp_path / ".yolo_sm.lock"  # a folder's lock


def test_a_lock_left_by_another_host_is_not_taken(tmp_path):
    out = tmp_path / "t.parquet"
    store.lock_path(out).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "x"}))
    with pytest.raises(UserError, match="another host"):
        with store.output_lock(out):
            pass


def test_the_footer_digest_catches_a_renamed_column(tmp_path):
    path = tmp_path / "t.parquet"
    store.write_atomic(pd.DataFrame({"median_ms": [1.0, 2.0]}), path)
    data = path.read_bytes()
    renamed = data.replace(b"median_ms", b"mediam_ms")  # in the schema and every metadata
    assert pd.read_parquet(io.BytesIO(renamed)).columns.tolist() == ["mediam_ms"]  # unchecked
    path.write_bytes(renamed)
    with pytest.raises(UserError, match="digest"):
        store.read_frame(path)
