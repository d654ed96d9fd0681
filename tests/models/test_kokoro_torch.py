"""The torch weights rebuilt from the int8 ONNX model: layout, content, determinism, and the conversion rules.

Whether the rebuilt model *sounds* like the ONNX model is tests/endpoint/test_engine_parity.py's job.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.kokoro_torch_build import ONNX_FILE, VOICES_FILE, rebuilt_models_dir
from voicecli.models.kokoro_torch import (
    CONFIG_NAME,
    MODULES,
    PTH_NAME,
    VOICES_DIRNAME,
    RebuildError,
    _module_path,
    _split_weight_norm,
    _torch_gates,
    load_kokoro_config,
    rebuild_from_onnx,
    rebuilt_files,
)

HEXGRAD_KEYS = 688
"""Parameters of the official kokoro-v1_0.pth (bert, bert_encoder, predictor, text_encoder, decoder)."""
VOICES = 54


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> Path:
    return rebuilt_models_dir(tmp_path_factory, models_dir) / "kokoro-torch"


@pytest.fixture(scope="module")
def state(rebuilt: Path) -> dict[str, dict[str, torch.Tensor]]:
    loaded: dict[str, dict[str, torch.Tensor]] = torch.load(rebuilt / PTH_NAME, map_location="cpu",
                                                            weights_only=True)
    return loaded


def _digest(directory: Path) -> dict[str, str]:
    return {path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in rebuilt_files(directory)}


# --- conversion rules (fast, no model) ---

def test_module_paths_follow_the_export_scopes() -> None:
    assert _module_path("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant") == "text_encoder.cnn.0.0"
    assert (_module_path("/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query_3/MatMul_quant")
            == "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query")
    assert _module_path("/encoder/F0.1/pool/ConvTranspose") == "predictor.F0.1.pool"
    assert _module_path("/encoder/shared/LSTM_quant") == "predictor.shared"
    assert _module_path("/encoder/predictor/text_encoder/lstms.2/LSTM_quant") == "predictor.text_encoder.lstms.2"
    assert (_module_path("/decoder/decoder/generator/resblocks.1/convs1.0/Conv_quant")
            == "decoder.generator.resblocks.1.convs1.0")
    assert _module_path("/decoder/decoder/asr_res/asr_res.0/Conv_quant") == "decoder.asr_res.0"


def test_lstm_gates_go_from_onnx_iofc_to_torch_ifgo() -> None:
    rows = np.repeat(np.arange(4, dtype=np.float32), 2)[:, None]  # blocks i=0, o=1, f=2, c=3, 2 rows each
    assert _torch_gates(rows).ravel().tolist() == [0, 0, 2, 2, 3, 3, 1, 1]


def test_weight_norm_split_rebuilds_the_weight_and_survives_zero_channels() -> None:
    weight = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    weight[1] = 0.0  # an output channel int8 rounded away
    v, g = _split_weight_norm(weight)
    assert g.shape == (3, 1, 1)
    assert g[1, 0, 0] == 0.0 and np.all(v[1] == 1.0)
    norm_v = np.sqrt(np.sum(v * v, axis=(1, 2), keepdims=True))
    np.testing.assert_allclose(g * v / norm_v, weight, atol=1e-6)  # what torch's weight_norm computes


# --- the rebuilt files ---

@pytest.mark.slow
def test_pth_has_the_hexgrad_layout_without_nans(state: dict[str, dict[str, torch.Tensor]]) -> None:
    assert tuple(state) == MODULES
    tensors = [t for module in state.values() for t in module.values()]
    assert len(tensors) == HEXGRAD_KEYS
    assert all(t.dtype == torch.float32 for t in tensors)
    assert all(bool(torch.isfinite(t).all()) for t in tensors)
    assert sum(t.numel() for t in tensors) > 80_000_000  # Kokoro-82M
    # Spot checks of the rules: LayerNorm kept from the graph, InstanceNorm affine is identity.
    assert not torch.all(state["bert"]["embeddings.LayerNorm.weight"] == 1.0)
    assert torch.all(state["decoder"]["encode.norm1.norm.weight"] == 1.0)
    assert torch.all(state["decoder"]["encode.norm1.norm.bias"] == 0.0)


@pytest.mark.slow
def test_voices_are_the_npz_packs_as_torch_tensors(rebuilt: Path, models_dir: Path) -> None:
    paths = sorted((rebuilt / VOICES_DIRNAME).glob("*.pt"))
    assert len(paths) == VOICES
    with np.load(models_dir / "kokoro" / VOICES_FILE) as npz:
        assert sorted(p.stem for p in paths) == sorted(npz.files)
        for path in (paths[0], paths[-1]):
            pack = torch.load(path, weights_only=True)
            assert pack.shape == (510, 1, 256) and pack.dtype == torch.float32
            np.testing.assert_array_equal(pack.numpy(), npz[path.stem])


@pytest.mark.slow
def test_config_is_kokoros(rebuilt: Path) -> None:
    config = json.loads((rebuilt / CONFIG_NAME).read_text(encoding="utf-8"))
    assert config == load_kokoro_config()
    assert config["n_token"] == 178 and len(config["vocab"]) == 114


@pytest.mark.slow
def test_rebuild_is_deterministic_and_reports_progress(
    rebuilt: Path, models_dir: Path, tmp_path: Path
) -> None:
    events: list[tuple[str, int, int]] = []
    again = tmp_path / "again"
    source = models_dir / "kokoro"
    rebuild_from_onnx(source / ONNX_FILE, source / VOICES_FILE, again, lambda *e: events.append(e))
    assert _digest(again) == _digest(rebuilt)
    stages = {stage for stage, _, _ in events}
    assert {"read", "convert", "verify", "voices"} <= stages
    for stage in stages:
        done, total = [(d, t) for s, d, t in events if s == stage][-1]
        assert done == total > 0


@pytest.mark.slow
def test_a_graph_that_is_not_kokoro_fails_and_leaves_nothing_behind(tmp_path: Path, models_dir: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w_quantized", TensorProto.INT8, [4, 4], [1] * 16)
    node = helper.make_node("MatMulInteger", ["x", "w_quantized"], ["y"], name="/encoder/mystery/MatMul_quant")
    graph = helper.make_graph([node], "not-kokoro", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 4])], [weight])
    bogus = tmp_path / "bogus.onnx"
    onnx.save(helper.make_model(graph), str(bogus))
    out = tmp_path / "out"
    with pytest.raises(RebuildError):
        rebuild_from_onnx(bogus, models_dir / "kokoro" / VOICES_FILE, out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bogus]  # no staging directory left either
