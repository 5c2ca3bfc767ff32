"""``edgekit build --golden-on TARGET`` (and ``golden_on``): the artifact's test vectors get
expected outputs computed under TARGET's emulated CPU, so that ``edgekit verify`` on a board
with that CPU checks every element exactly instead of within the measured cross-ISA bounds
(issue 16). QEMU reports the target's CPU part and features, so the runtimes pick the kernels
they pick on the board. Elsewhere (this host, another board) verify keeps the bounds.
"""

from __future__ import annotations

import os

import numpy as np
from edgekit.targets import Profile

from edgekit.artifact.archive import Artifact, encode_test_vectors, read_artifact, write_artifact
from edgekit.errors import TargetError, UserError

from .batch import OutputsJob, emulate_batch
from .builder import Progress
from .session import _quiet


def golden_on(path: str | os.PathLike[str], target: str, *,
              sign_key: str | os.PathLike[str] | None = None, progress: Progress = _quiet
              ) -> dict[str, str]:
    """Rewrite ``path`` (atomically, re-signed with ``sign_key`` if given) with expected
    outputs from ``target``'s emulated CPU; returns the manifest's ``test_vectors.golden``."""
    profile = emulated_profile(target)
    emulation = profile.emulation
    artifact = read_artifact(path)
    if artifact.spec.test_vectors is None:
        raise UserError(f"{path}: --golden-on needs test vectors in the artifact, got none")
    vectors = artifact.test_vectors()
    feeds = {k[3:]: v for k, v in vectors.items() if k.startswith("in/")}
    progress(f"computing the test vectors' outputs under the emulated {emulation.cpu_model}")
    found = emulate_batch(profile, outputs=[OutputsJob(os.fspath(path), feeds)],
                          progress=progress).outputs[0]
    if isinstance(found, str):
        raise UserError(f"--golden-on {target}: the emulated run failed: {found}")
    missing = sorted({m.format for m in artifact.spec.models} - set(found))
    if missing:  # their vectors would stay the host's while the manifest says otherwise
        raise UserError(f"--golden-on {target}: expected every format of the artifact to run "
                        f"under emulation, got no outputs for {', '.join(missing)}")
    raw = _raw_vectors(artifact, artifact.spec.test_vectors.path)
    for fmt, outputs in found.items():
        for name, value in outputs.items():
            key = f"out/{fmt}/{name}"
            if key not in raw or raw[key].shape != value.shape:
                want = list(raw[key].shape) if key in raw else "a stored output"
                raise UserError(f"--golden-on {target}: {key} came back with shape "
                                f"{list(value.shape)}, expected {want}")
            raw[key] = value.astype(raw[key].dtype)
    golden = {"target": profile.name, "cpu": emulation.cpu_model,
              "part": emulation.cpuinfo_part.lower()}
    manifest = {k: v for k, v in artifact.manifest.items() if k not in ("files", "signature")}
    manifest["test_vectors"] = {**manifest["test_vectors"], "golden": golden}
    members = {n: artifact.read(n) for n in artifact.members if n != "manifest.json"}
    members[artifact.spec.test_vectors.path] = encode_test_vectors(raw)
    write_artifact(path, manifest, members, sign_key=sign_key)
    return golden


def emulated_profile(target: str) -> Profile:
    """``target``'s profile, or ``TargetError`` naming the targets whose CPU QEMU can run."""
    from edgekit.targets import list_profiles, load_profile

    def runs(profile: Profile) -> bool:
        return bool(profile.emulation.qemu and profile.emulation.cpu_model)

    profile = load_profile(target)
    if not runs(profile):
        able = [t for t in list_profiles() if runs(load_profile(t))]
        raise TargetError(f"--golden-on {target}: expected a target whose CPU can be emulated "
                          f"({', '.join(able)}), got one without an [emulation] CPU")
    return profile


def _raw_vectors(artifact: Artifact, member: str) -> dict[str, np.ndarray]:
    """The test-vector arrays as stored (inputs may be int8 codes, ``q/<name>``)."""
    import io

    with np.load(io.BytesIO(artifact.read(member)), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
