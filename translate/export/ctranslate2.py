"""`export_ctranslate2`: a checkpoint as a CTranslate2 model directory for others to run (the spec
is built in `decode.ctranslate2_model`, which the CTranslate2 engine decodes with too), for every
norm placement and tie."""

from __future__ import annotations

from pathlib import Path

from translate.decode.ctranslate2_model import write_ctranslate2
from translate.decode.ctranslate2_search import (
    CTranslate2Error,
    load_translator,
    require_ctranslate2,
)
from translate.decode.loaded_model import load_model
from translate.export.output import ExportError, prepare_output, refuse_sharing_variants, staged


def export_ctranslate2(
    checkpoint_path: str | Path,
    out_dir: str | Path,
    overwrite: bool = False,
    quantization: str | None = None,
) -> Path:
    """Write `checkpoint_path` as a CTranslate2 model directory at `out_dir`; returns `out_dir`.

    Every tie mode and both norm placements are supported. The directory holds CTranslate2's
    `model.bin`, `config.json` and vocabularies, plus `source.spm`/`target.spm` for
    tokenization. `ctranslate2.Translator(out_dir).translate_batch(pieces)` takes the source
    SentencePiece pieces without EOS (the model appends it) and returns target pieces.
    `quantization` is CTranslate2's (e.g. "int8", "float16"); None keeps float32 weights.
    Written into a temporary directory beside `out_dir`, then renamed into place.
    """
    try:
        require_ctranslate2()
    except CTranslate2Error as error:
        raise ExportError(f"exporting to CTranslate2: {error}") from None
    out_dir = Path(out_dir)
    prepare_output(out_dir, overwrite)
    loaded = load_model(checkpoint_path)
    refuse_sharing_variants(loaded.model, "a CTranslate2 model")
    with staged(out_dir, overwrite) as tmp:
        write_ctranslate2(loaded, tmp, quantization)
        load_translator(tmp)  # loads, or fails here and not for the user
    return out_dir
