"""Stored tables: page checksums written and verified, so a corrupt or truncated table is one
sentence naming the file, never silently wrong numbers."""

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
