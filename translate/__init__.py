"""An encoder-decoder Transformer translation toolkit on PyTorch Lightning.

Floors, each importing only those below it (checked by the import contracts in pyproject.toml):
  cli/                      parse flags, call the library, print
  train/                    Lightning: training and batch prediction; may use every floor below
  serve/, export/           the HTTP service; other toolkits' formats
  decode/                   search, the lines-in/lines-out pipeline, tuning
  model/                    the Transformer, its fast paths, checkpoints
  text/                     corpora, vocabulary, languages, metrics
  errors, files, defaults, partial_output, parent_watch, process_group: the ground every floor stands on
Nothing below train/ imports Lightning or torchmetrics, so translating starts fast.

The front door from Python: `from translate import Translator`
(translate/decode/translator.py), imported only when asked for, so that `import translate` and
every command's `--help` stay free of torch.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Translator":
        from translate.decode.translator import Translator

        return Translator
    raise AttributeError(f"module 'translate' has no attribute {name!r}")
