"""Goldens per machine class (verify/goldens.py, verify/classes.py): the file layout, which class a run
compares with, the verdict, and how a recording joins the classes."""

from __future__ import annotations

import numpy as np
import pytest

from tritonbuild.verify.classes import Verdict, matching_class, merged, refused, verdict
from tritonbuild.verify.goldens import (
    GoldenClass,
    Goldens,
    compare,
    from_npz_arrays,
    goldens_arrays,
    read_goldens,
)

INTEL = {"cpu": {"arch": "x86_64", "vendor": "GenuineIntel", "isa": ["avx2", "avx512f"]}, "env": {}}
AMD = {"cpu": {"arch": "x86_64", "vendor": "AuthenticAMD", "isa": ["avx2"]}, "env": {}}
X = [{"X": np.array([[1.0, 2.0]], dtype=np.float32)}]
Y = [{"Y": np.array([[0.1, 0.2]], dtype=np.float32)}]
Y2 = [{"Y": np.nextafter(Y[0]["Y"], np.float32(1))}]


def test_classes_round_trip_and_old_readers_see_the_first():
    golden = Goldens(X, [GoldenClass(AMD, Y), GoldenClass(INTEL, Y2)])
    arrays = goldens_arrays(golden)
    assert sorted(arrays) == [
        "class.1.numerics",
        "class.1.output.0.Y",
        "input.0.X",
        "numerics",
        "output.0.Y",
    ]
    back = read_goldens(arrays)
    assert [c.numerics for c in back.classes] == [AMD, INTEL]
    _, outputs = from_npz_arrays(arrays)
    assert outputs[0]["Y"].tobytes() == Y[0]["Y"].tobytes()
    bad = dict(arrays)
    del bad["class.1.numerics"]
    with pytest.raises(ValueError, match="no 'numerics'"):
        read_goldens(bad)


def test_a_run_compares_with_its_own_class():
    golden = Goldens(X, [GoldenClass(AMD, Y), GoldenClass(INTEL, Y2)])
    assert matching_class(golden, INTEL) == (1, [])
    assert matching_class(golden, AMD) == (0, [])
    other = {"cpu": {"arch": "x86_64", "vendor": "HygonGenuine", "isa": ["avx2"]}, "env": {}}
    chosen, differ = matching_class(golden, other)
    assert chosen == 0 and differ == ["cpu.vendor: AuthenticAMD → HygonGenuine"]
    legacy = Goldens(X, [GoldenClass(None, Y)])
    assert matching_class(legacy, INTEL) == (0, None)


def _mismatch():
    found = compare(Y[0]["Y"], Y2[0]["Y"], sample=0, output="Y", context="repeat 1")
    assert found is not None and found.max_ulp == 1
    return found


def test_the_verdict_tells_machine_from_model():
    golden = Goldens(X, [GoldenClass(AMD, Y)])
    machine = verdict(golden, 0, ["cpu.vendor: AuthenticAMD → GenuineIntel"], INTEL, [_mismatch()])
    assert machine.cause == "machine-class"
    assert machine.numerics_differ == ["cpu.vendor: AuthenticAMD → GenuineIntel"]
    assert "recorded on another machine class" in machine.notes[0]
    assert "by at most 1 ULP" in machine.notes[0]
    model = verdict(golden, 0, [], AMD, [_mismatch()])
    assert model.cause == "model" and "the model's answers changed" in model.notes[0]
    assert model.numerics_differ == []
    unknown = verdict(Goldens(X, [GoldenClass(None, Y)]), 0, None, AMD, [_mismatch()])
    assert unknown.cause == "unknown" and unknown.goldens_recorded_on.startswith("unknown")
    assert unknown.numerics_differ is None
    assert verdict(golden, 0, [], AMD, []) == Verdict(
        goldens_recorded_on=machine.goldens_recorded_on, goldens_classes=1, notes=[]
    )


def test_recording_on_another_class_adds_it_and_never_overwrites_silently():
    golden = Goldens(X, [GoldenClass(AMD, Y)])
    added, note, refusal = merged(golden, golden.inputs, Y2, INTEL, force=False)
    assert refusal is None and "added the goldens of machine class 2" in note
    assert [c.numerics for c in added.classes] == [AMD, INTEL]
    same, note, refusal = merged(golden, golden.inputs, Y, INTEL, force=False)
    assert same is golden and "nothing added" in note
    _, _, refusal = merged(golden, golden.inputs, Y2, AMD, force=False)  # same class, new answers
    assert refusal and "not overwritten" in refusal
    forced, _, refusal = merged(
        added, added.inputs, Y2, AMD, force=True
    )  # rewrites: this class alone
    assert refusal is None and forced.classes == [GoldenClass(AMD, Y2)]
    legacy = Goldens(X, [GoldenClass(None, Y)])
    upgraded, note, refusal = merged(legacy, legacy.inputs, Y, AMD, force=False)
    assert refusal is None and upgraded.classes[0].numerics == AMD
    assert note == "answers equal the goldens recorded before"
    _, _, refusal = merged(legacy, legacy.inputs, Y2, AMD, force=False)
    assert refusal and "recorded before fingerprints" in refusal


def test_a_recording_equal_to_the_goldens_there_says_so():
    """'verify --record' on a model whose goldens it matches: the report says the answers were compared and
    equal (a server given with --server has no fingerprint; the one class is compared all the same), where it
    said only 'goldens recorded into', as when there were none (a second fresh compile's start could not be
    told from the first's, 2026-12-07)."""
    golden = Goldens(X, [GoldenClass(AMD, Y)])
    for numerics in (AMD, None):
        _, note, refusal = merged(golden, golden.inputs, Y, numerics, force=False)
        assert refusal is None and note == "answers equal the goldens recorded before"
    # equal answers leave the goldens as recorded: another machine of the class (its CPU's name, which decides no
    # bits) or a rebuild's file digests rewrote the committed file, a diff to commit for nothing (seen 2026-12-07)
    same_class_other_cpu = {**AMD, "cpu": {**AMD.get("cpu", {}), "model": "another CPU"}}
    kept, _, _ = merged(
        golden, golden.inputs, Y, same_class_other_cpu, force=False, files={"a": "1"}
    )
    assert kept.classes == golden.classes
    two = Goldens(X, [GoldenClass(INTEL, Y2), GoldenClass(AMD, Y)])
    _, note, refusal = merged(two, two.inputs, Y, AMD, force=False)
    assert refusal is None and note == "answers equal the goldens recorded before (machine class 2)"
    _, note, _ = merged(None, X, Y, AMD, force=False)
    assert note is None  # nothing recorded before: nothing compared


def test_a_recording_that_compared_names_the_goldens_it_compared_with():
    """The report's goldens_recorded_on is null when a --record compared nothing and names the class otherwise
    (benchmarks/vllm/invariance_speed.py reads a null as 'reproduced nothing': a second start's --record that
    found its answers equal to the first's counted as not reproduced)."""
    from tritonbuild.core.numerics import summary
    from tritonbuild.verify.classes import compared_on_record

    golden = Goldens(X, [GoldenClass(AMD, Y)])
    told = compared_on_record(golden, AMD, Y)
    assert told.goldens_recorded_on == summary(AMD) and told.goldens_classes == 1
    assert told.notes == [] and told.cause is None
    assert compared_on_record(golden, None, Y).goldens_recorded_on == summary(
        AMD
    )  # a given server's
    unknown = compared_on_record(Goldens(X, [GoldenClass(None, Y)]), None, Y)
    assert unknown.goldens_recorded_on.startswith("unknown")
    assert compared_on_record(None, AMD, Y) is None  # none yet: recorded, not compared
    assert (
        compared_on_record(golden, INTEL, Y2) is None
    )  # another class: added beside, not compared
    # another class whose answers equal the recorded class's: compared with it, nothing added
    assert compared_on_record(golden, INTEL, Y).goldens_recorded_on == summary(AMD)


def test_a_refused_record_leaves_the_repository_goldens_as_they_were(tmp_path):
    """Issue 43: a refused 'verify --record' wrote OUT/<model>/golden-v1.npz before refusing, so the next
    plain verify passed on the refused answers."""
    from tests.unit.verify.manifests import manifest_model
    from tritonbuild.core.hashing import sha256_file
    from tritonbuild.core.npz import write_npz
    from tritonbuild.verify.answers import write_goldens

    golden = Goldens(X, [GoldenClass(AMD, Y)])
    recipe = tmp_path / "recipes" / "m.yaml"
    recipe.parent.mkdir()
    recipe.write_text("name: m\n")
    committed = recipe.parent / "goldens" / "m.npz"
    committed.parent.mkdir()
    out = tmp_path / "OUT"
    dest = out / "m" / "golden-v1.npz"
    dest.parent.mkdir(parents=True)
    for path in (committed, dest):
        write_npz(path, goldens_arrays(golden))
    kept = dest.read_bytes()
    model = manifest_model(
        "m",
        goldens="m/golden-v1.npz",
        goldens_source=str(committed),
        recipe_path=str(recipe),
        recipe_sha256=sha256_file(recipe),
    )
    _, _, refusal = write_goldens(out, model, X, Y2, golden, AMD, force=False)
    assert refusal and "not overwritten" in refusal
    assert dest.read_bytes() == kept and committed.read_bytes() == kept
    # the report lists what the refused answers differ in (an 8B fp16 model's refusal on an H100 said
    # only that they differ: nothing to inspect before --force)
    from tritonbuild.verify.checked import AnswersChecked, Recording
    from tritonbuild.verify.on_route import _record

    recording = Recording(inputs=X, answers=Y2, golden=golden, numerics=AMD)
    checked, _ = _record(out, model, AnswersChecked(passed=True, recording=recording), False)
    assert not checked.passed and "not overwritten" in checked.goldens_refused
    [differs] = checked.mismatches
    assert (differs.sample, differs.output, differs.differing, differs.max_ulp) == (0, "Y", 2, 1)
    assert differs.context == "repeat 1 (recorded) vs the committed goldens"
    assert checked.cause == "model" and checked.numerics_differ == []
    assert dest.read_bytes() == kept and committed.read_bytes() == kept
    _, _, refusal = write_goldens(out, model, X, Y2, golden, AMD, force=True)
    assert refusal is None and dest.read_bytes() != kept and committed.read_bytes() != kept


def test_a_refusal_lists_the_outputs_that_differ_from_the_class_it_would_replace():
    golden = Goldens(X * 2, [GoldenClass(AMD, Y * 2), GoldenClass(INTEL, Y + Y2)])
    both, told = refused(golden, Y2 * 2, AMD)  # AMD's class: both samples differ
    assert [(m.sample, m.output, m.max_ulp) for m in both] == [(0, "Y", 1), (1, "Y", 1)]
    assert told.cause == "model"
    # INTEL's class (Y, Y2): only sample 1 differs
    found, _ = refused(golden, Y * 2, INTEL)
    assert [(m.sample, m.output) for m in found] == [(1, "Y")]
    assert refused(golden, Y + Y2, INTEL)[0] == []
    assert refused(None, Y, INTEL) == ([], None)


def test_a_refusal_on_the_same_files_and_machine_class_is_unexplained():
    """2026-12-07, an H100 (the committed goldens' machine class, every fingerprint field the same): the fp16
    invariant 8B model's recording was refused, the report saying only that the answers differ. A refusal now
    tells the causes apart as a plain verify does: with the same files and class, what decided the bits is not
    in the fingerprint."""
    golden = Goldens(X, [GoldenClass(AMD, Y, FILES)])
    found, told = refused(golden, Y2, AMD, files=FILES)
    assert len(found) == 1 and told.cause == "unexplained" and told.numerics_differ == []
    assert (
        "not in the fingerprint" in told.notes[0] and "re-recording would hide it" in told.notes[0]
    )
    _, told = refused(golden, Y2, AMD, files=REBUILT)
    assert told.cause == "model" and "another build of the model" in told.notes[0]
    _, told = refused(golden, Y2, INTEL, files=FILES)  # no INTEL class: compared with AMD's
    assert told.cause == "machine-class"


FILES = {"config.pbtxt": "c" * 64, "1/model/model.safetensors": "a" * 64}
REBUILT = {**FILES, "1/model/model.safetensors": "b" * 64}


def test_a_class_keeps_the_model_files_it_was_recorded_from():
    golden = Goldens(X, [GoldenClass(AMD, Y, FILES), GoldenClass(INTEL, Y2)])
    arrays = goldens_arrays(golden)
    assert "files" in arrays and "class.1.files" not in arrays
    back = read_goldens(arrays)
    assert [c.files for c in back.classes] == [FILES, None]
    recorded, _, refusal = merged(None, X, Y, AMD, force=False, files=FILES)
    assert refusal is None and recorded.classes[0].files == FILES
    bad = {**arrays, "files": np.frombuffer(b'{"config.pbtxt": 1}', dtype=np.uint8)}
    with pytest.raises(ValueError, match="path -> sha256"):
        read_goldens(bad)


def test_the_verdict_tells_another_build_from_the_same_files_on_another_machine():
    """2026-12-06, two H100 machines, the invariant INT4 8B model: the same token ids, other log-probs; the
    machines' CPUs differed (Xeon model 143 vs 207) and nothing said whether the model's files did too (the
    INT4 weights are quantized on the machine that builds them)."""
    golden = Goldens(X, [GoldenClass(AMD, Y, FILES)])
    diff = ["cpu.vendor: AuthenticAMD → GenuineIntel"]
    rebuilt = verdict(golden, 0, diff, INTEL, [_mismatch()], REBUILT)
    assert rebuilt.cause == "model" and rebuilt.numerics_differ == diff
    assert (
        "files differ from those the goldens were recorded from (1/model/model.safetensors)"
        in (rebuilt.notes[0])
    )
    assert "the machine class differs too: cpu.vendor" in rebuilt.notes[0]
    machine = verdict(golden, 0, diff, INTEL, [_mismatch()], dict(FILES))
    assert (
        machine.cause == "machine-class"
        and "the same model files as the goldens'" in (machine.notes[0])
    )
    unexplained = verdict(golden, 0, [], AMD, [_mismatch()], dict(FILES))
    assert (
        unexplained.cause == "unexplained"
        and "re-recording would hide it" in (unexplained.notes[0])
    )
    # files not known on one side: the verdict as before
    assert verdict(golden, 0, [], AMD, [_mismatch()], None).cause == "model"
    assert verdict(Goldens(X, [GoldenClass(AMD, Y)]), 0, [], AMD, [_mismatch()], FILES).cause == (
        "model"
    )
