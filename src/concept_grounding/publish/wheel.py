"""The package wheel every published Space installs, and the check that its requirements resolve.

``concept-grounding`` is on no package index, so a Space whose ``requirements.txt`` says
``concept-grounding==0.1.0`` does not build on the Hub. Each Space ``publish`` writes carries
the built wheel (``wheels/<wheel file>``) and requires it by its Hub address::

    concept-grounding[space] @ https://huggingface.co/spaces/<namespace>/<name>/resolve/main/wheels/<wheel file>

A Hub address, not ``./wheels/...``: the Space builder runs ``pip install -r requirements.txt``
with only that file mounted, before the repository is copied in; the address is the file that
travels in the same commit. (A private Space's builder cannot fetch it without a token.)

:func:`package_wheel` gives the wheel (``--wheel``, or built from the checkout, offline, or the
installed package packed again);
:func:`check_space_requirements` refuses, before the folder is written, a requirement that does
not parse, a ``concept-grounding`` requirement that is not the wheel travelling with the Space,
a wheel of another version, or an extra the wheel does not declare.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PackageWheel",
    "package_wheel",
    "space_requirement",
    "check_space_requirements",
    "place_wheel",
    "WHEEL_FOLDER",
]

PACKAGE = "concept-grounding"
#: the folder of a Space repo that holds the package wheel
WHEEL_FOLDER = "wheels"
#: what ``setup.py`` needs to build the wheel (the checkout's paths)
_BUILD_INPUTS = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "src",
    "metrics",
    "pipelines",
    "spaces",
    "docs/screenshots",
)


@dataclass(frozen=True)
class PackageWheel:
    """A built ``concept-grounding`` wheel and what its metadata declares.

    Attributes:
        path: the ``.whl`` file.
        version: its ``Version``.
        extras: its ``Provides-Extra`` names.
    """

    path: Path
    version: str
    extras: frozenset[str]

    @classmethod
    def read(cls, path: Path, flag: str = "--wheel") -> PackageWheel:
        """The wheel's metadata; a one-line ``ValueError`` naming ``flag`` unless it is a ``concept-grounding``
        wheel."""
        path = Path(path)
        try:
            with zipfile.ZipFile(path) as archive:
                name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
        except (OSError, zipfile.BadZipFile, StopIteration) as err:
            raise ValueError(f"{flag}: {path} is not a readable wheel ({type(err).__name__})") from None
        if _normal(metadata.get("Name", "")) != _normal(PACKAGE):
            raise ValueError(f"{flag}: {path} is a wheel of {metadata.get('Name')!r}, not {PACKAGE}")
        return cls(path, metadata["Version"], frozenset(_normal(e) for e in metadata.get_all("Provides-Extra") or []))


def _normal(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def package_wheel(version: str, given: Path | None, checkout: Path | None, workdir: Path) -> PackageWheel:
    """The wheel the Spaces carry: ``given`` (checked), else one built from ``checkout`` into ``workdir``,
    else (an installed wheel, no checkout) the installed distribution packed again
    (:func:`wheel_from_installed`).

    The build copies the checkout's build inputs to a temporary folder first (no ``build/`` or
    ``*.egg-info`` left in the checkout; two publishes do not race) and runs
    ``pip wheel --no-deps --no-build-isolation --no-index`` (offline: the environment's setuptools),
    with a fixed ``SOURCE_DATE_EPOCH`` so that a rebuild is byte-identical (a re-push uploads nothing).

    Raises:
        ValueError: ``given`` is not a ``concept-grounding`` wheel of ``version``, or the build fails.
    """
    if given is not None:
        wheel = PackageWheel.read(given)
        if wheel.version != version:
            raise ValueError(f"--wheel: {given} is version {wheel.version}, this publish releases {version}")
        return wheel
    workdir.mkdir(parents=True, exist_ok=True)
    if checkout is None:
        return package_wheel(version, wheel_from_installed(version, workdir), None, workdir)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=workdir) as tmp:  # on the disk it is written to
        for rel in _BUILD_INPUTS:
            source, dest = checkout / rel, Path(tmp) / rel
            if source.is_dir():
                shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
            elif source.is_file():
                shutil.copy2(source, dest)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--disable-pip-version-check",
                "-q",
                tmp,
                "-w",
                str(workdir),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"},
        )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"--wheel: building the package wheel from {checkout} failed ({last}); pass a built one")
    built = sorted(workdir.glob("concept_grounding-*.whl"))
    return package_wheel(version, built[-1], None, workdir)


def space_requirement(repo_id: str, wheel: PackageWheel, extra: str | None = None) -> str:
    """The requirement line of the wheel travelling in Space ``repo_id``.

    >>> space_requirement("me/sub_accuracy", PackageWheel(Path("concept_grounding-0.1.0-py3-none-any.whl"), "0.1.0",
    ...                                                   frozenset()))
    'concept-grounding @ https://huggingface.co/spaces/me/sub_accuracy/resolve/main/wheels/concept_grounding-0.1.0-py3-none-any.whl'
    """
    name = f"{PACKAGE}[{extra}]" if extra else PACKAGE
    return f"{name} @ {space_file_url(repo_id, f'{WHEEL_FOLDER}/{wheel.path.name}')}"


def space_file_url(repo_id: str, path: str) -> str:
    """The Hub address of file ``path`` at ``main`` of Space ``repo_id``."""
    return f"https://huggingface.co/spaces/{repo_id}/resolve/main/{path}"


def check_space_requirements(lines: list[str], repo_id: str, wheel: PackageWheel) -> None:
    """Refuse requirements that would not resolve when Space ``repo_id`` builds on the Hub.

    Every line (comments aside) must parse as a requirement; ``concept-grounding`` must be required
    by the address of the wheel the Space carries (:func:`space_requirement`), with a specifier (if
    any) the wheel's version meets and only extras the wheel declares.

    Raises:
        ValueError: one line naming the Space and the requirement.

    >>> wheel = PackageWheel(Path("concept_grounding-0.1.0-py3-none-any.whl"), "0.1.0", frozenset({"space"}))
    >>> check_space_requirements([space_requirement("me/x", wheel, "space")], "me/x", wheel)
    >>> check_space_requirements(["concept-grounding==0.1.0"], "me/x", wheel)
    Traceback (most recent call last):
    ...
    ValueError: Space me/x: requirement 'concept-grounding==0.1.0' is on no package index; require the wheel the
    Space carries (https://huggingface.co/spaces/me/x/resolve/main/wheels/concept_grounding-0.1.0-py3-none-any.whl)
    """
    from packaging.requirements import InvalidRequirement, Requirement

    url = space_file_url(repo_id, f"{WHEEL_FOLDER}/{wheel.path.name}")
    for line in lines:
        text = re.sub(r"(^|\s)#.*$", "", line).strip()  # pip's comment rule: '#' at the start or after a space
        if not text:
            continue
        try:
            req = Requirement(text)
        except InvalidRequirement as err:
            raise ValueError(f"Space {repo_id}: requirement {text!r} does not parse ({err})") from None
        if _normal(req.name) != _normal(PACKAGE):
            continue
        if req.url != url:
            raise ValueError(
                f"Space {repo_id}: requirement {text!r} is on no package index; require the wheel "
                f"the Space carries ({url})"
            )
        if req.specifier and not req.specifier.contains(wheel.version, prereleases=True):
            raise ValueError(f"Space {repo_id}: requirement {text!r} excludes the wheel's version {wheel.version}")
        unknown = sorted(_normal(e) for e in req.extras if _normal(e) not in wheel.extras)
        if unknown:
            raise ValueError(
                f"Space {repo_id}: requirement {text!r} asks for extras {unknown} the wheel does not "
                f"declare ({sorted(wheel.extras)})"
            )


def place_wheel(wheel: PackageWheel, folder: Path) -> Path:
    """Put ``wheel`` at ``folder/wheels/<wheel file>`` (a hard link where the file system allows: the
    Spaces share one 30 MB file on disk) and return its path."""
    dest = Path(folder) / WHEEL_FOLDER / wheel.path.name
    if dest.exists() and dest.resolve() == wheel.path.resolve():  # built right here
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.unlink(missing_ok=True)
    try:
        os.link(wheel.path, dest)
    except OSError:
        shutil.copy2(wheel.path, dest)
    return dest


#: files of an installed distribution that the installer wrote (not part of the wheel)
_INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def wheel_from_installed(version: str, workdir: Path) -> Path:
    """The installed ``concept-grounding`` (a wheel install: no checkout) packed again as
    ``workdir/concept_grounding-<version>-py3-none-any.whl``: every file its ``RECORD`` lists inside
    ``site-packages`` (no byte code, no installer files), a new ``RECORD``, fixed timestamps.

    Raises:
        ValueError: the installed version is not ``version`` (pass ``--wheel``).
    """
    import base64
    import hashlib
    from importlib.metadata import distribution

    dist = distribution(PACKAGE)
    if '"editable": true' in (dist.read_text("direct_url.json") or "").replace("'", '"'):
        raise ValueError(f"--wheel: {PACKAGE} is an editable install without its checkout; pass a built wheel")
    if dist.version != version:
        raise ValueError(
            f"--wheel: the installed {PACKAGE} is {dist.version}, this publish releases {version}; pass a built wheel"
        )
    path = workdir / f"concept_grounding-{version}-py3-none-any.whl"
    record, info = [], None
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(dist.files or [], key=str):
            name = file.as_posix()
            if name.startswith("..") or "__pycache__" in name or name.endswith(".pyc"):
                continue
            if name.split("/")[0].endswith(".dist-info"):
                info = name.split("/")[0]
                if name.rsplit("/", 1)[-1] in _INSTALLER_FILES:
                    continue
            data = Path(file.locate()).read_bytes()
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return path
