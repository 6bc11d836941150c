"""The library's front door: `Translator(checkpoint).translate(lines)`, what translate-cli gives
the same lines with the same settings, from Python.

    from translate import Translator

    translator = Translator("runs/default/checkpoints/last.ckpt")
    translator.translate(["Click the OK button."])            # ['Klicken Sie auf OK.']
    translator.translate(lines, beam=1, target_lang="ja")     # any `SearchSettings` field
    translator.hypotheses(lines, beam=5, n_best=3)            # n-best lists with their scores
"""

from __future__ import annotations

from collections.abc import Iterable

from translate.decode import pipeline
from translate.decode.device import cuda_available, prepare_decoding
from translate.decode.engine import load_searching
from translate.decode.settings import EngineChoice, SearchSettings
from translate.defaults import BATCH_TOKENS


class Translator:
    """A checkpoint loaded once (on `device`: "auto" takes CUDA where torch sees it; `quantize`
    "int8" on the CPU) and searched by `engine` ("pytorch", "ctranslate2" or "auto", see
    `engine.choose_engine`; `self.engine` says which and why), translating lists of lines: one
    translation a line, in order, an empty line for an empty one, nothing dropped. Settings a
    call does not give are the checkpoint's own (the beam and length penalty tuned for it, its
    output length rule), as translate-cli's are."""

    def __init__(
        self,
        checkpoint: str,
        device: str = "auto",
        quantize: str = "none",
        batch_tokens: int = BATCH_TOKENS,
        engine: str = "pytorch",
        engine_cache: str | None = None,
    ) -> None:
        if device == "auto":
            device = "cuda" if cuda_available() else "cpu"
        prepare_decoding(device)
        self.loaded = load_searching(
            checkpoint, device, EngineChoice(engine, quantize, engine_cache)
        )
        self.engine = self.loaded.engine
        self.batch_tokens = batch_tokens

    def settings(self, **given) -> SearchSettings:
        """The search `given` asks for (`SearchSettings` fields), the checkpoint's defaults for
        the beam and length penalty where not given."""
        given["beam"], given["length_penalty"] = self.loaded.search_defaults().fill(
            given.get("beam"), given.get("length_penalty")
        )
        return SearchSettings(**given)

    def translate(self, lines: Iterable[str], **settings) -> list[str]:
        """Each line's best translation (with `n_best`, that many a line, best first)."""
        return pipeline.translate_lines(
            self.loaded, list(lines), self.settings(**settings), self.batch_tokens
        )

    def hypotheses(self, lines: Iterable[str], **settings) -> list[list[pipeline.Translation]]:
        """Each line's `n_best` translations, best first, with their length-normalized scores and
        log-probabilities."""
        return pipeline.translate_nbest(
            self.loaded, list(lines), self.settings(**settings), self.batch_tokens
        )
