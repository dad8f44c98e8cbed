"""The HDF5 layout (data.h5_format): mask run-length coding and the layout check, on the converted samples."""

import shutil

import h5py
import numpy as np
import pytest

from simplepose.data.h5_format import check_layout, decode_mask_runs, encode_mask_runs
from simplepose.utils.errors import DataFileError


def test_mask_runs_decode_any_band_of_rows(sample_h5):
    """Decoding rows y0 .. y1 - 1 straight from the runs (what the dataset does for the rows its warp samples)
    gives those rows of the full decode, for every image and bands of every kind (edges, one row, all)."""
    rng = np.random.default_rng(0)
    with h5py.File(sample_h5) as f:
        mo = f["images/mask_offsets"][:]
        for i in range(len(f["images/id"])):
            h, w = int(f["images/height"][i]), int(f["images/width"][i])
            values = f["images/mask_values"][mo[i] : mo[i + 1]]
            lengths = f["images/mask_lengths"][mo[i] : mo[i + 1]]
            full = decode_mask_runs(values, lengths, h, w)
            pairs = np.stack([values, 255 - values], axis=1)  # trailing axis, as the dataset uses (R, 2) runs
            y0 = int(rng.integers(0, h))
            for rows in [(0, h), (0, 1), (h - 1, h), (y0, int(rng.integers(y0 + 1, h + 1)))]:
                np.testing.assert_array_equal(decode_mask_runs(values, lengths, h, w, rows), full[rows[0] : rows[1]])
                band = decode_mask_runs(pairs, lengths, h, w, rows)
                np.testing.assert_array_equal(band[..., 0], full[rows[0] : rows[1]])


def test_mask_runs_encode_back_to_the_stored_runs(sample_h5):
    """The stored runs are maximal: decoding an image's mask code and encoding it again gives them back."""
    with h5py.File(sample_h5) as f:
        mo = f["images/mask_offsets"][:]
        for i in range(len(f["images/id"])):
            values = f["images/mask_values"][mo[i] : mo[i + 1]]
            lengths = f["images/mask_lengths"][mo[i] : mo[i + 1]]
            code = decode_mask_runs(values, lengths, int(f["images/height"][i]), int(f["images/width"][i]))
            again = encode_mask_runs(code)
            assert again[0].dtype == np.uint8 and again[1].dtype == np.uint32
            np.testing.assert_array_equal(again[0], values)
            np.testing.assert_array_equal(again[1], lengths)


def test_check_layout_names_the_file_and_what_it_lacks(synthetic_sample_h5, tmp_path):
    path = tmp_path / "damaged.h5"
    shutil.copyfile(synthetic_sample_h5, path)
    with h5py.File(path, "r+") as f:
        del f["people/bbox"]
    with h5py.File(path, "r") as f, pytest.raises(DataFileError) as e:
        check_layout(f, path)
    assert (e.value.file, e.value.key) == (str(path), "people/bbox")
    with h5py.File(path, "r+") as f:
        del f.attrs["settings"]
    with h5py.File(path, "r") as f, pytest.raises(DataFileError) as e:
        check_layout(f, path)
    assert (e.value.file, e.value.key) == (str(path), "settings")
