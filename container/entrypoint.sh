#!/bin/sh
# Start voicecli's Kokoro endpoint the way SageMaker AI expects.
#
# SageMaker runs the image as `docker run IMAGE serve`: a leading "serve" is dropped; any other arguments are
# passed through to the server after the defaults below, so they win (argparse keeps the last value), e.g.
#   docker run IMAGE serve --engine onnx
#
# Settings (environment; the names are voicecli's own config overrides, so the server reads the same keys):
#   VOICECLI_ENDPOINT__LOCAL__ENGINE   auto | torch | onnx           (default auto: torch on a CUDA GPU, else onnx)
#   VOICECLI_ENDPOINT__LOCAL__WORKERS  parallel inferences, auto|1..64 (default auto: one per core on a CPU, one on a GPU)
#   VOICECLI_ENDPOINT__LOCAL__THREADS  threads per inference, auto|1..64 (default auto: usable cores / workers)
#   VOICECLI_ENDPOINT__LOCAL__MAX_BATCH pieces per engine call, auto|1..64 (default auto: 8 for torch on a GPU, else 1)
#   VOICECLI_MODELS__DIR               models directory              (default /opt/models, baked in at build time)
#   SAGEMAKER_BIND_TO_PORT             port SageMaker asks for       (default 8080, the container contract)
#   VOICECLI_CUDA_COMPAT               auto | on | off               (default auto, see cuda_compat below)
#   VOICECLI_CUDA_COMPAT_DIR           CUDA forward-compat libraries (default /usr/local/cuda/compat)
#   VOICECLI_PYTHON                    interpreter                   (default python, the image's venv on PATH)
#   VOICECLI_ENTRYPOINT_DRY_RUN        when non-empty: print what would run and exit 0 instead of exec'ing it
#                                      (first line LD_LIBRARY_PATH=..., then one argument per line)
set -eu

# The CUDA forward-compatibility libraries let a CUDA 12 runtime run on a pre-525 host driver (the default
# SageMaker AMI for ml.g5 ships R470). From R525 on, CUDA 12 minor-version compatibility needs no compat
# libraries, and forcing them onto an unsupported driver branch breaks CUDA initialisation: so "auto" enables
# them only below R525, "on"/"off" force the choice.
cuda_compat() {
    mode=${VOICECLI_CUDA_COMPAT:-auto}
    dir=${VOICECLI_CUDA_COMPAT_DIR:-/usr/local/cuda/compat}
    case "$mode" in
        off) return 0 ;;
        on) ;;
        auto)
            command -v nvidia-smi >/dev/null 2>&1 || return 0
            driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1) || return 0
            major=${driver%%.*}
            case "$major" in '' | *[!0-9]*) return 0 ;; esac
            [ "$major" -lt 525 ] || return 0
            echo "entrypoint: host NVIDIA driver $driver < 525: using CUDA forward compatibility from $dir" >&2
            ;;
        *)
            echo "entrypoint: VOICECLI_CUDA_COMPAT must be auto, on or off, not '$mode'" >&2
            exit 64
            ;;
    esac
    if [ -d "$dir" ]; then
        LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LD_LIBRARY_PATH
    fi
}

if [ "${1:-}" = "serve" ]; then
    shift
fi

cuda_compat

set -- "${VOICECLI_PYTHON:-python}" -m voicecli_endpoint \
    --host 0.0.0.0 \
    --port "${SAGEMAKER_BIND_TO_PORT:-8080}" \
    --engine "${VOICECLI_ENDPOINT__LOCAL__ENGINE:-auto}" \
    --workers "${VOICECLI_ENDPOINT__LOCAL__WORKERS:-auto}" \
    --threads "${VOICECLI_ENDPOINT__LOCAL__THREADS:-auto}" \
    --max-batch "${VOICECLI_ENDPOINT__LOCAL__MAX_BATCH:-auto}" \
    --models-dir "${VOICECLI_MODELS__DIR:-/opt/models}" \
    "$@"

if [ -n "${VOICECLI_ENTRYPOINT_DRY_RUN:-}" ]; then
    printf 'LD_LIBRARY_PATH=%s\n' "${LD_LIBRARY_PATH:-}"
    printf '%s\n' "$@"
    exit 0
fi

exec "$@"
