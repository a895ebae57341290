"""``python src/functions_local_host/rpc_build.py``: compile the Functions RPC protocol
(FunctionRpc.proto and its imports, package ``AzureFunctionsRpcMessages``) into
``src/functions_local_host/_rpc/`` (git-ignored), for the host's calls into
``azure-functions-runtime``.

Where the definitions come from: no package on PyPI or npm ships FunctionRpc.proto as text.
``azure-functions-runtime-v1`` (Microsoft's Python worker, PyPI) ships Microsoft's own build of
the protocol in its source distribution (``tests/protos/**/*_pb2.py``), and each such module
embeds the compiled ``FileDescriptorProto`` of its .proto file. This step downloads that sdist
with pip, reads the descriptors out of the modules without running them (``ast``), and lets
grpcio-tools' protoc generate Python code from them (``--descriptor_set_in``), as it
would from the .proto text. The files are renamed to their base names under
``functions_local_host/_rpc/`` so the generated imports stay inside this package (the protocol's
own top-level folders would otherwise shadow packages of the same name, such as a function app's).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2

SOURCE_PACKAGE = "azure-functions-runtime-v1"
SOURCE_VERSION = "1.2.0"
# The protocol's files, dependencies first, by their base names (the sdist's descriptors name
# them with their folders).
PROTO_FILES = (
    "NullableTypes.proto",
    "ClaimsIdentityRpc.proto",
    "FunctionRpc.proto",
)
PACKAGE_DIR = Path(__file__).resolve().parent / "_rpc"
PREFIX = "functions_local_host/_rpc/"
STAMP = PACKAGE_DIR / "SOURCE"


def stamp_text() -> str:
    return f"{SOURCE_PACKAGE}=={SOURCE_VERSION}\n"


def is_built() -> bool:
    return STAMP.exists() and STAMP.read_text() == stamp_text()


def download_sdist(into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{SOURCE_PACKAGE}=={SOURCE_VERSION}",
            "--dest",
            str(into),
        ],
        check=True,
    )
    (sdist,) = into.glob("*.tar.gz")
    return sdist


def descriptors_in(sdist: Path) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """The FileDescriptorProtos that the sdist's generated modules register, by file name."""
    found: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if "/tests/protos/" not in member.name or not member.name.endswith("_pb2.py"):
                continue
            extracted = archive.extractfile(member)
            if extracted is None:
                continue
            for node in ast.walk(ast.parse(extracted.read())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "AddSerializedFile"
                    and isinstance(node.args[0], ast.Constant)
                ):
                    descriptor = descriptor_pb2.FileDescriptorProto.FromString(node.args[0].value)
                    found[Path(descriptor.name).name] = descriptor
    missing = set(PROTO_FILES) - set(found)
    if missing:
        raise SystemExit(f"{sdist.name} does not hold the descriptors of {sorted(missing)}")
    return found


def descriptor_set(found: dict[str, descriptor_pb2.FileDescriptorProto]) -> bytes:
    """The protocol's files under PREFIX, with the well-known types they import."""
    files = descriptor_pb2.FileDescriptorSet()
    for well_known in (duration_pb2, timestamp_pb2):
        well_known.DESCRIPTOR.CopyToProto(files.file.add())
    for name in PROTO_FILES:
        descriptor = files.file.add()
        descriptor.CopyFrom(found[name])
        descriptor.name = PREFIX + name
        dependencies = [
            d if d.startswith("google/") else PREFIX + Path(d).name for d in descriptor.dependency
        ]
        del descriptor.dependency[:]
        descriptor.dependency.extend(dependencies)
    return files.SerializeToString()


def build(force: bool = False) -> None:
    if is_built() and not force:
        return
    from grpc_tools import protoc

    root = PACKAGE_DIR.parents[1]  # src/
    with tempfile.TemporaryDirectory() as work:
        sdist = download_sdist(Path(work))
        descriptors = Path(work) / "functionrpc.pb"
        descriptors.write_bytes(descriptor_set(descriptors_in(sdist)))
        result = protoc.main(
            [
                "protoc",
                f"--descriptor_set_in={descriptors}",
                f"--python_out={root}",
                *(PREFIX + name for name in PROTO_FILES),
            ]
        )
        if result != 0:
            raise SystemExit(f"protoc failed ({result}) on the descriptors of {sdist.name}")
    (PACKAGE_DIR / "__init__.py").touch()
    STAMP.write_text(stamp_text())
    print(
        f"==> {PACKAGE_DIR.relative_to(root)}: Functions RPC protocol from {stamp_text().strip()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python rpc_build.py", description=__doc__)
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    build(force=parser.parse_args(argv).force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
