"""translate-eval's figures against sacrebleu's own command line, and torchmetrics' BLEU against sacrebleu."""

import subprocess
import sys

import pytest
import torch
from tolerances import within_rounding

from translate.cli.evaluate import main as eval_main
from translate.score.metrics import corpus_scores
from translate.text.corpus import read_lines
from translate.train.lightning_module import CorpusBLEU


def degrade(lines):
    """A deterministic imperfect system output: drop every third word, swap some lines."""
    out = [" ".join(w for i, w in enumerate(line.split()) if i % 3 != 1) for line in lines]
    out[::7] = lines[1::7][: len(out[::7])] + out[::7][len(lines[1::7]) :]
    return out


def test_translate_eval_equals_sacrebleu_cli(tmp_path, fixture_dir, capsys):
    refs = read_lines(fixture_dir / "test.de")
    hyp_path = tmp_path / "hyp.de"
    hyp_path.write_text("".join(h + "\n" for h in degrade(refs)), encoding="utf-8")
    assert (
        eval_main(
            ["--hypotheses", str(hyp_path), "--reference", str(fixture_dir / "test.de"), "--json"]
        )
        == 0
    )
    import json

    ours = json.loads(capsys.readouterr().out)
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "sacrebleu",
            str(fixture_dir / "test.de"),
            "-i",
            str(hyp_path),
            "-m",
            "bleu",
            "chrf",
            "-b",
            "-f",
            "text",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert 5 < ours["bleu"] < 95
    assert round(ours["bleu"], 1) == float(cli[0])
    assert round(ours["chrf"], 1) == float(cli[1])
    assert ours["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")


def test_translate_eval_refuses_line_count_mismatch(tmp_path, fixture_dir, capsys):
    (tmp_path / "hyp.de").write_text("nur eine Zeile\n")
    assert (
        eval_main(
            ["--hypotheses", str(tmp_path / "hyp.de"), "--reference", str(fixture_dir / "test.de")]
        )
        == 2
    )
    assert (
        f"{tmp_path / 'hyp.de'} has 1 lines but {fixture_dir / 'test.de'} has"
        in capsys.readouterr().err
    )


def test_translate_eval_checks_device_and_precision_like_translate_cli(tmp_path, capsys):
    # refused before the (missing) checkpoint is opened: the settings are checked first
    assert (
        eval_main(
            [
                "--checkpoint",
                str(tmp_path / "absent.ckpt"),
                "--precision",
                "16-mixed",
                "--device",
                "cpu",
            ]
        )
        == 2
    )
    assert "--precision 16-mixed (float16 autocast) needs a CUDA device" in capsys.readouterr().err


@pytest.mark.numerical
def test_validation_bleu_metric_equals_sacrebleu_over_parts(fixture_dir):
    refs = read_lines(fixture_dir / "dev.de")
    for hyps in (
        degrade(refs),
        [" ".join(r.split()[::2]) for r in refs],
    ):  # the second needs smoothing
        whole = corpus_scores(hyps, refs).bleu
        metric = CorpusBLEU()
        third = len(refs) // 3  # updated in parts, as over batches or ranks
        for start in (0, third, 2 * third):
            end = None if start == 2 * third else start + third
            metric.update(hyps[start:end], refs[start:end])
        # sacrebleu's formula on the same whole counts: the logs of 4 precisions and of the brevity penalty
        # summed, an exp and a percentage
        assert float(metric.compute()) == within_rounding(whole, torch.float64, 2 * 4 + 4)
        assert 0 < whole < 100


CHINESE = [
    "点击工具栏上的图标以插入表格。",
    "选择要删除的行，然后按删除键。",
    "此命令打开对话框，您可以在其中更改字体。",
    "文档保存为新文件时，原文件保持不变。",
    "单元格的内容可以复制到剪贴板。",
    "如果没有选中的文本，此命令不可用。",
]


@pytest.mark.numerical
def test_validation_bleu_tokenizes_each_sentence_as_its_language(fixture_dir):
    """Validation BLEU tokenizes as translate-eval does (zh for Chinese), also when one set
    mixes target languages: against one corpus score of the sentences tokenized beforehand,
    each by its own language's sacrebleu tokenizer."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

    german = read_lines(fixture_dir / "dev.de")[: 3 * len(CHINESE)]
    chinese_hyps = [line[: len(line) * 2 // 3] + line[-1] for line in CHINESE]
    metric = CorpusBLEU()
    metric.update(chinese_hyps, CHINESE, ["zh-CN"] * len(CHINESE))
    alone = corpus_scores(chinese_hyps, CHINESE, target_lang="zh-CN").bleu
    assert float(metric.compute()) == within_rounding(alone, torch.float64, 2 * 4 + 4)
    untokenized = corpus_scores(chinese_hyps, CHINESE).bleu  # 13a leaves the lines whole
    assert abs(alone - untokenized) > 10

    hyps, refs = degrade(german) + chinese_hyps, german + CHINESE
    languages = ["de"] * len(german) + ["zh-CN"] * len(CHINESE)
    mixed = CorpusBLEU()
    order = list(range(0, len(refs), 2)) + list(range(1, len(refs), 2))  # batches mix them
    for part in (order[: len(order) // 2], order[len(order) // 2 :]):
        mixed.update([hyps[i] for i in part], [refs[i] for i in part], [languages[i] for i in part])
    tokenizers = {"de": Tokenizer13a(), "zh-CN": TokenizerZh()}
    tokenized = [
        [tokenizers[lang](line) for line, lang in zip(lines, languages, strict=True)]
        for lines in (hyps, refs)
    ]
    whole = BLEU(tokenize="none").corpus_score(tokenized[0], [tokenized[1]]).score
    assert float(mixed.compute()) == within_rounding(whole, torch.float64, 2 * 4 + 4)
    assert 0 < whole < 100
