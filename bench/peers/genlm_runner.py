"""genlm-bytes' byte-level beam over one text, run inside the peer's own virtualenv.

Standalone (it imports nothing from marginal_core): bench/peers/genlm_peer.py starts it with the
venv's python and talks JSON lines over stdin/stdout. The first line loads the model and the
vocabulary; every later line is one text: its complete tokenizations at one or more beam widths,
or (``"prefix": true``) the beam's prefix probability ``logZ`` after every byte at one width, or
(``"next": true``) the next byte's distribution after it, or (``"chars": [...]``) log P(c | text)
of each character c, logp_next chained over c's bytes. Only
the beam is timed: loading, building the byte trie and prefilling the context happen before the
clock starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from genlm.backend.llm import AsyncTransformer  # noqa: E402
from genlm.backend.tokenization import Token  # noqa: E402
from genlm.bytes import BeamParams, ByteBeamState, LazyTrieState, StatefulTokenizedLM  # noqa: E402
from genlm.bytes.trie import AsyncTokenByteTrie, TokenByteTrie, TrieMode  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.disable_progress_bar()
warnings.filterwarnings("ignore", message="Sparse (CSR tensor support|invariant checks)")

# No UTF-8 text holds the byte 0xFF, so a token spelled this way is never on a path, while its
# probability still counts in the trie's root mass (the softmax stays over the full vocabulary).
UNREACHABLE = b"\xff"


class Float64Trie(TokenByteTrie):
    """genlm's byte trie with each node's token mass summed in float64 (its own sum casts the
    weights and the reachability matrix to float32, with no option for the dtype)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.matrices = {TrieMode.WITH_EOS: self.M_with_eos.to(torch.float64),
                         TrieMode.WITHOUT_EOS: self.M_no_eos.to(torch.float64)}

    def batch_weight_sum(self, ws, mode=None):
        weights = torch.stack([torch.as_tensor(w, device=self.device).to(torch.float64) for w in ws])
        return torch.sparse.mm(weights[:, self.token_ids], self.matrices[mode or TrieMode.WITHOUT_EOS])


class Peer:
    """One model in genlm's Hugging Face backend, with byte tries per set of byte pieces."""

    def __init__(self, model: str, tokenizer: str, surfaces: list[str | None], byte_pieces: list[int]) -> None:
        torch.set_grad_enabled(False)
        hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
        self.llm = AsyncTransformer(hf_model.to("cpu").eval(), AutoTokenizer.from_pretrained(tokenizer))
        rows = hf_model.get_output_embeddings().weight.shape[0]
        self.surfaces = [None if s is None else bytes.fromhex(s) for s in surfaces]
        self.surfaces += [None] * (rows - len(self.surfaces))  # output rows past the tokenizer
        self.byte_pieces = set(byte_pieces)
        self.tries: dict[tuple[frozenset[int], bool], AsyncTokenByteTrie] = {}

    def trie(self, needed: frozenset[int], float64: bool = False) -> AsyncTokenByteTrie:
        """The byte trie of our vocabulary: ordinary tokens plus the byte pieces the text needs,
        its masses summed in float32 (genlm's own) or float64."""
        if (needed, float64) not in self.tries:
            tokens = [
                Token(token_id=i, byte_string=s if s is not None and (i not in self.byte_pieces or i in needed)
                      else UNREACHABLE)
                for i, s in enumerate(self.surfaces)
            ]
            kind = Float64Trie if float64 else TokenByteTrie
            self.tries[needed, float64] = AsyncTokenByteTrie(kind(decode=tokens, device="cpu"))
        return self.tries[needed, float64]

    async def advance(self, trie: AsyncTokenByteTrie, context: list[int], data: bytes, width: int
                      ) -> tuple[ByteBeamState, list[float], float]:
        """The beam (default healing) fed data's bytes after context: the last beam, its logZ
        before the first byte and after each, and the perf_counter when the clock started."""
        self.llm.clear_cache()
        self.llm.cache_kv(context)  # the context's KV, as ours is prefilled outside the timing
        started = time.perf_counter()
        start = LazyTrieState(StatefulTokenizedLM(self.llm, list(context)), trie, trie.trie.root, 0.0,
                              mode=TrieMode.WITH_EOS)
        beam = ByteBeamState([await start.materialize()], BeamParams(K=width))
        log_z = [float(beam.logZ)]
        for byte in data:
            beam = await (beam.prune() << byte)
            log_z.append(float(beam.logZ))
        return beam, log_z, started

    async def prefix(self, trie: AsyncTokenByteTrie, context: list[int], data: bytes, width: int) -> dict:
        """The beam's logZ after every byte of data: its prefix probability (covering tokens)."""
        _, log_z, started = await self.advance(trie, context, data, width)
        seconds = time.perf_counter() - started
        await trie.cleanup()
        return {"width": width, "seconds": seconds, "log_z": log_z}

    async def next_byte(self, trie: AsyncTokenByteTrie, context: list[int], data: bytes, width: int) -> dict:
        """log P(next byte | data) for the 256 bytes, genlm's end of token and its EOS (258 values,
        index 256 and 257), after prefilling data's bytes at width K; timed from the start state
        (context KV cached) to logp_next's result."""
        self.llm.clear_cache()
        self.llm.cache_kv(context)
        started = time.perf_counter()
        start = LazyTrieState(StatefulTokenizedLM(self.llm, list(context)), trie, trie.trie.root, 0.0,
                              mode=TrieMode.WITH_EOS)
        beam = await ByteBeamState([await start.materialize()], BeamParams(K=width)).prefill(data)
        log_p = (await beam.logp_next()).ps
        seconds = time.perf_counter() - started
        await trie.cleanup()
        return {"width": width, "seconds": seconds, "log_p": [float(x) for x in log_p], "states": len(beam)}

    async def next_chars(self, trie: AsyncTokenByteTrie, context: list[int], data: bytes, width: int,
                         chars: list[bytes]) -> dict:
        """log P(c | data) for each character c (its bytes): data's bytes prefilled at width K, then
        logp_next chained over c's bytes (the beam advanced by each byte before the next's
        logp_next; beams shared by characters that share their first bytes); -inf where the beam
        empties. Timed from the start state (context KV cached) to the last character's value."""
        self.llm.clear_cache()
        self.llm.cache_kv(context)
        started = time.perf_counter()
        start = LazyTrieState(StatefulTokenizedLM(self.llm, list(context)), trie, trie.trie.root, 0.0,
                              mode=TrieMode.WITH_EOS)
        beams = {b"": await ByteBeamState([await start.materialize()], BeamParams(K=width)).prefill(data)}
        next_logp: dict[bytes, list[float]] = {}
        out = []
        for char in chars:
            total = 0.0
            for i, byte in enumerate(char):
                so_far = char[:i]
                if so_far not in beams:
                    beams[so_far] = await (beams[char[:i - 1]].prune() << char[i - 1])
                if len(beams[so_far]) == 0:
                    total = float("-inf")
                    break
                if so_far not in next_logp:
                    next_logp[so_far] = [float(x) for x in (await beams[so_far].logp_next()).ps]
                total += next_logp[so_far][byte]
            out.append(total)
        seconds = time.perf_counter() - started
        await trie.cleanup()
        return {"width": width, "seconds": seconds, "log_p": out, "states": len(beams[b""])}

    async def beam(self, trie: AsyncTokenByteTrie, context: list[int], data: bytes, width: int) -> dict:
        """The beam over data after context; every surviving state's last token committed."""
        beam, _, started = await self.advance(trie, context, data, width)
        complete: dict[tuple[int, ...], float] = {}
        for state in beam.prune():
            for done in state.extend_all():  # commit the final token: a complete tokenization
                path = tuple(done.lm_state.context[len(context):])
                complete.setdefault(path, float(done.weight))
        seconds = time.perf_counter() - started
        await trie.cleanup()
        return {"width": width, "seconds": seconds, "paths": [list(p) for p in complete],
                "log_w": list(complete.values()), "prefix_log_z": float(beam.logZ)}

    def run(self, request: dict) -> dict:
        data = bytes.fromhex(request["data"])
        if request.get("chars") is not None:
            trie = self.trie(frozenset(request["byte_pieces"]))
            chars = [bytes.fromhex(c) for c in request["chars"]]
            return asyncio.run(self.next_chars(trie, request["context_ids"], data, request["width"], chars))
        if request.get("next"):
            trie = self.trie(frozenset(request["byte_pieces"]))
            return asyncio.run(self.next_byte(trie, request["context_ids"], data, request["width"]))
        if request.get("prefix"):
            trie = self.trie(frozenset(request["byte_pieces"]), float64=request.get("float64", False))
            return asyncio.run(self.prefix(trie, request["context_ids"], data, request["width"]))
        trie = self.trie(frozenset(request["byte_pieces"]))
        runs = [asyncio.run(self.beam(trie, request["context_ids"], data, k)) for k in request["widths"]]
        return {"runs": runs}


def main() -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever the libraries print stays off the protocol
    torch.set_num_threads(int(os.environ.get("MARGINAL_PEER_THREADS", torch.get_num_threads())))
    peer: Peer | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if peer is None:
                started = time.perf_counter()
                with open(request["vocab"]) as f:
                    vocab = json.load(f)
                peer = Peer(request["model"], request["tokenizer"], vocab["surfaces"], vocab["byte_pieces"])
                reply = {"ready": True, "load_s": time.perf_counter() - started}
            else:
                reply = peer.run(request)
        except Exception as error:  # reported to the bench, which raises it there
            reply = {"error": f"{type(error).__name__}: {error}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
