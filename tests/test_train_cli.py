"""translate-train around the model: run directories, data from checkpoints, resuming from the
newest checkpoint, precision for the hardware, progress without a terminal, one-line errors."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import torch
from helpers import FIXTURE, REPO
from jsonargparse import Namespace

from translate.cli.train import main
from translate.model.checkpoint import ARTIFACT_KEY
from translate.train import precision
from translate.train.lightning_cli import TranslateCLI
from translate.train.run_dir import newest_checkpoint

TINY = str(REPO / "configs" / "tiny.yaml")


def languages_xx_yy(directory: Path) -> Path:
    """The fixture corpus under languages the bundled corpus does not have (xx → yy), so a run
    that silently fell back on the bundled corpus would fail."""
    directory.mkdir(parents=True)
    for path in FIXTURE.iterdir():
        split, lang = path.name.split(".")
        shutil.copy(path, directory / f"{split}.{'xx' if lang == 'en' else 'yy'}")
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`translate-train fit` of configs/tiny.yaml on other data, in a fresh working directory."""
    root = tmp_path_factory.mktemp("train_cli")
    languages_xx_yy(root / "mycorpus")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        code = main(
            [
                "fit",
                "--config",
                TINY,
                "--data.corpus_dir",
                "mycorpus",
                "--data.src_lang",
                "xx",
                "--data.tgt_lang",
                "yy",
                "--data.cache_dir",
                str(root / "cache"),
                "--data.max_tokens",
                "600",
                "--trainer.log_every_n_steps",
                "10",
            ]
        )
    finally:
        os.chdir(cwd)
    assert code == 0
    return root


def fit_on(corpus: str, src: str, tgt: str, steps: int) -> list[str]:
    """`translate-train fit` of configs/tiny.yaml on `corpus` for `steps` updates, validated at
    the end, its cache in ./cache."""
    return [
        "fit",
        "--config",
        TINY,
        "--data.corpus_dir",
        corpus,
        "--data.src_lang",
        src,
        "--data.tgt_lang",
        tgt,
        "--data.cache_dir",
        "cache",
        "--trainer.max_steps",
        str(steps),
        "--trainer.val_check_interval",
        str(steps),
    ]


def run_in(directory: Path, argv: list[str], capfd) -> tuple[int, str]:
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    return code, capfd.readouterr().err


def test_run_directory_is_named_after_the_config_and_the_data(trained):
    checkpoint = trained / "runs" / "tiny-mycorpus-xx-yy" / "checkpoints" / "last.ckpt"
    assert checkpoint.is_file()
    assert not (trained / "runs" / "tiny").exists(), (
        "a run on other data must not use the config's own directory"
    )
    saved = torch.load(checkpoint, weights_only=True)[ARTIFACT_KEY]["run_config"]
    assert "run_dir: runs/tiny-mycorpus-xx-yy" in saved
    assert f"corpus_dir: {trained / 'mycorpus'}" in saved, (
        "the corpus is recorded as an absolute path"
    )


def test_files_get_the_users_permissions(trained):
    umask = os.umask(0o022)
    os.umask(umask)
    expected = 0o666 & ~umask
    checkpoint = trained / "runs" / "tiny-mycorpus-xx-yy" / "checkpoints" / "last.ckpt"
    assert stat.S_IMODE(checkpoint.stat().st_mode) == expected
    [vocabulary] = (trained / "cache").glob("spm-*.model")
    assert stat.S_IMODE(vocabulary.stat().st_mode) == expected


def test_progress_is_printed_as_lines_without_a_terminal_and_noise_is_silenced(tmp_path, capfd):
    languages_xx_yy(tmp_path / "corpus")
    argv = fit_on("corpus", "xx", "yy", steps=20)
    argv += ["--trainer.log_every_n_steps", "10", "--trainer.enable_progress_bar", "null"]
    code, err = run_in(tmp_path, argv, capfd)
    assert code == 0, err
    assert "translate-train: run directory runs/tiny-corpus-xx-yy" in err
    lines = [line for line in err.splitlines() if line.startswith("translate-train: step ")]
    assert [line.split(" · ")[0] for line in lines] == [
        "translate-train: step 10/20 (50%)",
        "translate-train: step 20/20 (100%)",
    ]
    assert all(" · loss " in line and "tgt tok/s" in line and " · ETA " in line for line in lines)
    assert "translate-train: validation at step 20: bleu " in err
    assert "translate-train: model 53," in err
    assert "tie_embeddings auto → all (shared mass of the joint vocabulary 0." in err
    assert "checkpoint runs/tiny-corpus-xx-yy/checkpoints/last.ckpt" in err
    for noise in ("💡 Tip", "LeafSpec", "Total FLOPs", "not supported by the model summary"):
        assert noise not in err


def test_test_takes_the_data_settings_from_the_checkpoint(trained, capfd):
    """No --data.* flags: without the checkpoint's settings this would load the bundled en-de
    corpus, which has no xx-yy split, or train another vocabulary."""
    checkpoint = "runs/tiny-mycorpus-xx-yy/checkpoints/last.ckpt"
    code, err = run_in(trained, ["test", "--config", TINY, "--ckpt_path", checkpoint], capfd)
    assert code == 0, err[-2000:]
    assert (
        f"data settings from {checkpoint}:" in err and "src_lang=xx" in err and "tgt_lang=yy" in err
    )
    assert "run directory runs/tiny-mycorpus-xx-yy" in err


def test_a_new_run_does_not_replace_a_checkpoint_of_other_data(trained, capfd):
    code, err = run_in(
        trained, ["fit", "--config", TINY, "--run_dir", "runs/tiny-mycorpus-xx-yy"], capfd
    )
    assert code == 2
    [line] = err.strip().splitlines()[-1:]
    assert line.startswith(
        "translate-train: error: runs/tiny-mycorpus-xx-yy/checkpoints/last.ckpt is a model of other data"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--data.max_length", "300"],
            "data.max_length 300 needs 301 positions (EOS or BOS added), but "
            "model.model.max_positions is 256",
        ),
        (
            ["--model.warmup_steps", "-1"],
            "model.warmup_steps must be 0 (no warm-up) or more, got -1",
        ),
        (["--ckpt_path", "missing.ckpt"], "--ckpt_path missing.ckpt: no such checkpoint file"),
        (["--data.corpus_dir", "tsv"], "tsv/train.en: no such file; "),
        (
            ["--model.step", "compiled"],
            "model.step compiled: the batches have no fixed shapes (data.batch_shapes exact); "
            "set data.batch_shapes fixed",
        ),
        (
            ["--data.batch_shapes", "fixed", "--model.step", "compiled", "--model.compile", "true"],
            "model.compile and model.step compiled both compile the training step",
        ),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path, capfd, argv, message):
    (tmp_path / "tsv").mkdir()
    (tmp_path / "tsv" / "train.tsv").write_text("a\tb\n")
    code, err = run_in(
        tmp_path, ["fit", "--config", TINY, "--data.cache_dir", "cache", *argv], capfd
    )
    assert code == 2
    assert "Traceback" not in err
    assert message in err.strip().splitlines()[-1]
    if "tsv" in argv:
        assert "holds train.tsv: that needs corpus format 'tsv' (--data.corpus_format tsv)" in err


def fake_checkpoint(path: Path, step: int, optimizer: bool = True) -> None:
    checkpoint = {"state_dict": {}, ARTIFACT_KEY: {}, "global_step": step}
    if optimizer:
        checkpoint["optimizer_states"] = [{}]
    torch.save(checkpoint, path)


def test_resume_takes_the_newest_complete_checkpoint(tmp_path):
    """A kill between saving step=150.ckpt and last.ckpt leaves last.ckpt at step 100."""
    fake_checkpoint(tmp_path / "last.ckpt", 100)
    fake_checkpoint(tmp_path / "step=150.ckpt", 150)
    fake_checkpoint(tmp_path / "averaged.ckpt", 400, optimizer=False)  # cannot be resumed
    (tmp_path / "step=200.ckpt").write_bytes(
        (tmp_path / "step=150.ckpt").read_bytes()[:100]
    )  # cut short
    assert newest_checkpoint([tmp_path]) == (tmp_path / "step=150.ckpt", 150)
    fake_checkpoint(tmp_path / "last.ckpt", 150)
    assert newest_checkpoint([tmp_path]) == (tmp_path / "last.ckpt", 150)


def test_ckpt_path_last_resumes_from_the_newest_checkpoint(trained, capfd):
    directory = trained / "runs" / "tiny-mycorpus-xx-yy" / "checkpoints"
    shutil.copy(directory / "last.ckpt", directory / "step30.ckpt")
    checkpoint = torch.load(directory / "last.ckpt", weights_only=True)
    checkpoint["global_step"] = 10  # as if the run was killed before last.ckpt caught up
    torch.save(checkpoint, directory / "last.ckpt")
    code, err = run_in(
        trained,
        [
            "fit",
            "--config",
            TINY,
            "--data.corpus_dir",
            "mycorpus",
            "--data.src_lang",
            "xx",
            "--data.tgt_lang",
            "yy",
            "--data.cache_dir",
            "cache",
            "--ckpt_path",
            "last",
        ],
        capfd,
    )
    assert code == 0, err[-2000:]
    assert (
        f"resuming from {Path('runs/tiny-mycorpus-xx-yy/checkpoints/step30.ckpt')} (step 30)" in err
    )


@pytest.mark.parametrize("native, expected", [(True, "bf16-mixed"), (False, "32-true")])
def test_precision_is_chosen_for_the_cpu(monkeypatch, capfd, native, expected):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = Namespace(trainer=Namespace(precision=None, accelerator="cpu"))
    TranslateCLI.choose_precision(config)
    assert config.trainer.precision == expected
    assert f"translate-train: precision {expected} (" in capfd.readouterr().err
    given = Namespace(trainer=Namespace(precision="32-true", accelerator="cpu"))
    TranslateCLI.choose_precision(given)
    assert given.trainer.precision == "32-true", (
        "a precision the config or command line gives is kept"
    )


def test_precision_on_gpus_without_bfloat16_is_float16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    assert precision.choose_precision("gpu")[0] == "16-mixed"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    assert precision.choose_precision("auto")[0] == "bf16-mixed"


def test_cpu_flags_decide_without_torchs_probe(monkeypatch):
    monkeypatch.delenv(precision.NO_BF16_ENV, raising=False)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.setattr(torch.cpu, probe, lambda: False, raising=False)
    monkeypatch.setattr(precision.platform, "system", lambda: "Linux")
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"fpu", "avx2"})
    assert not precision.cpu_has_native_bf16()
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"fp", "asimd", "bf16"})  # Arm FEAT_BF16
    assert precision.cpu_has_native_bf16()
    # TRANSLATE_CPU_BF16=0 (make test-avx2): chosen as on a CPU without them
    monkeypatch.setenv(precision.NO_BF16_ENV, "0")
    assert not precision.cpu_has_native_bf16()
    assert precision.choose_precision("cpu")[0] == "32-true"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_train_passes_precision_run_dir_and_arguments():
    result = subprocess.run(
        [
            "make",
            "-n",
            "-o",
            "install",
            "-o",
            "corpus",
            "train",
            "PRECISION=32-true",
            "RUN_DIR=/tmp/somewhere",
            "TRAIN_ARGS=--data.max_tokens 1000",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    commands = result.stdout.replace("\\\n", " ").splitlines()
    [fit] = [line for line in commands if "translate-train fit" in line]
    assert (
        "--run_dir /tmp/somewhere" in fit
        and "--trainer.precision 32-true" in fit
        and "--data.max_tokens 1000" in fit
    )
    assert "translate-eval --checkpoint /tmp/somewhere/checkpoints/last.ckpt" in result.stdout


def test_help_shows_descriptions_and_the_configs_values(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(REPO / "configs" / "default.yaml"), "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "--data.vocab_size VOCAB_SIZE SentencePiece vocabulary size. (type: int, default: 4000)"
        in help_text
    )
    assert "--model.lr LR peak learning rate of Adam. (type: float, default: 0.002)" in help_text


def test_auto_tie_is_chosen_from_the_data_printed_stored_and_inspected(tmp_path, capfd):
    """A target in a script the source never uses: tie_embeddings auto (configs/tiny.yaml)
    does not tie three ways, says why, and the checkpoint and translate-inspect keep it."""
    from translate.cli import inspect as inspect_cli
    from translate.model.tying import BELOW_THRESHOLD, SHARED_MASS_THRESHOLD

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in FIXTURE.iterdir():
        split, lang = path.name.split(".")
        text = path.read_text(encoding="utf-8")
        if lang == "de":  # German's letters as CJK ideographs, written without spaces
            text = "".join(chr(0x4E00 + ord(c)) if c.isalpha() else c for c in text if c != " ")
        (corpus / f"{split}.{'xx' if lang == 'en' else 'zz'}").write_text(text, encoding="utf-8")
    argv = fit_on("corpus", "xx", "zz", steps=2) + ["--tune_search", "false"]
    code, err = run_in(tmp_path, argv, capfd)
    assert code == 0, err[-2000:]
    line = next(line for line in err.splitlines() if line.startswith("translate-train: model "))
    assert f"tie_embeddings auto → {BELOW_THRESHOLD}" in line
    checkpoint = tmp_path / "runs" / "tiny-corpus-xx-zz" / "checkpoints" / "last.ckpt"
    artifact = torch.load(checkpoint, map_location="cpu", weights_only=True)[ARTIFACT_KEY]
    choice = artifact["tie_choice"]
    assert choice["asked"] == "auto" and choice["mode"] == BELOW_THRESHOLD
    assert choice["threshold"] == SHARED_MASS_THRESHOLD
    assert 0 <= choice["shared_mass"] < SHARED_MASS_THRESHOLD
    assert f"{choice['shared_mass']:.3f} < {SHARED_MASS_THRESHOLD}" in line
    assert artifact["model_config"]["tie_embeddings"] == BELOW_THRESHOLD
    assert inspect_cli.main(["--checkpoint", str(checkpoint)]) == 0
    shown = capfd.readouterr().out
    assert f"tie: tie_embeddings auto → {BELOW_THRESHOLD}" in shown
    assert f"{choice['shared_mass']:.3f} < {SHARED_MASS_THRESHOLD}" in shown
    # resumed with a tie that builds other matrices: one line naming the flag, not a size mismatch
    argv = fit_on("corpus", "xx", "zz", steps=4)
    argv += ["--model.model.tie_embeddings", "all", "--ckpt_path", str(checkpoint)]
    code, err = run_in(tmp_path, argv, capfd)
    assert code != 0
    assert (
        f"the checkpoint was trained with tie_embeddings {BELOW_THRESHOLD}, but this run builds "
        f"tie_embeddings all; resume with --model.model.tie_embeddings {BELOW_THRESHOLD}"
    ) in err
