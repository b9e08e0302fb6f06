"""swi.dask on a dask.distributed LocalCluster of two worker processes: the parts' labels
are bitwise the one-process run's, and a worker killed mid-run is retried by Dask without
corrupting the store."""

import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (python3-distributed)")
zarr = pytest.importorskip("zarr", reason="zarr is not installed (python3-zarr)")

import dask_nets  # noqa: E402
import swi  # noqa: E402
import swi.dask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    x = np.random.default_rng(3).standard_normal((70, 45, 38)).astype(np.float32)
    zarr.save_array(str(d / "in.zarr"), x, chunks=(20, 20, 20))
    return d, x


def _reference(x, net, sw=3, **kw):
    return swi.sliding_window_inference(x[None, None], (24, 20, 16), sw, net, reduce="argmax", **kw)[0, 0]


def test_part_boxes_cover_once_on_chunk_edges():
    boxes = swi.dask.part_boxes((70, 45, 38), (3, 2, 1), (16, 16, 16))
    cover = np.zeros((70, 45, 38), np.int32)
    for lo, hi in boxes:
        assert all(a % 16 == 0 for a in lo)
        assert all(b % 16 == 0 or b == n for b, n in zip(hi, (70, 45, 38)))
        cover[tuple(slice(a, b) for a, b in zip(lo, hi))] += 1
    assert len(boxes) == 6 and np.all(cover == 1)


def test_a_region_is_bitwise_the_whole_run_inside(client, volume):
    d, x = volume
    out = str(d / "labels-region.zarr")
    region = ((5, 30), (20, 41), (3, 30))  # meets 2 of the 4 boxes of (4, 1, 1)
    swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.make_numpy_net, (24, 20, 16), 3, overlap=0.4,
                     mode="gaussian", grid=(4, 1, 1), chunks=16, classes=4, region=region)
    got = zarr.open(out, mode="r")[:]
    want = _reference(x, dask_nets.numpy_net, overlap=0.4, mode="gaussian")
    inside = np.zeros(x.shape, bool)
    inside[tuple(slice(a, b) for a, b in region)] = True
    assert np.array_equal(got[inside], want[inside]) and not got[~inside].any()
    with pytest.raises(ValueError, match="holds no voxel"):
        swi.dask.segment(client, str(d / "in.zarr"), str(d / "none.zarr"), dask_nets.make_numpy_net, 24,
                         region=((80, 90), (0, 1), (0, 1)))


@pytest.mark.parametrize("grid", [(3, 1, 1), (2, 2, 2)])
def test_parts_are_bitwise_the_whole_run(client, volume, grid):
    d, x = volume
    out = str(d / f"labels-{grid[0]}{grid[1]}{grid[2]}.zarr")
    swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.make_numpy_net, (24, 20, 16), 3, overlap=0.4,
                     mode="gaussian", grid=grid, chunks=16, classes=4)
    got = zarr.open(out, mode="r")[:]
    want = _reference(x, dask_nets.numpy_net, overlap=0.4, mode="gaussian")
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    assert not os.path.exists(os.path.join(out, ".swi-incomplete"))
    assert len(np.unique(got)) > 1


def test_store_carries_its_class_table_and_the_inputs_chunks(client, volume):
    """As the command's stores: the class table (swi_classes: label-value, name, rgba) and,
    without chunks=, the input's chunking."""
    d, x = volume
    out = str(d / "meaning.zarr")
    swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.make_numpy_net, (24, 20, 16), 3, grid=(2, 1, 1))
    z = zarr.open(out, mode="r")
    assert z.chunks == (20, 20, 20)
    table = z.attrs["swi_classes"]
    assert [c["label-value"] for c in table] == [0, 1, 2, 3]
    assert [c["name"] for c in table] == ["background", "label_1", "label_2", "label_3"]
    assert table[0]["rgba"][3] == 0 and all(c["rgba"][3] == 255 for c in table[1:])
    assert len({tuple(c["rgba"]) for c in table}) == 4


def test_torch_factory_and_dask_array_input(client, volume):
    torch = pytest.importorskip("torch")
    da = pytest.importorskip("dask.array")
    d, x = volume
    out = str(d / "torch.zarr")
    swi.dask.segment(client, da.from_array(x, chunks=(35, 45, 38)), out, dask_nets.make_torch_net, (24, 20, 16), 2,
                     grid=(2, 1, 1), chunks=16)
    net = dask_nets.make_torch_net()
    with torch.no_grad():
        want = swi.sliding_window_inference(torch.from_numpy(x)[None, None], (24, 20, 16), 2, net,
                                            reduce="argmax")[0, 0].numpy()
    assert np.array_equal(zarr.open(out, mode="r")[:], want)


def test_a_killed_worker_is_retried_without_corrupting_the_store(client, volume):
    d, x = volume
    marker = str(d / "died")
    out = str(d / "retried.zarr")
    swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.DieOnce(marker), (24, 20, 16), 3, grid=(4, 1, 1),
                     chunks=16)
    assert os.path.exists(marker)  # a worker did die
    assert np.array_equal(zarr.open(out, mode="r")[:], _reference(x, dask_nets.numpy_net))


def test_output_rules(client, volume):
    d, _x = volume
    with pytest.raises(ValueError, match="same file as input"):
        swi.dask.segment(client, str(d / "in.zarr"), str(d / "in.zarr"), dask_nets.make_numpy_net, 24, force=True)
    (d / "mine").mkdir()
    (d / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="not a Zarr array"):
        swi.dask.segment(client, str(d / "in.zarr"), str(d / "mine"), dask_nets.make_numpy_net, 24, force=True)
    assert (d / "mine" / "notes.txt").read_text() == "keep"


def test_the_input_under_another_name_is_never_replaced(client, volume):
    """The input store given as output through a symbolic link (or a folder holding it, or a
    folder inside it) is refused, force or not, and the input is untouched."""
    d, x = volume
    link = d / "alias.zarr"
    if not link.exists():
        link.symlink_to(d / "in.zarr")
    for out, what in ((link, "same file as input"), (d, "contains input"), (d / "in.zarr" / "sub.zarr", "inside")):
        with pytest.raises(ValueError, match=what):
            swi.dask.segment(client, str(d / "in.zarr"), str(out), dask_nets.make_numpy_net, 24, force=True)
    assert np.array_equal(zarr.open(str(d / "in.zarr"), mode="r")[:], x)
    assert not (d / "in.zarr" / "sub.zarr").exists()


def test_force_never_removes_a_folder_swi_did_not_write(client, volume):
    """A folder that merely holds a .zarray (beside the user's files) is not a store swi
    writes: refused with force, every file kept."""
    d, _x = volume
    mine = d / "mine.zarr"
    mine.mkdir()
    (mine / ".zarray").write_text("{}")
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="mine.zarr.*not a Zarr array that swi writes.*notes.txt"):
        swi.dask.segment(client, str(d / "in.zarr"), str(mine), dask_nets.make_numpy_net, 24, force=True)
    assert sorted(p.name for p in mine.iterdir()) == [".zarray", "notes.txt"]
    assert (mine / "notes.txt").read_text() == "keep"
    assert not [p.name for p in d.iterdir() if p.name.startswith(".mine.zarr")]


def test_two_jobs_into_one_new_output(client, volume):
    """Two jobs started together into one new output: exactly one succeeds and the store
    holds its labels; the other is refused (FileExistsError), with or without force."""
    import threading

    d, x = volume
    for force in (False, True):
        out = str(d / f"both-{force}.zarr")
        results = {}

        def job(k, factory):
            try:
                swi.dask.segment(client, str(d / "in.zarr"), out, factory, (24, 20, 16), 3, grid=(2, 1, 1),
                                 chunks=16, force=force)
                results[k] = "ok"
            except FileExistsError as e:
                results[k] = e

        ts = [threading.Thread(target=job, args=(k, f))
              for k, f in enumerate((dask_nets.make_numpy_net, dask_nets.make_other_net))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        won = [k for k, r in results.items() if r == "ok"]
        assert len(won) == 1, results
        net = dask_nets.numpy_net if won[0] == 0 else dask_nets.other_net
        assert np.array_equal(zarr.open(out, mode="r")[:], _reference(x, net))
        assert not [p.name for p in d.iterdir() if p.name.startswith(f".both-{force}.zarr")]


def test_a_failed_run_keeps_the_previous_output(client, volume):
    d, x = volume
    out = str(d / "keep.zarr")
    swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.make_numpy_net, (24, 20, 16), 3, grid=(2, 1, 1),
                     chunks=16)
    before = zarr.open(out, mode="r")[:]
    with pytest.raises(Exception, match="the network failed"):
        swi.dask.segment(client, str(d / "in.zarr"), out, dask_nets.make_failing_net, (24, 20, 16), 3,
                         grid=(2, 1, 1), chunks=16, force=True)
    assert np.array_equal(zarr.open(out, mode="r")[:], before)
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".keep.zarr")) == []


def test_onnx_model_through_the_command_shards(client, tmp_path):
    """An ONNX model: each task runs `swi segment --shard`; the parts are bitwise the
    command's one-process result."""
    import shutil
    import subprocess

    swi_bin = os.environ.get("SWI_BINARY")
    golden = os.environ.get("SWI_GOLDEN_DIR")
    if not swi_bin or not golden:
        pytest.skip("SWI_BINARY and SWI_GOLDEN_DIR are set by ctest (the swi command and the e2e model)")
    model = os.path.join(golden, "e2e", "unet.onnx")
    x = np.random.default_rng(5).random((70, 40, 36)).astype(np.float32)
    zarr.save_array(str(tmp_path / "in.zarr"), x, chunks=(32, 32, 32))
    common = ["--roi", "32", "--overlap", "0.25", "--mode", "gaussian", "--sw-batch", "2"]
    subprocess.run([swi_bin, "segment", "-q", "--model", model, "--input", str(tmp_path / "in.zarr"), "--output",
                    str(tmp_path / "whole.zarr")] + common, check=True)
    swi.dask.segment(client, str(tmp_path / "in.zarr"), str(tmp_path / "parts.zarr"), model, 32, 2, overlap=0.25,
                     mode="gaussian", grid=(2, 2, 1), swi=swi_bin)
    whole, parts = zarr.open(str(tmp_path / "whole.zarr"), mode="r")[:], zarr.open(str(tmp_path / "parts.zarr"),
                                                                                   mode="r")[:]
    assert np.array_equal(whole, parts) and not os.path.exists(tmp_path / "parts.zarr" / ".swi-incomplete")
    shutil.rmtree(tmp_path / "parts.zarr")
    # without swi=: the package's own pipeline library runs each part (an installed wheel has
    # no swi command); bitwise the same
    swi.dask.segment(client, str(tmp_path / "in.zarr"), str(tmp_path / "lib.zarr"), model, 32, 2, overlap=0.25,
                     mode="gaussian", grid=(2, 2, 1))
    lib = zarr.open(str(tmp_path / "lib.zarr"), mode="r")[:]
    assert np.array_equal(whole, lib) and not os.path.exists(tmp_path / "lib.zarr" / ".swi-incomplete")
    # and its output rules: the same store again is refused without force
    with pytest.raises(OSError, match="exists"):
        swi.dask.segment(client, str(tmp_path / "in.zarr"), str(tmp_path / "lib.zarr"), model, 32, 2, grid=(2, 1, 1))


def test_ome_zarr_input(client, tmp_path):
    x = np.random.default_rng(8).standard_normal((1, 1, 40, 36, 30)).astype(np.float32)
    g = zarr.open_group(str(tmp_path / "img.ome.zarr"), mode="w")
    g.create_dataset("s0", data=x, chunks=(1, 1, 20, 20, 20))
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": n} for n in "tczyx"],
                               "datasets": [{"path": "s0"}]}]
    out = str(tmp_path / "labels.zarr")
    swi.dask.segment(client, str(tmp_path / "img.ome.zarr"), out, dask_nets.make_numpy_net, (24, 20, 16), 2,
                     grid=(2, 1, 1), chunks=16)
    assert np.array_equal(zarr.open(out, mode="r")[:], _reference(x[0, 0], dask_nets.numpy_net, sw=2))
