"""The model behind Lightning's LitServe, for scripts/benchmarks/benchmark_serve.py's comparison: POST
/translate {"text": [line]} -> {"translations": [translation]}, LitServe batching the requests.
(Its own module: LitServe pickles the API object into its worker process.)"""

from __future__ import annotations

import litserve as ls

from translate.decode.settings import SearchSettings  # noqa: E402


class TranslateAPI(ls.LitAPI):
    def __init__(self, checkpoint: str, threads: int, **settings) -> None:
        super().__init__(**settings)
        self.checkpoint, self.threads = checkpoint, threads

    def setup(self, device) -> None:
        import torch

        from translate.decode.loaded_model import load_model

        torch.set_num_threads(self.threads)
        # Packed, with oneDNN's caches bounded as translate-serve's model process (the same model path).
        self.loaded = load_model(self.checkpoint, torch.device("cpu"))
        self.search = self.loaded.search_defaults()

    def decode_request(self, request: dict) -> str:
        return request["text"][0]

    def predict(self, lines: list[str]) -> list[str]:
        from translate.decode.pipeline import translate_lines
        from translate.defaults import BATCH_TOKENS

        return translate_lines(
            self.loaded,
            list(lines),
            SearchSettings(beam=self.search["beam"], length_penalty=self.search["length_penalty"]),
            batch_tokens=BATCH_TOKENS,
        )

    def encode_response(self, output: str) -> dict:
        return {"translations": [output]}


def serve(
    checkpoint: str, port: int, threads: int, max_batch_size: int, batch_timeout: float
) -> None:
    """On 127.0.0.1 only, until terminated."""
    from translate.serve.worker import bound_onednn_caches

    bound_onednn_caches()
    api = TranslateAPI(
        checkpoint,
        threads,
        max_batch_size=max_batch_size,
        batch_timeout=batch_timeout,
        api_path="/translate",
    )
    ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=1).run(
        host="127.0.0.1", port=port, generate_client_file=False, log_level="warning"
    )
