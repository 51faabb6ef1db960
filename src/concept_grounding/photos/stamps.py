"""Real animal cut-outs: Debian's ``tuxpaint-stamps-default``, fetched once into the user's cache.

Tux Paint's stamps (GPL-2, Bill Kendrick and contributors) include real photographs of
animals cut out with an alpha channel: an exact foreground mask for every one. They are never
committed here (GPL-2); :func:`fetch_stamps` fetches the Debian package on first use and keeps
only ``usr/share/tuxpaint/stamps/animals/**.png`` and the package's ``copyright`` file:

1. ``apt-get download tuxpaint-stamps-default=<version>`` where ``apt-get`` exists (no
   install, no root needed for the download itself);
2. else (or when that fails) the same ``.deb`` from Debian's archive (:data:`DEB_URL`);
3. either way the ``.deb`` (an ``ar`` archive holding ``data.tar.xz``) is checked against
   :data:`DEB_SHA256` and unpacked in Python (:func:`unpack_deb`): no ``dpkg`` needed.

The download is 161 MB (:data:`DEB_BYTES`); what stays in the cache is about 6 MB of animal PNGs.
The cache is ``$CONCEPT_GROUNDING_CACHE``, else ``$XDG_CACHE_HOME/concept-grounding``, else
``~/.cache/concept-grounding`` (:func:`cache_root`); a finished copy holds a ``COMPLETE``
marker and is never fetched again. Concurrent first uses each unpack into their own temporary
folder and the first to finish renames it into place.

:data:`STAMPS` is the catalogue: the stamps of land animals whose species ImageNet-1k names,
each with that ImageNet class (from the stamp's own name, never from a model's prediction) and
its animal group.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

__all__ = [
    "Stamp",
    "STAMPS",
    "PACKAGE",
    "VERSION",
    "DEB_URL",
    "DEB_SHA256",
    "DEB_BYTES",
    "cache_root",
    "fetch_stamps",
    "unpack_deb",
    "stamps_dir",
]

logger = logging.getLogger(__name__)

PACKAGE = "tuxpaint-stamps-default"
VERSION = "2022.06.04-1"
DEB_NAME = f"{PACKAGE}_{VERSION}_all.deb"
DEB_URL = f"https://deb.debian.org/debian/pool/main/t/tuxpaint-stamps/{DEB_NAME}"
DEB_SHA256 = "6db6c1bfc870a47f1499d6203b083522eacb57c5f9c87d468f2e92eb6d9d5f34"
DEB_BYTES = 160_880_444
#: inside the package's data.tar.xz
ANIMALS = "usr/share/tuxpaint/stamps/animals/"
COPYRIGHT = f"usr/share/doc/{PACKAGE}/copyright"
CACHE_ENV = "CONCEPT_GROUNDING_CACHE"
#: what to do when the fetch fails (the error's hint)
HOW_TO_FETCH = (
    f"download {DEB_URL} where there is network and run again with {CACHE_ENV}=<folder holding it> "
    f"(or put it at <cache>/{DEB_NAME})"
)


@dataclass(frozen=True)
class Stamp:
    """One cut-out: ``path`` under the stamps' ``animals/`` folder, its ImageNet-1k class index
    and its animal group (``"bird"``, ``"mammal"``, ``"insect"``, ``"reptile"``, ``"mollusc"``,
    ``"crustacean"``)."""

    path: str
    imagenet: int
    group: str

    @property
    def name(self) -> str:
        """The stamp's file stem, e.g. ``"pink_flamingo"``."""
        return Path(self.path).stem


def _stamps(group: str, folder: str, pairs: str) -> tuple[Stamp, ...]:
    return tuple(Stamp(f"{folder}/{p.split(':')[0]}.png", int(p.split(":")[1]), group) for p in pairs.split())


#: land animals whose species (or ImageNet's nearest class named for it) ImageNet-1k has; the
#: aquatic ones are left out because no background here is water (the easy / hard split
#: needs a usual habitat)
STAMPS: tuple[Stamp, ...] = (
    *_stamps(
        "bird",
        "birds",
        "crowned_crane:134 duck:97 drake:97 gander:99 hen:8 chicken_profile:8 rooster:7 "
        "magpie:18 ostrich:9 penguin:145 little-penguin:145 magellanic_penguin:145 peacock:84 "
        "albino_peahen:84 pelican:144 pink_flamingo:130 rainbow-lorikeet:90 tucan:96 "
        "vulture:23 owl:24",
    ),
    *_stamps(
        "mammal",
        "mammals",
        "apes/chimp:367 apes/gorilla:366 bears/bear:294 bears/european-bear:294 "
        "bovines/bison:347 bovines/bull:345 bovines/cow:345 bovines/ram:348 bovines/sheep:348 "
        "camel/camel:354 camel/dromedary:354 cats/lion:291 cats/lion-2:291 cats/tiger:292 "
        "cats/tiger_sumatran:292 dogs/dingo:273 dogs/fox:277 equines/zebra:340 ferret:359 "
        "hippopotamus:344 pig:341 pig_golden:341 pig_golden2:341 rodents/beaver:337 "
        "rodents/marmot:336 rodents/squirrel:335 wildboar:342 badger:362",
    ),
    *_stamps("mammal", "marsupials", "koala:105 wombat:106"),
    *_stamps("insect", "insects", "mantis:315 grasshopper:311 bee:309 fly:308"),
    *_stamps("mollusc", "insects", "Brown_slug:114"),
    *_stamps("crustacean", "insects", "Woodlouse:126"),
    *_stamps("reptile", "lizards", "iguana:39"),
)


def cache_root() -> Path:
    """``$CONCEPT_GROUNDING_CACHE``, else ``$XDG_CACHE_HOME/concept-grounding``, else ``~/.cache/concept-grounding``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "concept-grounding"


def stamps_dir(root: Path | None = None) -> Path:
    """Where the unpacked stamps live: ``<cache>/tuxpaint-stamps-<version>``."""
    return (root or cache_root()) / f"tuxpaint-stamps-{VERSION}"


def _ar_members(data: bytes) -> dict[str, bytes]:
    """The members of a System V ``ar`` archive (a ``.deb``): name -> bytes."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive (a .deb starts with '!<arch>')")
    members, pos = {}, 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[name] = data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)
    return members


def unpack_deb(deb: Path, dest: Path) -> int:
    """Unpack the animals and the copyright file of ``deb`` (``data.tar.xz`` inside) under ``dest``;
    returns the number of PNG files written. ``ValueError`` when ``deb`` is not that package."""
    members = _ar_members(Path(deb).read_bytes())
    if "data.tar.xz" not in members:
        raise ValueError(f"{deb} holds no data.tar.xz (members: {sorted(members)})")
    count = 0
    with tarfile.open(fileobj=io.BytesIO(members["data.tar.xz"]), mode="r:xz") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            keep = (name.startswith(ANIMALS) and name.endswith(".png")) or name == COPYRIGHT
            if not keep or not member.isfile() or ".." in Path(name).parts:
                continue
            target = dest / ("animals/" + name[len(ANIMALS) :] if name != COPYRIGHT else "copyright")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(member).read())
            count += name.endswith(".png")
    return count


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _apt_download(folder: Path) -> Path | None:
    """``apt-get download`` of the pinned version into ``folder``, or ``None`` (no apt, or it failed)."""
    if shutil.which("apt-get") is None:
        return None
    try:
        subprocess.run(
            ["apt-get", "download", f"{PACKAGE}={VERSION}"], cwd=folder, check=True, capture_output=True, timeout=600
        )
    except (OSError, subprocess.SubprocessError) as err:
        logger.info("apt-get download failed (%s); trying Debian's archive", str(err).splitlines()[0])
        return None
    found = folder / DEB_NAME
    return found if found.is_file() else None


def _url_download(folder: Path, url: str = DEB_URL) -> Path:
    target = folder / DEB_NAME
    request = urllib.request.Request(url, headers={"User-Agent": "concept-grounding"})
    with urllib.request.urlopen(request, timeout=60) as response, open(target, "wb") as f:
        shutil.copyfileobj(response, f, 1 << 20)
    return target


def _checked(deb: Path | None) -> Path | None:
    if deb is None or not deb.is_file():
        return None
    if _sha256(deb) != DEB_SHA256:
        logger.info("%s does not match its SHA-256; ignoring it", deb)
        return None
    return deb


def fetch_stamps(root: Path | None = None) -> Path:
    """The unpacked stamps' folder (``animals/``, ``copyright``), fetched on first use (module docstring).

    Raises:
        UsageError: the package could not be fetched or unpacked (one line with what to do).
    """
    final = stamps_dir(root)
    if (final / "COMPLETE").is_file():
        return final
    cache = final.parent
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(
            f"cannot create the cache folder {cache} ({err.strerror})",
            argument=CACHE_ENV,
            hint=f"set {CACHE_ENV} to a writable folder",
        ) from None
    logger.info(
        "fetching %s %s (a %.0f MB download, once; about 6 MB kept) into %s", PACKAGE, VERSION, DEB_BYTES / 1e6, final
    )
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        work = Path(tmp)
        deb = _checked(cache / DEB_NAME) or _checked(_apt_download(work))
        if deb is None:
            try:
                deb = _checked(_url_download(work))
            except OSError as err:
                raise UsageError(
                    f"cannot fetch {PACKAGE} {VERSION} with apt-get or from {DEB_URL} ({getattr(err, 'reason', err)})",
                    hint=HOW_TO_FETCH,
                ) from None
            if deb is None:
                raise UsageError(f"{DEB_URL} did not match its SHA-256 {DEB_SHA256[:12]}...", hint=HOW_TO_FETCH)
        unpacked = work / "stamps"
        count = unpack_deb(deb, unpacked)
        missing = [s.path for s in STAMPS if not (unpacked / "animals" / s.path).is_file()]
        if missing:
            raise UsageError(
                f"{deb.name} lacks {len(missing)} catalogued stamp(s), first {missing[0]}", hint=HOW_TO_FETCH
            )
        (unpacked / "COMPLETE").write_text(f"{PACKAGE} {VERSION} {count} png\n")
        try:
            os.replace(unpacked, final)
        except OSError:  # another process finished first: its copy is the same
            if not (final / "COMPLETE").is_file():
                raise
    logger.info("kept %d animal stamps in %s", count, final)
    return final
