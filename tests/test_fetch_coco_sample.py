"""python -m tests.fetch_coco_sample against a local server standing in for images.cocodataset.org: a complete
fetch, a second run that fetches nothing, a repaired file, a checksum mismatch, a missing file, no server; the
shipped annotations and manifest; where the tests look for the sample."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

import tests.paths as utils_paths
from simplepose.utils.errors import UserError
from tests import fetch_coco_sample as fetch_module
from tests.fetch_coco_sample import MANIFEST, SHIPPED_ANNOTATIONS, fetch
from tests.paths import COCO_SAMPLE_ANNOTATIONS, coco_sample_dir

OFFICIAL = "http://images.cocodataset.org/train2017/"


class StandIn:
    """A local HTTP server for ``root`` (COCO's path layout: ``root/train2017/NAME``), counting the files it sends."""

    def __init__(self, root: Path, cut: tuple[str, ...] = ()):
        """``cut``: file names whose answer breaks off after half the announced bytes."""
        self.sent = []
        stand_in = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                stand_in.sent.append(self.path)
                if self.path.rsplit("/", 1)[-1] not in cut:
                    return super().do_GET()
                data = (root / self.path.lstrip("/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.close_connection = True

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in_sample(tmp_path, synthetic_sample):
    """Six synthetic pictures posing as COCO photos: (annotation file with official coco_urls, their manifest,
    the server's folder)."""
    data = json.loads((synthetic_sample / COCO_SAMPLE_ANNOTATIONS).read_text())
    data["images"] = [dict(img, coco_url=OFFICIAL + img["file_name"]) for img in data["images"][:6]]
    annotations = tmp_path / "shipped" / COCO_SAMPLE_ANNOTATIONS
    annotations.parent.mkdir(parents=True)
    annotations.write_text(json.dumps(data))
    served = tmp_path / "server" / "train2017"
    served.mkdir(parents=True)
    rows = []
    for img in data["images"]:
        photo = shutil.copyfile(synthetic_sample / "images" / img["file_name"], served / img["file_name"])
        rows.append({"file_name": img["file_name"], "bytes": photo.stat().st_size,
                     "sha256": hashlib.sha256(photo.read_bytes()).hexdigest()})  # fmt: skip
    manifest = tmp_path / "shipped" / "images.json"
    manifest.write_text(json.dumps({"images": rows}))
    return annotations, manifest, served.parent


def run_fetch(sample, out: Path, url: str) -> dict[str, int]:
    annotations, manifest, _ = sample
    return fetch(out, url, timeout=10, annotations=annotations, manifest=manifest)


def test_fetches_every_photo_then_nothing_then_only_what_is_wrong(stand_in_sample, tmp_path):
    annotations, _, server_root = stand_in_sample
    names = [img["file_name"] for img in json.loads(annotations.read_text())["images"]]
    out = tmp_path / "sample"
    with StandIn(server_root) as server:
        assert run_fetch(stand_in_sample, out, server.url) == {"downloaded": 6, "present": 0}
        assert server.sent == [f"/train2017/{name}" for name in names]  # the coco_url paths, on the given server
        for name in names:
            assert (out / "images" / name).read_bytes() == (server_root / "train2017" / name).read_bytes()
        assert (out / COCO_SAMPLE_ANNOTATIONS).read_bytes() == annotations.read_bytes()
        assert sorted(p.name for p in (out / "images").iterdir()) == sorted(names)  # no temporary file left

        server.sent.clear()
        assert run_fetch(stand_in_sample, out, server.url) == {"downloaded": 0, "present": 6}
        assert server.sent == []  # intact files are not fetched again

        (out / "images" / names[1]).unlink()  # a run stopped before it
        (out / "images" / names[4]).write_bytes(b"half a file")  # damaged
        assert run_fetch(stand_in_sample, out, server.url) == {"downloaded": 2, "present": 4}
        assert server.sent == [f"/train2017/{names[1]}", f"/train2017/{names[4]}"]
        assert (out / "images" / names[4]).read_bytes() == (server_root / "train2017" / names[4]).read_bytes()


def test_a_checksum_mismatch_names_the_file_writes_nothing_of_it_and_keeps_the_others(stand_in_sample, tmp_path):
    annotations, _, server_root = stand_in_sample
    names = [img["file_name"] for img in json.loads(annotations.read_text())["images"]]
    changed = server_root / "train2017" / names[2]
    changed.write_bytes(changed.read_bytes()[:-10] + b"0123456789")  # the server sends another file
    out = tmp_path / "sample"
    with StandIn(server_root) as server, pytest.raises(UserError) as e:
        run_fetch(stand_in_sample, out, server.url)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"1 of 6 images not fetched into {out / 'images'}")
    for words in (f"{names[2]}: checksum mismatch for {server.url}/train2017/{names[2]}", "nothing was written",
                  "run the same command again", "train2017.zip", "the others are kept"):  # fmt: skip
        assert words.lower() in message.lower(), message
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(set(names) - {names[2]})


def test_a_missing_file_names_it_and_the_others_are_fetched(stand_in_sample, tmp_path):
    annotations, _, server_root = stand_in_sample
    names = [img["file_name"] for img in json.loads(annotations.read_text())["images"]]
    (server_root / "train2017" / names[0]).unlink()
    (server_root / "train2017" / names[5]).unlink()
    out = tmp_path / "sample"
    with StandIn(server_root) as server, pytest.raises(UserError) as e:
        run_fetch(stand_in_sample, out, server.url)
    message = str(e.value)
    assert message.startswith("2 of 6 images not fetched") and "\n" not in message
    for name in (names[0], names[5]):
        assert f"{name}: HTTP 404 File not found from {server.url}/train2017/{name}" in message, message
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(names[1:5])
    # the same from a folder standing in for the server (--base-url file:///...)
    with pytest.raises(UserError, match=f"2 of 6 images not fetched .*{names[0]}: file://.*No such file"):
        run_fetch(stand_in_sample, tmp_path / "from_folder", server_root.as_uri())


def test_an_answer_that_breaks_off_is_named_and_nothing_of_it_is_written(stand_in_sample, tmp_path):
    annotations, _, server_root = stand_in_sample
    names = [img["file_name"] for img in json.loads(annotations.read_text())["images"]]
    out = tmp_path / "sample"
    with StandIn(server_root, cut=(names[3],)) as server, pytest.raises(UserError) as e:
        run_fetch(stand_in_sample, out, server.url)
    assert str(e.value).startswith("1 of 6 images not fetched")
    assert f"{names[3]}: {server.url}/train2017/{names[3]}: the answer broke off (IncompleteRead)" in str(e.value)
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(set(names) - {names[3]})


def test_no_server_stops_at_the_first_file_with_what_to_do(stand_in_sample, tmp_path):
    annotations, _, server_root = stand_in_sample
    with StandIn(server_root) as server:
        url = server.url  # closed when the block ends: nothing listens there any more
    first = json.loads(annotations.read_text())["images"][0]["file_name"]
    with pytest.raises(UserError) as e:
        run_fetch(stand_in_sample, tmp_path / "sample", url)
    assert str(e.value).startswith(f"cannot reach the server for {first} ({url}/train2017/{first}")
    assert "0 images were fetched" in str(e.value) and "run the same command again" in str(e.value)


def test_the_command_prints_where_the_sample_is_and_errors_in_one_line(stand_in_sample, tmp_path, monkeypatch,
                                                                     capsys):  # fmt: skip
    annotations, manifest, server_root = stand_in_sample
    monkeypatch.setattr(fetch_module, "SHIPPED_ANNOTATIONS", annotations)
    monkeypatch.setattr(fetch_module, "MANIFEST", manifest)
    out = tmp_path / "sample"
    with StandIn(server_root) as server:
        assert fetch_module.main([str(out), "--base-url", server.url]) == 0
        printed = capsys.readouterr().out
        assert f"6 images in {out / 'images'} (6 downloaded, 0 already there), checksums verified" in printed
        assert f"SIMPLEPOSE_COCO_SAMPLE={out} python -m pytest -q" in printed
        assert printed.count(server.url) == 6  # a line per file fetched
        (server_root / "train2017" / json.loads(annotations.read_text())["images"][3]["file_name"]).unlink()
        assert fetch_module.main([str(tmp_path / "other"), "--base-url", server.url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of 6 images not fetched") and err.count("\n") == 1


def test_the_shipped_annotations_and_manifest_list_the_same_27_photos():
    data = json.loads(SHIPPED_ANNOTATIONS.read_text())
    photos = fetch_module.photos()
    assert len(photos) == len(data["images"]) == 27 and len(data["annotations"]) == 157
    assert [p.file_name for p in photos] == [img["file_name"] for img in data["images"]]
    assert all(p.url == OFFICIAL + p.file_name for p in photos)  # the official coco_url of each
    assert all(len(p.sha256) == 64 and p.size > 10_000 for p in photos)
    assert sum(p.size for p in photos) == 4_377_876
    assert "CC BY 4.0" in (SHIPPED_ANNOTATIONS.parents[1] / "README.md").read_text()
    assert MANIFEST.parent == SHIPPED_ANNOTATIONS.parents[1] == utils_paths.COCO_SAMPLE_FETCHED


def test_the_manifest_matches_the_real_photos_and_a_fetch_of_them_is_found(coco_sample, tmp_path, monkeypatch):
    """The real photos served as COCO serves them: the shipped manifest accepts every one, and the tests find the
    folder the command made."""
    served = tmp_path / "server" / "train2017"
    shutil.copytree(coco_sample / "images", served)
    out = tmp_path / "fetched"
    with StandIn(served.parent) as server:
        assert fetch(out, server.url, timeout=10) == {"downloaded": 27, "present": 0}
    monkeypatch.setenv("SIMPLEPOSE_COCO_SAMPLE", str(out))
    assert coco_sample_dir() == out


def test_where_the_tests_look_for_the_real_sample(tmp_path, monkeypatch, synthetic_sample):
    """$SIMPLEPOSE_COCO_SAMPLE when set (a folder that is not a sample is an error), else tests/coco_sample once
    fetched, else ../shared/data/coco_sample; none: one line saying how to get it."""
    fetched, shared = tmp_path / "repo" / "tests" / "coco_sample", tmp_path / "shared" / "coco_sample"
    monkeypatch.setattr(utils_paths, "COCO_SAMPLE_FETCHED", fetched)
    monkeypatch.setattr(utils_paths, "COCO_SAMPLE_SHARED", shared)
    monkeypatch.delenv("SIMPLEPOSE_COCO_SAMPLE", raising=False)
    with pytest.raises(UserError) as e:
        coco_sample_dir()
    assert "\n" not in str(e.value) and "run python -m tests.fetch_coco_sample" in str(e.value)
    shutil.copytree(synthetic_sample, shared)  # a complete sample, as far as finding it goes
    assert coco_sample_dir() == shared.resolve()
    (fetched / "annotations").mkdir(parents=True)
    shutil.copyfile(synthetic_sample / COCO_SAMPLE_ANNOTATIONS, fetched / COCO_SAMPLE_ANNOTATIONS)
    assert coco_sample_dir() == shared.resolve()  # the shipped annotations alone: not fetched yet
    shutil.copytree(synthetic_sample / "images", fetched / "images")
    assert coco_sample_dir() == fetched
    monkeypatch.setenv("SIMPLEPOSE_COCO_SAMPLE", str(tmp_path / "elsewhere"))
    with pytest.raises(UserError, match="SIMPLEPOSE_COCO_SAMPLE=.*elsewhere is not a complete COCO sample"):
        coco_sample_dir()
    monkeypatch.setenv("SIMPLEPOSE_COCO_SAMPLE", str(shared))
    assert coco_sample_dir() == shared
