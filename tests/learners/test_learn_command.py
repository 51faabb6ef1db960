"""`concept-grounding learn`: bad input is one line naming the flag; --concepts learns every concept folder."""

import json
import shutil

from concept_grounding.cli import main


def test_an_existing_token_is_refused_naming_the_flag(concept_dir, tmp_path, capsys):
    code = main(
        [
            "learn",
            "--method",
            "textual_inversion",
            "--images",
            str(concept_dir),
            "--token",
            "bird",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and err.startswith("concept-grounding: error: --token: 'bird' is already")
    assert not (tmp_path / "out").exists()


def test_concepts_learns_each_sub_folder_into_its_own_folder(concept_dir, tmp_path, capsys):
    root = tmp_path / "concepts"
    for name in ("albatross", "albatross_again"):
        shutil.copytree(concept_dir, root / name)
    out = tmp_path / "out"
    assert (
        main(
            [
                "learn",
                "--method",
                "lora",
                "--images",
                str(root),
                "--concepts",
                "--steps",
                "1",
                "--batch",
                "1",
                "--rank",
                "2",
                "--no-progress",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    listing = json.loads((out / "concepts.json").read_text())
    assert sorted(listing["concepts"]) == ["albatross", "albatross_again"]
    for name in listing["concepts"]:
        assert (out / name / "pytorch_lora_weights.safetensors").is_file()
    # same seed, same images: the two concepts' adapters are byte-identical
    a, b = ((out / n / "pytorch_lora_weights.safetensors").read_bytes() for n in sorted(listing["concepts"]))
    assert a == b
