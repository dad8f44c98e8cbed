"""Download the real COCO sample's 27 photos, the part of it this repository does not ship.

    python -m tests.fetch_coco_sample [DIR] [--base-url URL]

The repository ships the sample's annotations (``tests/coco_sample/annotations/person_keypoints_sample.json``, COCO
annotations, CC BY 4.0) and the size and SHA-256 of each photo (``tests/coco_sample/images.json``); the photos are
under their authors' Flickr licences and are fetched from the ``coco_url`` each image entry gives
(images.cocodataset.org). Without DIR they go to ``tests/coco_sample/images`` (git-ignored), where the tests look
for them; with DIR, DIR gets ``images/`` and a copy of ``annotations/``, and the tests find it through
``SIMPLEPOSE_COCO_SAMPLE=DIR``. Files already there with the right checksum are kept, so a second run only fetches
what is missing or wrong; each file is written whole or not at all (temporary file, then rename).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write_bytes
from tests.paths import COCO_SAMPLE_ANNOTATIONS, COCO_SAMPLE_FETCHED, REPO_ROOT

SHIPPED_ANNOTATIONS = COCO_SAMPLE_FETCHED / COCO_SAMPLE_ANNOTATIONS
MANIFEST = COCO_SAMPLE_FETCHED / "images.json"
TRAIN2017_ZIP = "http://images.cocodataset.org/zips/train2017.zip"


@dataclass(frozen=True)
class Photo:
    """One image of the sample: where it comes from and what its bytes must be."""

    file_name: str
    url: str
    size: int  # bytes
    sha256: str


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def photos(
    annotations: Path = SHIPPED_ANNOTATIONS, manifest: Path = MANIFEST, base_url: str | None = None
) -> list[Photo]:
    """The images of ``annotations`` with the size and checksum ``manifest`` gives each; ``base_url`` replaces the
    scheme and host of every ``coco_url`` (a mirror, a local server, ``file:///folder``). UserError when the two
    files do not list the same images or a file name is not a plain name."""
    try:
        images = json.loads(annotations.read_text())["images"]
        expected = {row["file_name"]: row for row in json.loads(manifest.read_text())["images"]}
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"cannot read the sample's list of images ({annotations}, {manifest}): {e}") from None
    if {img["file_name"] for img in images} != set(expected):
        raise UserError(f"{annotations} and {manifest} list different images; restore both from git")
    out = []
    for img in images:
        name = img["file_name"]
        if Path(name).name != name or name in ("", ".", ".."):
            raise UserError(f"{annotations}: file_name {name!r} is not a plain file name")
        url = img["coco_url"]
        if base_url:
            url = base_url.rstrip("/") + "/" + urllib.parse.urlsplit(url).path.lstrip("/")
        out.append(Photo(name, url, int(expected[name]["bytes"]), expected[name]["sha256"]))
    return out


def is_intact(path: Path, photo: Photo) -> bool:
    return path.is_file() and path.stat().st_size == photo.size and sha256_of(path.read_bytes()) == photo.sha256


class Unreachable(Exception):
    """The server cannot be reached at all (no network, refused, timed out): every other file would fail too."""


def download(photo: Photo, timeout: float) -> bytes:
    """The bytes at ``photo.url``; ValueError (one line) when the server answers with an error or the bytes are not
    the expected file; Unreachable when it does not answer."""
    try:
        with urllib.request.urlopen(photo.url, timeout=timeout) as response:
            data = response.read()
    except urllib.error.HTTPError as e:
        raise ValueError(f"HTTP {e.code} {e.reason} from {photo.url}") from None
    except urllib.error.URLError as e:
        if photo.url.startswith("file:"):  # a local folder standing in for the server: this one file is missing
            raise ValueError(f"{photo.url}: {getattr(e.reason, 'strerror', None) or e.reason}") from None
        raise Unreachable(f"{photo.url}: {e.reason}") from None
    except http.client.HTTPException as e:  # an answer cut short or malformed
        raise ValueError(f"{photo.url}: the answer broke off ({type(e).__name__})") from None
    except OSError as e:  # a timeout or a connection cut while reading
        raise Unreachable(f"{photo.url}: {e}") from None
    if len(data) != photo.size or sha256_of(data) != photo.sha256:
        raise ValueError(
            f"checksum mismatch for {photo.url}: got {len(data)} bytes, SHA-256 {sha256_of(data)[:16]}..., expected "
            f"{photo.size} bytes, {photo.sha256[:16]}... (a changed or damaged file; nothing was written)"
        )
    return data


def fetch(
    out_dir: Path = COCO_SAMPLE_FETCHED,
    base_url: str | None = None,
    timeout: float = 60.0,
    annotations: Path = SHIPPED_ANNOTATIONS,
    manifest: Path = MANIFEST,
    report: Callable[[str], object] | None = None,
) -> dict[str, int]:
    """Lay out the sample in ``out_dir`` (``images/`` and ``annotations/``), downloading each photo not already
    there intact; {"downloaded": n, "present": n}. Keeps going past a file that fails, then raises one UserError
    naming every file not fetched and what to do; stops at once when the server cannot be reached. ``report``
    receives a line per file fetched."""
    out_dir = Path(out_dir)
    wanted = photos(annotations, manifest, base_url)
    target = out_dir / COCO_SAMPLE_ANNOTATIONS
    if target.resolve() != annotations.resolve():
        atomic_write_bytes(target, annotations.read_bytes())
    images = out_dir / "images"
    counts, failed = {"downloaded": 0, "present": 0}, []
    for i, photo in enumerate(wanted, start=1):
        path = images / photo.file_name
        if is_intact(path, photo):
            counts["present"] += 1
            continue
        try:
            atomic_write_bytes(path, download(photo, timeout))
            counts["downloaded"] += 1
            if report:
                report(f"{i}/{len(wanted)} {photo.url}")
        except ValueError as e:
            failed.append(f"{photo.file_name}: {e}")
        except Unreachable as e:
            raise UserError(
                f"cannot reach the server for {photo.file_name} ({e}); {counts['downloaded']} images were fetched "
                "and are kept: check the network (or --base-url) and run the same command again"
            ) from None
    if failed:
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3 else "")
        raise UserError(
            f"{len(failed)} of {len(wanted)} images not fetched into {images} ({shown}); the others are "
            f"kept. Run the same command again to retry; a file that keeps failing can be taken from {TRAIN2017_ZIP} "
            f"(same name) and put in {images}"
        )
    return counts


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fetch_coco_sample", description=__doc__.split("\n\n")[0])
    default = COCO_SAMPLE_FETCHED.relative_to(REPO_ROOT)
    where = f"where to lay out images/ and annotations/ (default: {default}, where the tests look)"
    p.add_argument("dir", nargs="?", type=Path, default=COCO_SAMPLE_FETCHED, help=where)
    p.add_argument("--base-url", help="fetch from this server instead of each coco_url's (a mirror; file:///DIR)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each answer")
    args = p.parse_args(argv)
    counts = fetch(args.dir, args.base_url, args.timeout, SHIPPED_ANNOTATIONS, MANIFEST, report=print)
    print(f"{counts['downloaded'] + counts['present']} images in {args.dir / 'images'} "
          f"({counts['downloaded']} downloaded, {counts['present']} already there), checksums verified")  # fmt: skip
    if args.dir.resolve() != COCO_SAMPLE_FETCHED.resolve():
        print(f"the tests use it with: SIMPLEPOSE_COCO_SAMPLE={args.dir} python -m pytest -q")
    else:
        print("python -m pytest -q now runs the tests on the real photos too")
    return 0


if __name__ == "__main__":
    sys.exit(main())
