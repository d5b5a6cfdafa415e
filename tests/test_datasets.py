"""The IDX reader (``skdiffclust.datasets.read_idx``): MNIST's file format; the
MNIST / Fashion-MNIST loader (``load_mnist``): where it looks, what it returns,
what it says when the files are missing; the generators' parameter checks."""

import gzip

import numpy as np
import pytest

from skdiffclust.datasets import (
    DATA_HOME_VARIABLE,
    load_mnist,
    make_celeux_one,
    make_celeux_two,
    make_denoising,
    read_idx,
)

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


# --- load_mnist, on tiny data sets written in the published layout ---------------

def _write_set(folder, *, n_train=4, n_test=3, gzipped=True, seed=0):
    """Four IDX files of random 28 x 28 images and labels in ``folder``; returns them."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for part, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        for name, array in ((f"{part}-images-idx3-ubyte", images),
                            (f"{part}-labels-idx1-ubyte", labels)):
            data = _idx_bytes(array, 0x08)
            path = folder / (name + (".gz" if gzipped else ""))
            path.write_bytes(gzip.compress(data) if gzipped else data)
        written[part] = images, labels
    return written


@pytest.fixture
def no_data_home(monkeypatch, tmp_path):
    """Neither the variable nor anything in the default folder (a new HOME)."""
    monkeypatch.delenv(DATA_HOME_VARIABLE, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.mark.parametrize("gzipped", [True, False])
def test_load_mnist_returns_the_files_images_and_labels(tmp_path, no_data_home, gzipped):
    written = _write_set(tmp_path / "data" / "mnist", gzipped=gzipped)
    mnist = load_mnist(data_home=tmp_path / "data")
    images, labels = written["train"]
    assert mnist.data.shape == (4, 784) and mnist.data.dtype == np.uint8
    np.testing.assert_array_equal(mnist.images, images)
    np.testing.assert_array_equal(mnist.data, images.reshape(4, -1))
    assert np.shares_memory(mnist.images, mnist.data)
    assert mnist.target.dtype == np.int64
    np.testing.assert_array_equal(mnist.target, labels)
    np.testing.assert_array_equal(mnist.target_names, np.arange(10))
    assert "LeCun" in mnist.DESCR

    X, y = load_mnist(subset="test", data_home=str(tmp_path / "data"), return_X_y=True)
    np.testing.assert_array_equal(X, written["t10k"][0].reshape(3, -1))
    np.testing.assert_array_equal(y, written["t10k"][1])


def test_subset_all_is_the_training_images_then_the_test_images(tmp_path, no_data_home):
    written = _write_set(tmp_path / "mnist")
    mnist = load_mnist(subset="all", data_home=tmp_path)
    np.testing.assert_array_equal(
        mnist.images, np.concatenate([written["train"][0], written["t10k"][0]]))
    np.testing.assert_array_equal(
        mnist.target, np.concatenate([written["train"][1], written["t10k"][1]]))


def test_fashion_mnist_is_read_from_its_own_folder(tmp_path, no_data_home):
    _write_set(tmp_path / "mnist", seed=0)
    fashion = _write_set(tmp_path / "fashion-mnist", seed=1, gzipped=False)
    data = load_mnist(kind="fashion-mnist", subset="test", data_home=tmp_path)
    np.testing.assert_array_equal(data.images, fashion["t10k"][0])
    assert list(data.target_names[[0, 9]]) == ["T-shirt/top", "Ankle boot"]
    assert "Fashion-MNIST" in data.DESCR


def test_the_variable_then_the_default_folder(tmp_path, monkeypatch, no_data_home):
    """data_home first, else the environment variable's folder, else
    ~/skdiffclust_data."""
    default = _write_set(tmp_path / "home" / "skdiffclust_data" / "mnist", seed=0)
    from_variable = _write_set(tmp_path / "variable" / "mnist", seed=1)
    argument = _write_set(tmp_path / "argument" / "mnist", seed=2)

    def first_label(**kwargs):
        return load_mnist(subset="test", **kwargs).target

    np.testing.assert_array_equal(first_label(), default["t10k"][1])
    monkeypatch.setenv(DATA_HOME_VARIABLE, str(tmp_path / "variable"))
    np.testing.assert_array_equal(first_label(), from_variable["t10k"][1])
    np.testing.assert_array_equal(first_label(data_home=tmp_path / "argument"),
                                  argument["t10k"][1])
    monkeypatch.setenv(DATA_HOME_VARIABLE, "")  # empty: not set
    np.testing.assert_array_equal(first_label(), default["t10k"][1])


@pytest.mark.parametrize("given, source", [
    ("argument", "is the data_home argument"),
    ("variable", f"is the {DATA_HOME_VARIABLE} environment variable"),
    ("default", "is the default, ~/skdiffclust_data"),
])
def test_missing_files_are_named_with_the_folder_and_how_to_get_them(
        tmp_path, monkeypatch, no_data_home, given, source):
    home = tmp_path / "home" / "skdiffclust_data" if given == "default" else tmp_path / given
    if given == "variable":
        monkeypatch.setenv(DATA_HOME_VARIABLE, str(home))
    kwargs = {"data_home": home} if given == "argument" else {}
    with pytest.raises(FileNotFoundError) as error:
        load_mnist(**kwargs)
    message = str(error.value)
    for told in (f"looked in {home / 'mnist'}, which does not exist", source,
                 "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                 "https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "http://yann.lecun.com/exdb/mnist/", DATA_HOME_VARIABLE,
                 "fetch_openml('mnist_784', return_X_y=True)"):
        assert told in message, told


def test_a_partial_folder_names_the_files_it_lacks(tmp_path, no_data_home):
    _write_set(tmp_path / "fashion-mnist")
    (tmp_path / "fashion-mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    assert load_mnist(kind="fashion-mnist", data_home=tmp_path).target.shape == (4,)
    with pytest.raises(FileNotFoundError) as error:
        load_mnist(kind="fashion-mnist", subset="test", data_home=tmp_path)
    message = str(error.value)
    assert "lacks t10k-labels-idx1-ubyte[.gz]" in message
    assert "t10k-images-idx3-ubyte[.gz]" not in message
    assert "fashion-mnist.s3-website" in message and "fetch_openml('Fashion-MNIST'" in message


def test_the_data_set_folder_itself_given_as_data_home_is_explained(tmp_path, no_data_home):
    _write_set(tmp_path / "mnist")
    with pytest.raises(FileNotFoundError, match="the data folder is the one that holds mnist/"):
        load_mnist(data_home=tmp_path / "mnist")


def test_images_and_labels_that_do_not_match_are_refused(tmp_path, no_data_home):
    _write_set(tmp_path / "mnist", n_train=4)
    labels = _idx_bytes(np.arange(5, dtype=np.uint8), 0x08)
    (tmp_path / "mnist" / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))
    with pytest.raises(ValueError) as error:
        load_mnist(data_home=tmp_path)
    message = str(error.value)
    for told in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "4 images", "5 labels"):
        assert told in message, told


@pytest.mark.parametrize("params", [dict(kind="MNIST"), dict(subset="validation"),
                                    dict(data_home=3), dict(return_X_y="yes")])
def test_load_mnist_refuses_bad_parameters_by_name(params):
    with pytest.raises(ValueError, match=next(iter(params))):
        load_mnist(**params)


# --- load_mnist on files that are IDX files but not MNIST's ------------------------

def _replace(folder, name, array, code=0x08):
    """Overwrite one of ``_write_set``'s files with ``array``, of IDX type ``code``."""
    (folder / f"{name}.gz").write_bytes(gzip.compress(_idx_bytes(array, code)))


@pytest.mark.parametrize("labels, told", [
    (np.array([3, 20, 9, 1], dtype=np.uint8), "[20]"),
    (np.array([3, 253, 10, 253], dtype=np.uint8), "[10, 253]"),  # -3 written as uint8
])
def test_labels_outside_0_to_9_are_refused(tmp_path, no_data_home, labels, told):
    _write_set(tmp_path / "mnist")
    _replace(tmp_path / "mnist", "train-labels-idx1-ubyte", labels)
    with pytest.raises(ValueError) as error:
        load_mnist(data_home=tmp_path)
    message = str(error.value)
    for expected in ("train-labels-idx1-ubyte.gz", told, "0 to 9"):
        assert expected in message, expected


def _refusal_of(tmp_path, name, values, code):
    """The ValueError's message of load_mnist on a set whose file ``name`` holds
    ``values`` (IDX type ``code``)."""
    _write_set(tmp_path / "mnist")
    _replace(tmp_path / "mnist", name, values, code)
    with pytest.raises(ValueError) as error:
        load_mnist(data_home=tmp_path)
    return str(error.value)


@pytest.mark.parametrize("labels, code, found", [
    (np.array([-3, 1, 2, 3], dtype=np.int8), 0x09, "int8"),  # -3 as a signed byte
    (np.array([1, 2, 3, 4], dtype=">i4"), 0x0C, "int32"),  # right values, wrong type
    (np.array([1, 2, 3, 4], dtype=">f4"), 0x0D, "float32"),
    (np.array([[1], [2], [3], [4]], dtype=np.uint8), 0x08, "shape (4, 1)"),
])
def test_labels_that_are_not_a_uint8_vector_are_refused(tmp_path, no_data_home, labels,
                                                        code, found):
    message = _refusal_of(tmp_path, "train-labels-idx1-ubyte", labels, code)
    for expected in ("train-labels-idx1-ubyte.gz", found, "uint8", "(n,)"):
        assert expected in message, expected


@pytest.mark.parametrize("images, code, found", [
    (np.zeros((4, 28, 28), dtype=">f4"), 0x0D, "float32"),
    (np.zeros((4, 28, 28), dtype=np.int8), 0x09, "int8"),
    (np.zeros((4, 10, 10), dtype=np.uint8), 0x08, "shape (4, 10, 10)"),
    (np.zeros((4, 784), dtype=np.uint8), 0x08, "shape (4, 784)"),  # flat rows
    (np.zeros((4, 28, 28, 1), dtype=np.uint8), 0x08, "shape (4, 28, 28, 1)"),
])
def test_images_that_are_not_uint8_28_by_28_are_refused(tmp_path, no_data_home, images,
                                                        code, found):
    message = _refusal_of(tmp_path, "train-images-idx3-ubyte", images, code)
    for expected in ("train-images-idx3-ubyte.gz", found, "uint8", "(n, 28, 28)"):
        assert expected in message, expected


@pytest.mark.parametrize("empty", ["images", "labels", "both"])
def test_files_of_no_images_are_refused(tmp_path, no_data_home, empty):
    """Not NumPy's 'cannot reshape array of size 0' (0 images and 0 labels)."""
    _write_set(tmp_path / "mnist")
    if empty in ("images", "both"):
        _replace(tmp_path / "mnist", "t10k-images-idx3-ubyte",
                 np.zeros((0, 28, 28), dtype=np.uint8))
    if empty in ("labels", "both"):
        _replace(tmp_path / "mnist", "t10k-labels-idx1-ubyte", np.zeros(0, dtype=np.uint8))
    name = "t10k-labels-idx1-ubyte.gz" if empty == "labels" else "t10k-images-idx3-ubyte.gz"
    for subset in ("test", "all"):
        with pytest.raises(ValueError, match=rf"{name} holds no (images|labels)"):
            load_mnist(subset=subset, data_home=tmp_path)


@pytest.mark.parametrize("damage", [lambda data: data[:-1], lambda data: data + b"\x00"])
@pytest.mark.parametrize("name", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"])
def test_files_of_more_or_fewer_bytes_than_announced_are_refused(tmp_path, no_data_home,
                                                                 damage, name):
    _write_set(tmp_path / "mnist", gzipped=False)
    path = tmp_path / "mnist" / name
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=f"{name} holds .* bytes where its IDX header"):
        load_mnist(data_home=tmp_path)
    # the other subset is still read
    assert load_mnist(subset="test", data_home=tmp_path).target.shape == (3,)


@pytest.mark.parametrize("where", ["argument", "variable", "data set folder"])
def test_a_file_where_a_folder_is_expected_is_named(tmp_path, monkeypatch, no_data_home,
                                                    where):
    not_a_folder = tmp_path / ("data" if where != "data set folder" else "data/mnist")
    not_a_folder.parent.mkdir(parents=True, exist_ok=True)
    not_a_folder.write_bytes(b"not a folder")
    if where == "variable":
        monkeypatch.setenv(DATA_HOME_VARIABLE, str(tmp_path / "data"))
    kwargs = {} if where == "variable" else {"data_home": tmp_path / "data"}
    with pytest.raises(NotADirectoryError) as error:
        load_mnist(**kwargs)
    message = str(error.value)
    assert f"{not_a_folder} is a file, not a folder" in message
    assert "does not exist" not in message
    if where == "variable":
        assert f"the {DATA_HOME_VARIABLE} environment variable" in message
