"""The IDX reader (``skdiffclust.datasets.read_idx``): MNIST's file format; the
generators' parameter checks."""

import gzip

import numpy as np
import pytest

from skdiffclust.datasets import make_celeux_one, make_celeux_two, make_denoising, read_idx

TYPE_BYTES = {"u1": 0x08, "i1": 0x09, ">i2": 0x0B, ">i4": 0x0C, ">f4": 0x0D, ">f8": 0x0E}


def _idx_bytes(array, code):
    header = bytes([0, 0, code, array.ndim])
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


@pytest.mark.parametrize("dtype", list(TYPE_BYTES))
@pytest.mark.parametrize("gzipped", [True, False])
def test_every_idx_element_type_reads_back_its_array(tmp_path, dtype, gzipped):
    rng = np.random.default_rng(0)
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = tmp_path / ("images-idx3" + (".gz" if gzipped else ""))
    data = _idx_bytes(array, TYPE_BYTES[dtype])
    path.write_bytes(gzip.compress(data) if gzipped else data)
    read = read_idx(path)
    assert read.shape == (3, 4, 5) and read.dtype.isnative
    np.testing.assert_array_equal(read, array)
    assert read.flags.writeable  # uint8 and int8 came back read-only: no shuffle


def _whole_gzip():
    return gzip.compress(_idx_bytes(np.arange(6, dtype=np.uint8), 0x08))


@pytest.mark.parametrize("damage", [
    lambda data: data[:len(data) // 2],  # an interrupted download: EOFError before
    lambda data: data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:],  # BadGzipFile (CRC)
    lambda data: _idx_bytes(np.arange(6, dtype=np.uint8), 0x08),  # not gzipped at all
])
def test_a_damaged_gzip_file_is_refused_clearly(tmp_path, damage):
    path = tmp_path / "labels.gz"
    path.write_bytes(damage(_whole_gzip()))
    with pytest.raises(ValueError, match="truncated or corrupt"):
        read_idx(path)


def test_a_gz_suffix_in_capitals_is_gzip_too(tmp_path):
    path = tmp_path / "LABELS.GZ"
    path.write_bytes(_whole_gzip())
    np.testing.assert_array_equal(read_idx(path), np.arange(6))


def test_mnist_shaped_labels(tmp_path):
    labels = np.array([5, 0, 4, 1, 9], dtype=np.uint8)
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(_idx_bytes(labels, 0x08)))
    np.testing.assert_array_equal(read_idx(str(path)), labels)


@pytest.mark.parametrize("data, message", [
    (b"\x1f\x8b\x08\x00", "not an IDX file"),  # a gzip header, read as a plain file
    (b"\x00\x00\x07\x01\x00\x00\x00\x02\x01\x02", "not an IDX file"),  # no type 7
    (b"\x00\x00\x08\x02\x00\x00\x00\x03", "truncated"),  # the header cut short
    (_idx_bytes(np.arange(6, dtype=np.uint8).reshape(2, 3), 0x08)[:-1], "truncated"),
])
def test_a_file_that_is_not_a_whole_idx_file_is_refused(tmp_path, data, message):
    path = tmp_path / "images"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=message):
        read_idx(path)


@pytest.mark.parametrize("make, params", [
    # ran: 2 samples per cluster, NaN data, noise on the negative side
    (make_denoising, dict(n_per_cluster=2.5)), (make_denoising, dict(n_per_cluster=True)),
    (make_denoising, dict(cluster_std=np.nan)), (make_denoising, dict(cluster_std=-1.0)),
    (make_denoising, dict(noise_high=-5.0)),
    # NumPy's messages, naming no argument
    (make_denoising, dict(n_per_cluster=-1)), (make_denoising, dict(noise_high=np.inf)),
    (make_celeux_two, dict(n_samples=-1)), (make_celeux_two, dict(n_samples=2.5)),
    (make_celeux_one, dict(scenario=True)),  # scenario 1
])
def test_generators_refuse_bad_parameters_by_name(make, params):
    with pytest.raises(ValueError, match=next(iter(params))):
        make(**params)
